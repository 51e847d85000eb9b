// The plain reference kernels ("naive" registrations), the oracle of the
// tests: each operator computed from its definition with plain loops over
// the raw inputs, float64 arithmetic, one full score row at a time, their
// own float16 / bfloat16 conversions, serially. They share only the
// validation (the adapters) with the optimized kernels, never the engine.
#ifndef OLC_ATTENTION_ATTN_NAIVE_H_
#define OLC_ATTENTION_ATTN_NAIVE_H_

#include <cstdint>

namespace olc_attn {
namespace naive {

// dt: 0 float32, 1 float16, 2 bfloat16 (attn_common.h's Storage).
double load(int dt, const void* p, int64_t i);
void store(int dt, void* p, int64_t i, double v);

// ai.onnx Attention, every input as the node received it (shapes checked).
struct OnnxAttention {
  int dt = 0;
  int rank = 4;                          // of Q, K, V
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, L = 0, P = 0, D = 0, Dv = 0;
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  const void *past_k = nullptr, *past_v = nullptr;  // (B, Hkv, P, D / Dv) or null
  const void* mask = nullptr;            // null, bool (mask_dt -1) or a float type
  int mask_dt = -1;
  int mask_rank = 0;
  const int64_t* mask_shape = nullptr;
  const int64_t* nonpad = nullptr;       // (B) or null
  bool has_scale = false;
  double scale = 0;
  int causal = 0;
  int64_t left = -1, right = -1;
  double softcap = 0;
  int qk_mode = 0;
  void *y = nullptr, *present_k = nullptr, *present_v = nullptr, *qk = nullptr;  // null: not wanted
};
void onnx_attention(const OnnxAttention& a);

// RotaryEmbedding of both domains: x (rank 4 (B, H, S, hd) or rank 3
// (B, S, H * hd)); cos / sin rows of `cache_cols` values, the first rot / 2
// used. The cache row of (b, s) is position_ids[b' * S + s] (b' = b, or 0
// when pos_batch is 1), else start + s when start_pos, else the 3-D cache
// row b' * cache_s + s' (dims of 1 broadcast).
struct Rotary {
  int dt = 0;
  int rank = 4;
  int64_t B = 0, H = 0, S = 0, hd = 0, rot = 0;
  int interleaved = 0;
  const void *x = nullptr, *cos = nullptr, *sin = nullptr;
  int64_t cache_cols = 0;
  const int64_t* position_ids = nullptr;
  int64_t pos_batch = 0;
  const int64_t* start_pos = nullptr;
  int64_t cache_b = 0, cache_s = 0;      // 3-D caches without positions
  void* y = nullptr;
};
void rotary(const Rotary& a);

// com.microsoft GroupQueryAttention as onnxruntime defines it: query (B, S,
// Hq * D) or packed (B, S, (Hq + 2 Hkv) * D); past caches (B, Hkv, P, D);
// total length of batch b tl = seqlens[b] + 1; the first prompt (S equal to
// total_sequence_length) has no past, else the past length is tl - S.
struct Gqa {
  int dt = 0;
  int64_t B = 0, S = 0, Hq = 0, Hkv = 0, D = 0;
  const void *q = nullptr, *k = nullptr, *v = nullptr;  // k, v null: packed in q
  const void *past_k = nullptr, *past_v = nullptr;
  int64_t P = 0;                          // past buffer length
  const int64_t* seqlens = nullptr;
  int64_t total = 0;
  int64_t Tp = 0;                         // present length
  const void *cos = nullptr, *sin = nullptr;  // do_rotary: rows of rot / 2 values
  int64_t rot = 0;
  int interleaved = 0;
  const int64_t* position_ids = nullptr;  // (B, S) or null
  const void* bias = nullptr;             // (bb, bh, S, bt) or null
  int64_t bias_b = 0, bias_h = 0, bias_t = 0;
  const void* sink = nullptr;             // (Hq) or null
  int smooth = 0;
  double scale = 0;                       // 0: 1 / sqrt(D)
  double softcap = 0;
  int64_t local = -1;
  int causal = 1;
  void *y = nullptr, *present_k = nullptr, *present_v = nullptr;
};
void gqa(const Gqa& a);

// onnxruntime's key masks (int32): lengths (B), end and start positions
// (2B), 0/1 per key (B, T) or per query and key (B, S, T); a masked key
// gets `filter` added to its score.
struct KeyMask {
  const int32_t* data = nullptr;
  int rank = 0;
  const int64_t* shape = nullptr;
  double filter = -10000.0;
};

// com.microsoft MultiHeadAttention. Layouts: "separate" query (B, S, N * H),
// key (B, L, N * H), value (B, L, N * Hv); "packed_qkv" query (B, S, N, 3, H);
// "packed_kv" key (B, L, N, 2, H); "bnsh" key (B, N, L, H), value
// (B, N, L, Hv) (no bias on them). bias: Q, K, V biases back to back.
struct Mha {
  int dt = 0;
  int layout = 0;  // 0 separate, 1 packed_qkv, 2 packed_kv, 3 bnsh
  int64_t B = 0, S = 0, L = 0, P = 0, N = 0, H = 0, Hv = 0;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *bias = nullptr;
  const void *past_k = nullptr, *past_v = nullptr;
  KeyMask mask;
  const void* attn_bias = nullptr;  // (bb, bh, S, T)
  int64_t ab_b = 0, ab_h = 0;
  double scale = 0;                 // 0: 1 / sqrt(H)
  int causal = 0;
  void *y = nullptr, *present_k = nullptr, *present_v = nullptr;
};
void mha(const Mha& a);

// com.microsoft Attention: Q, K, V = x . W + bias (hidden sizes dq, dk, dv),
// then multi-head attention with the past (2, B, N, P, H) in front of K, V.
// w null: x is the product already (B * S rows of dq + dk + dv), Q, K, V =
// x + bias (the projected form olc.fused::PackedQkvAttention).
struct MsAttention {
  int dt = 0;
  int64_t B = 0, S = 0, Din = 0, N = 0, dq = 0, dk = 0, dv = 0, P = 0;
  const void *x = nullptr, *w = nullptr, *bias = nullptr, *past = nullptr;
  KeyMask mask;
  const void* attn_bias = nullptr;
  int64_t ab_b = 0, ab_h = 0;
  double scale = 0;
  int causal = 0;
  void *y = nullptr, *present = nullptr;
};
void ms_attention(const MsAttention& a);

// ai.onnx TensorScatter: out = past with update's rows written along axis.
struct Scatter {
  int64_t elem = 1;                      // bytes per element
  int rank = 0;
  const int64_t* shape = nullptr;        // past's
  int axis = 0;
  int64_t seq = 0;                       // update's length along axis
  const void *past = nullptr, *update = nullptr;
  const int64_t* write_indices = nullptr;
  int circular = 0;
  void* out = nullptr;
};
void tensor_scatter(const Scatter& a);

}  // namespace naive
}  // namespace olc_attn

#endif  // OLC_ATTENTION_ATTN_NAIVE_H_
