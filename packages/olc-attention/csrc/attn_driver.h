// The portable driver of the attention engine: cuts a problem into work
// items, runs them on the session's executor (split-KV for decode when
// there are fewer items than threads), and writes KV caches. Compiled
// without ISA flags; the arithmetic is the ISA tables' (attn_engine.inc).
#ifndef OLC_ATTENTION_ATTN_DRIVER_H_
#define OLC_ATTENTION_ATTN_DRIVER_H_

#include <cstdint>
#include <vector>

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

// The input projection of com.microsoft Attention: C (M x N, storage dt) =
// A (M x K, storage dt) . W + bias (N values of storage dt, or null), float32
// accumulation. W is float32, K x ldw with ldw >= N a multiple of the ISA's
// vector width (columns past N zero; see pack_weights). Rows of A are split
// over the executor; each worker walks W in K x N panels that stay in L2.
int32_t run_projection(const olc_core_api* api, olc_context* ctx, const IsaKernels* k, int dt, int64_t M, int64_t K,
                       int64_t N, const void* A, const float* W, int64_t ldw, const void* bias, void* C);

// W (K x N, storage dt) as float32 rows of ldw = N rounded up to the vector
// width, zero-padded.
std::vector<float> pack_weights(const IsaKernels* k, int dt, int64_t K, int64_t N, const void* W, int64_t* ldw);

}  // namespace olc_attn

#endif  // OLC_ATTENTION_ATTN_DRIVER_H_
