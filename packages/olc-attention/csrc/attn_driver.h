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

// A KV cache written once: out (B, H, T, D) contiguous, row t of (b, h) is
//   past row t            for t < past_len[b]   (past_len null: P),
//   new row t - past_len  for the next S rows, rotated by `rope` at
//                         position rope->pos[b * pos_sb + s] when rope is given,
//   past row t            after that while t < P, else zero.
struct CacheWrite {
  int dt = kF32;
  int64_t B = 0, H = 0, T = 0, D = 0;
  View past;
  int64_t P = 0;
  const int64_t* past_len = nullptr;
  View cur;
  int64_t S = 0;
  const Rope* rope = nullptr;
  void* out = nullptr;
};
void write_cache(const olc_core_api* api, olc_context* ctx, const IsaKernels* k, const CacheWrite& c);

}  // namespace olc_attn

#endif  // OLC_ATTENTION_ATTN_DRIVER_H_
