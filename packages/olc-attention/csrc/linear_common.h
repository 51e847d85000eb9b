// Shared declarations of the recurrent-state operators (LinearAttention of
// both domains, CausalConvWithState): the problems the adapters describe and
// the compute table each ISA translation unit fills from linear_kernels.inc.
// Plain data and declarations only, so this header is safe to include from
// TUs compiled with different ISA flags.
#ifndef OLC_ATTENTION_LINEAR_COMMON_H_
#define OLC_ATTENTION_LINEAR_COMMON_H_

#include <cstdint>

#include "attn_common.h"  // Storage (kF32, kF16, kBF16)

namespace olc_attn {

// LinearAttention's update_rule: bit 0 gating (decay), bit 1 delta (beta).
enum LinearRule : int { kRuleLinear = 0, kRuleGated = 1, kRuleDelta = 2, kRuleGatedDelta = 3 };

// One LinearAttention problem, every tensor contiguous as the node received
// it; q, k, v, decay, beta and y of storage type dt, the states of sdt:
//   q (B, T, Hq * dk), k (B, T, Hk * dk), v (B, T, Hkv * dv),
//   decay (B, T, Hkv * dk) when decay_per_key, else (B, T, Hkv),
//   beta (B, T, Hkv) when beta_per_head, else (B, T, 1),
//   past (B, Hkv, dk, dv) or null (zeros),
//   y (B, T, max(Hq, Hkv) * dv),
//   present (B, Hkv, dk, dv) when window is 0, else (window, B, Hkv, dk, dv):
//   slot j the state after token T - window + j, zeros for the slots before
//   the first token of the call, slot window - 1 always the final state.
// The state S of kv head g (dk x dv) takes, per token t, with a = exp(decay)
// (per key row or one per head) and b = beta:
//   gated:  S = a * S;
//   delta:  u = b * (v_t - S^T k_t)  (after the decay), else u = v_t;
//   S += k_t u^T;  o = scale * S^T q_t.
// kv head g reads key head g / (Hkv / Hk). Query heads: Hq >= Hkv, heads
// g * G .. g * G + G - 1 (G = Hq / Hkv), each written at its own slot of y;
// Hq < Hkv (onnxruntime's inverse GQA), head g / (Hkv / Hq) written at slot g.
struct LinAttnProblem {
  int dt = kF32, sdt = kF32;
  int rule = kRuleGatedDelta;
  int64_t B = 0, T = 0, Hq = 0, Hk = 0, Hkv = 0, dk = 0, dv = 0;
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  const void *decay = nullptr, *beta = nullptr, *past = nullptr;
  bool decay_per_key = false, beta_per_head = false;
  float scale = 1.0f;
  int64_t window = 0;
  int64_t chunk = 64;  // tokens whose inputs are converted at once
  bool wide = false;   // one query head per kv head: slabs of LinearKernels::slab_wide columns
  void *y = nullptr, *present = nullptr;
};

// One CausalConvWithState problem (storage type dt): x and y (B, C, L),
// w (C, 1, K), bias (C) or null, past and present (B, C, K - 1), past null
// for zeros. Row r = b * C + c of y is
//   y[t] = act(bias + sum_j w[j] * xp[t + j]),  xp = past row | x row,
// and present's row is the last K - 1 values of xp. act: identity or SiLU.
struct ConvProblem {
  int dt = kF32;
  int64_t B = 0, C = 0, L = 0, K = 0;
  const void *x = nullptr, *w = nullptr, *bias = nullptr, *past = nullptr;
  void *y = nullptr, *present = nullptr;
  int silu = 0;
};

// One LinearAttention work item: the columns [c0, c1) of the state of kv
// head g in batch b, over every token.
struct LinItem {
  int64_t b = 0, g = 0, c0 = 0, c1 = 0;
};

struct LinearKernels {
  const char* isa;
  // Runs the items [begin, end) of `items` (may throw std::bad_alloc for
  // its scratch).
  void (*linattn)(const LinAttnProblem* p, const LinItem* items, int64_t begin, int64_t end);
  // The channels [c0, c1) of batch row b of the convolution (may throw
  // std::bad_alloc).
  void (*conv)(const ConvProblem* p, int64_t b, int64_t c0, int64_t c1);
  int64_t slab;       // state columns one pass keeps in registers
  int64_t slab_wide;  // the same for LinAttnProblem::wide
};

namespace scalar { const LinearKernels* linear_kernels(); }
namespace avx2 { const LinearKernels* linear_kernels(); }
namespace avx512 { const LinearKernels* linear_kernels(); }

namespace naive {
// The plain references (linear_naive.cc): loops over the definitions,
// float64 arithmetic, serially; they share only the validation with the
// optimized kernels.
void linear_attention(const LinAttnProblem& p);
void causal_conv(const ConvProblem& p);
}  // namespace naive

}  // namespace olc_attn

#endif  // OLC_ATTENTION_LINEAR_COMMON_H_
