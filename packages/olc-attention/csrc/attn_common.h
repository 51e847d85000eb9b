// Shared declarations of the attention family: the problem an adapter
// describes, the work items the driver cuts it into, and the compute table
// each ISA translation unit fills. Plain data and declarations only, so
// this header is safe to include from TUs compiled with different ISA flags.
#ifndef OLC_ATTENTION_ATTN_COMMON_H_
#define OLC_ATTENTION_ATTN_COMMON_H_

#include <cstdint>

namespace olc_attn {

// Storage types of Q, K, V, the outputs and the float inputs, as table indices.
enum Storage : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

// A strided 4-D view (batch, head, row, d) whose last axis is contiguous:
// element (b, h, s, d) is at data + b * sb + h * sh + s * ss + d, counted in
// elements of the storage type. Packed layouts (BSNH, packed QKV) are views.
struct View {
  const void* data = nullptr;
  int64_t sb = 0, sh = 0, ss = 0;
};
struct OutView {
  void* data = nullptr;
  int64_t sb = 0, sh = 0, ss = 0;
};

// A mask term broadcast over (batch, query head, query row, key): element
// strides, 0 along a broadcast axis. kMaskAdd: a value of storage type dt
// added to the score (-inf excludes the key); kMaskKeep: one byte, 0
// excludes the key. Keys at or beyond `cols` are excluded (ONNX pads a mask
// shorter than the keys with -inf / false).
enum MaskKind : int { kMaskNone = 0, kMaskAdd = 1, kMaskKeep = 2 };
struct Mask {
  int kind = kMaskNone;
  int dt = kF32;
  const void* data = nullptr;
  int64_t sb = 0, sh = 0, sq = 0, st = 0;
  int64_t cols = 0;
};

// Rotary embedding of the first `rot` elements of a head row. The cos and
// sin caches (storage type dt) hold rot / 2 values for cache row p at
// cos + p * ld. Split-half: x[i] and x[i + rot/2] rotate by angle i;
// interleaved: x[2i] and x[2i + 1]. The position (cache row) of row s of
// batch b is pos[b * pos_sb + s]; the adapter checks every position
// against the cache length before anything runs.
struct Rope {
  int64_t rot = 0;  // 0: no rotation
  int interleaved = 0;
  int dt = kF32;
  const void* cos = nullptr;
  const void* sin = nullptr;
  int64_t ld = 0;
  const int64_t* pos = nullptr;
  int64_t pos_sb = 0;
};

struct IsaKernels;

// A KV cache written once: out (B, H, T, D) contiguous, row t of (b, h) is
//   past row t            for t < past_len[b]   (past_len null: P),
//   new row t - past_len  for the next S rows, plus `bias` when given,
//                         rotated by `rope` at position rope->pos[b * pos_sb + s]
//                         when rope is given,
//   past row t            after that while t < P, else zero.
struct CacheWrite {
  const IsaKernels* k = nullptr;  // for the rotation
  int dt = kF32;
  int64_t B = 0, H = 0, T = 0, D = 0;
  View past;
  int64_t P = 0;
  const int64_t* past_len = nullptr;
  View cur;
  int64_t S = 0;
  const Rope* rope = nullptr;
  // float32 bias added to every new row (head h adds bias[h * D ..]), or null.
  const float* bias = nullptr;
  void* out = nullptr;
};

// Writes rows [t0, t1) of (b, h) of the cache c (attn_driver.cc).
void fill_cache_rows(const CacheWrite& c, int64_t b, int64_t h, int64_t t0, int64_t t1);

// What the debug score output holds (ai.onnx qk_matmul_output_mode).
enum QkMode : int { kQkRaw = 0, kQkCapped = 1, kQkBiased = 2, kQkProbs = 3 };

// One attention problem: Y[b, h, i] = softmax_j(score(b, h, i, j)) . V[b, g, j]
// with g = h / (Hq / Hkv) and score = softcap(scale * Q[b,h,i] . K[b,g,j])
// plus the mask terms; key j is visible to query row i of batch b iff
// lo <= j < hi with pos = q_off[b] + i,
//   hi = min(T, kv_len[b], causal ? pos + 1 : T, right >= 0 ? pos + right + 1 : T),
//   lo = left >= 0 ? pos - left : 0,
// and no mask term excludes it. A row that sees no key is zero.
// head_sink (one value per query head, or null) adds exp(sink - max) to the
// softmax denominator. The adapters validate everything; the engine only
// computes.
struct AttnProblem {
  int dt = kF32;
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, T = 0, D = 0, Dv = 0;
  View q, k, v;  // q: (b, h, i, d); k, v: (b, g, j, d)
  OutView y;     // (b, h, i, dv)
  float scale = 1.0f;
  float softcap = 0.0f;  // 0: none
  Mask mask[2];
  const int64_t* q_off = nullptr;   // per batch, null: 0
  const int64_t* kv_len = nullptr;  // per batch, null: T
  int causal = 0;
  int64_t left = -1, right = -1;    // window bounds, -1: unbounded
  const float* sink = nullptr;      // per query head
  Rope rope;                        // applied to Q rows as they are loaded
  void* qk = nullptr;               // (B, Hq, Sq, T) scores of type dt, or null
  int qk_mode = kQkRaw;
  // Caches the engine fills itself (decode: k, v are views of their outputs):
  // a work item writes the rows [fill0, fill1) of its kv head, each tile's
  // rows just before it reads them, so they are read back from cache.
  const CacheWrite* fill_k = nullptr;
  const CacheWrite* fill_v = nullptr;
  // float32 biases of the projections the views hold unbiased (com.microsoft
  // Attention after its projection), added as the rows are used: Q row of
  // head h + q_bias[h * D ..] (before rope and scale); K and V of kv head g +
  // k_bias[g * D ..], v_bias[g * Dv ..]. The engine never forms biased K / V:
  // the K bias adds q . k_bias to every score of a query row, the V bias
  // adds l * v_bias to its unnormalized output (l: the row's softmax sum),
  // which is what the biased rows give. Null: none. K and V read through a
  // cache the engine fills hold their bias already (CacheWrite::bias).
  const float* q_bias = nullptr;
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
};

// One unit of work: query rows [i0, i1) of the Hq / Hkv query heads of kv
// head g in batch b, against keys [t0, t1). part null: the rows are
// finished into Y; else the unnormalized state goes to part (split-KV
// decode): m[R], l[R], acc[R * Dv] with R = (Hq / Hkv) * (i1 - i0).
struct WorkItem {
  int64_t b = 0, g = 0, i0 = 0, i1 = 0, t0 = 0, t1 = 0;
  float* part = nullptr;
  int64_t fill0 = 0, fill1 = 0;  // cache rows this item writes (AttnProblem::fill_k / fill_v)
};

struct IsaKernels {
  const char* isa;
  // Runs one work item (may throw std::bad_alloc for its scratch).
  void (*attend)(const AttnProblem* p, const WorkItem* w);
  // Combines the `n` partial states of item w (parts[s], each laid out as
  // WorkItem::part) and finishes its rows into Y.
  void (*reduce)(const AttnProblem* p, const WorkItem* w, float* const* parts, int64_t n);
  // One head row of D elements of storage type dt, rotated at position
  // `pos` of r (x and y may be the same row).
  void (*rope_row)(int dt, const Rope* r, int64_t pos, const void* x, void* y, int64_t D);
  // Storage <-> float32 of n elements.
  void (*to_f32)(int dt, const void* x, float* y, int64_t n);
  void (*from_f32)(int dt, const float* x, void* y, int64_t n);
  // C[M, N] = A[M, K] . B[K, N] for float32 row-major A (lda), B (ldb, N a
  // multiple of the vector width) and C (ldc); acc: C += instead of C =.
  void (*gemm)(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, float* C, int64_t ldc, int64_t M,
               int64_t N, int acc);
  int64_t width;  // float32 lanes of the level's vectors
};

// The keys [lo, hi) that query row i of batch b may see (the structural
// rules of AttnProblem: causal, window, kv_len; hi <= lo: none). Defined in
// attn_driver.cc, shared by the driver (work item ranges) and the engine
// (per-row bounds).
void key_bounds(const AttnProblem& p, int64_t b, int64_t i, int64_t* lo, int64_t* hi);

namespace scalar { const IsaKernels* kernels(); }
namespace avx2 { const IsaKernels* kernels(); }
namespace avx512 { const IsaKernels* kernels(); }

}  // namespace olc_attn

#endif  // OLC_ATTENTION_ATTN_COMMON_H_
