// The portable driver of the attention engine: cuts a problem into work
// items, runs them on the session's executor (split-KV for decode when
// there are fewer items than threads), and writes KV caches. Compiled
// without ISA flags; the arithmetic is the ISA tables' (attn_engine.inc).
#ifndef OLC_ATTENTION_ATTN_DRIVER_H_
#define OLC_ATTENTION_ATTN_DRIVER_H_

#include <cstdint>

#include "attn_common.h"
#include "olc/kernel_abi.h"

namespace olc_attn {

struct EngineTuning {
  int64_t rows = 64;             // query rows per work item (all heads of a group together)
  int64_t split_min_keys = 256;  // the fewest keys a split-KV part takes
};

// Runs the problem. OLC_OK, or OLC_ERROR with the error set on ctx.
int32_t run_attention(const olc_core_api* api, olc_context* ctx, const IsaKernels* k, const AttnProblem& p,
                      const EngineTuning& tune);

// Writes every row of the cache (see CacheWrite in attn_common.h) on the executor.
void write_cache(const olc_core_api* api, olc_context* ctx, const CacheWrite& c);

}  // namespace olc_attn

#endif  // OLC_ATTENTION_ATTN_DRIVER_H_
