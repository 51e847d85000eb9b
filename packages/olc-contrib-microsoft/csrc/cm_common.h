// Shared declarations of the com.microsoft family: the compute tables each
// ISA translation unit fills, and the plain reference kernels. Plain data
// and declarations only, so this header is safe to include from TUs
// compiled with different ISA flags.
#ifndef OLC_CONTRIB_MICROSOFT_CM_COMMON_H_
#define OLC_CONTRIB_MICROSOFT_CM_COMMON_H_

#include <cstdint>

namespace olc_cm {

// Storage types of the rows, as table indices. kF64 only where an
// operator's schema has float64 (BiasSoftmax, CDist).
enum Storage : int { kF32 = 0, kF16 = 1, kBF16 = 2, kF64 = 3 };

// Activations of the elementwise ops.
enum Act : int {
  kActGeluErf = 0,   // x * Phi(x), Phi the standard normal CDF (Gelu, BiasGelu)
  kActGeluTanh = 1,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (FastGelu)
  kActQuick = 2,     // x * sigmoid(alpha x) (QuickGelu)
  kActNone = 3       // identity (BiasAdd)
};

// Element formats of GatherBlockQuantized data and zero points, one byte
// per element unless packed (packed: low-order bits first within a byte).
enum QFormat : int {
  kQU8 = 0,  // uint8, 8 bits
  kQU4 = 1,  // uint4 as the runtime holds it: one element per byte, value in the low 4 bits
  kQI4 = 2,  // int4, likewise (signed low nibble)
  kQP4 = 3,  // uint8 holding two 4-bit values
  kQP2 = 4   // uint8 holding four 2-bit values
};

// One normalized row: s = x + skip (+ third) (+ bias), then
// y = (s - mean) * inv * gamma (+ beta), inv = 1 / sqrt(var + eps), or with
// simplified != 0 (RMS) y = s * inv * gamma, inv = 1 / sqrt(mean(s^2) + eps).
// gamma, beta and bias are float32 vectors of H elements (beta, bias may be
// null). The adapter validates everything; these only compute.
struct SkipRow {
  const float* gamma;
  const float* beta;
  const float* bias;
  int64_t H;
  float eps;
  int simplified;
};

// CDist over the whole output: C[i][j] = sum_k (A[i][k] - B[j][k])^2
// (square root for euclidean). Elements are float (kF32) or double (kF64)
// as the table slot says; pointers are typed void to share the struct.
struct CDistArgs {
  const void* A;       // M x K
  const void* B;       // N x K (the original rows: exact recomputation)
  const void* packed;  // B in panels of nr rows: [panel][K][nr], zero padded
  const void* a_ss;    // M squared norms
  const void* b_ss;    // N squared norms
  void* C;             // M x N
  int64_t M, N, K;
  int nv;              // vectors per panel (nr = nv * lanes)
  int euclidean;
};

// MoE expert activations and gate/linear layouts (swiglu_fusion 0, 1, 2).
enum MoeActType : int { kMoeRelu = 0, kMoeGelu = 1, kMoeSilu = 2, kMoeIdentity = 3, kMoeSwiglu = 4 };
enum MoeLayout : int { kMoeSeparate = 0, kMoeInterleaved = 1, kMoeConcatenated = 2 };

// h = act(g) (* l when FC3 is given), or for swiglu
// h = G * sigmoid(alpha G) * (L + beta), G = min(g, limit),
// L = clamp(l, -limit, limit); g and l from FC1 (interleaved [g0, l0, g1,
// ...] or concatenated [g | l]) or FC1 and FC3 (separate).
struct MoeAct {
  int act;
  int layout;
  float alpha, beta, limit;
};

struct IsaKernels {
  const char* isa;
  // x, skip, y: rows of H elements of the storage type; third: another such
  // row added after skip (EmbedLayerNormalization's segment row) or null;
  // sum: the input_skip_bias_sum row or null; scratch: H floats (not
  // touched when the storage is float32 and sum is given: s is kept in sum).
  // *mean gets the mean (0 when simplified), *inv the inverse deviation.
  void (*skip_norm_row[3])(const SkipRow* a, const void* x, const void* skip, const void* third, void* y, void* sum,
                           float* scratch, float* mean, float* inv);
  // y[i] = act((x[i] + bias[(phase + i) % H]) + skip[i]) for i in [0, n);
  // bias (float32, H elements) and skip may be null. x, skip and y point at
  // element 0 of the span.
  void (*act_span[3])(int act, float alpha, const void* x, const void* skip, const float* bias, int64_t H,
                      int64_t phase, void* y, int64_t n);
  // Storage <-> float32 conversions (parameters of 16-bit types; MoE rows).
  void (*to_f32[3])(const void* x, float* y, int64_t n);
  void (*from_f32[3])(const float* x, void* y, int64_t n);
  // y = softmax(x + bias) over one row of E elements. scratch: E floats for
  // the 16-bit storages (float32 and float64 rows are kept in y).
  void (*bias_softmax_row[4])(const void* x, const void* bias, void* y, float* scratch, int64_t E);
  // CDist (index kF32 or kF64; other slots null). lanes: elements per
  // vector; max_nv: the widest panel in vectors. pack_b packs N rows of B
  // (K each) into panels of nv * lanes rows; sumsq writes the squared norm
  // of each of `rows` rows. rows: outputs of A rows [i0, i1) against the
  // panels [p0, p1); direct: exact sums for A rows [i0, i1) against B rows
  // [j0, j1) (used when M is small: no packing).
  int cdist_lanes[4];
  int cdist_max_nv[4];
  void (*cdist_pack_b[4])(const void* B, int64_t N, int64_t K, int nv, void* packed);
  void (*cdist_sumsq[4])(const void* X, int64_t rows, int64_t K, void* out);
  void (*cdist_rows[4])(const CDistArgs* a, int64_t i0, int64_t i1, int64_t p0, int64_t p1);
  void (*cdist_direct[4])(const CDistArgs* a, int64_t i0, int64_t i1, int64_t j0, int64_t j1);
  // GatherBlockQuantized, per output storage (f32, f16, bf16).
  // blocks: one row of L elements along the quantize axis (the innermost
  // axis): element e uses scale[e / bs] and zero point zp[e / bs]; scale
  // and zp already widened (float, int32) by the caller.
  void (*dq_blocks[3])(int fmt, const uint8_t* q, const float* scale, const int32_t* zp, int64_t L, int64_t bs,
                       void* y);
  // elems: y[i] = (q[i] - zp[i]) * scale[i] for i in [0, n), the scales in
  // the output storage type and zp in the data format (null: default_zp).
  // Unpacked formats only.
  void (*dq_elems[3])(int fmt, const uint8_t* q, const void* scale, const uint8_t* zp, int32_t default_zp, int64_t n,
                      void* y);
  // MoE / QMoE (float32 arithmetic, weight rows already float32).
  // pack_panel: rows [0, nrows) (K each) into a panel [K][nv * lanes],
  // later columns zero; gemm: C[i][c] = sum_k X[i][k] panel[k][c] for n
  // rows and ncols columns; dot: out[i * stride] = w . X[i] for n rows;
  // act: MoeAct over n rows of I outputs.
  int moe_lanes;
  int moe_max_nv;  // widest token panel, in vectors (moe_gemm's tiles keep their sums in registers)
  void (*moe_pack_panel)(const float* const* rows, int64_t nrows, int64_t K, int nv, float* panel);
  void (*moe_dot)(const float* w, const float* X, int64_t n, int64_t K, float* out, int64_t stride);
  // qdot: moe_dot of a quantized weight row (format fmt, K elements in
  // blocks of bs with their scales and zero points, as dq_blocks takes
  // them), read once in that form: the decode case's products.
  void (*moe_qdot)(int fmt, const uint8_t* q, const float* scale, const int32_t* zp, int64_t K, int64_t bs,
                   const float* X, int64_t n, float* out, int64_t stride);
  void (*moe_gemm)(const float* X, int64_t n, int64_t K, const float* panel, int nv, float* C, int64_t ldc,
                   int64_t ncols);
  void (*moe_act)(const MoeAct* a, const float* fc1, int64_t ld1, const float* fc3, int64_t ld3, float* out, int64_t n,
                  int64_t I);
};

namespace scalar { const IsaKernels* kernels(); }
namespace avx2 { const IsaKernels* kernels(); }
namespace avx512 { const IsaKernels* kernels(); }

// The plain reference kernels (cm_naive.cc): one loop per formula, float64
// arithmetic for the statistics and the activations, their own element
// conversions. Serial; same contracts as above but over whole tensors.
namespace naive {
// rows of H; skip row r is skip + (r % skip_rows) * H. Parameters in their
// storage type (dt, like x). mean / inv: float32 per row, or null.
void skip_norm(int dt, int simplified, float eps, const void* x, const void* skip, int64_t skip_rows,
               const void* gamma, const void* beta, const void* bias, int64_t rows, int64_t H, void* y, float* mean,
               float* inv, void* sum);
// n elements, bias of H elements (index i % H) or null, skip or null.
void act(int dt, int act, float alpha, const void* x, const void* bias, int64_t H, const void* skip, void* y,
         int64_t n);
// EmbedLayerNormalization over `tokens` rows of H: word row word_ids[t],
// position row pos_ids[t], segment row seg_ids[t] (seg null: none). The ids
// are already checked to be in range.
void embed(int dt, float eps, const int64_t* word_ids, const int64_t* pos_ids, const int64_t* seg_ids,
           const void* word, const void* pos, const void* seg, const void* gamma, const void* beta, int64_t tokens,
           int64_t H, void* y, void* sum);
// rows of E; row r adds bias row bias_row(r): r / inner when inner > 0,
// else r % outer.
void bias_softmax(int dt, const void* x, const void* bias, int64_t rows, int64_t E, int64_t inner, int64_t outer,
                  void* y);
void cdist(int dt, const void* A, const void* B, int64_t M, int64_t N, int64_t K, int euclidean, void* C);
// GatherBlockQuantized over the logical data shape dims[0..rank) (the
// packed axis already multiplied out); indices (int64) of n_idx values;
// output in dt. zp null: default_zp.
void gather_block_quantized(int dt, int fmt, const uint8_t* data, const int64_t* dims, int rank, const int64_t* idx,
                            int64_t n_idx, const void* scales, const uint8_t* zp, int32_t default_zp, int gather_axis,
                            int quantize_axis, int64_t block_size, void* y);
// MoE / QMoE over `tokens` rows of H (x in dt), everything else already
// widened by the caller: router[t][e] (float32), expert weights as float32
// [E][N][K] (dequantized for QMoE), biases float32 or null. Routing:
// softmax over the experts, the k largest (ties: the lower index), their
// weights renormalized when `normalize`, or taken from router_weights when
// given. Output in dt.
// float32 copies by the reference's own conversions.
void widen(int dt, const void* src, int64_t n, float* dst);
// rows of K values of `bits` bits (row_bytes each, low bits first):
// out[r][k] = (q - zp[r][k / bs]) * scale[r][k / bs].
void dequant_rows(const uint8_t* q, int bits, int64_t row_bytes, const float* scale, const int32_t* zp, int64_t blocks,
                  int64_t rows, int64_t K, int64_t bs, float* out);
void moe(int dt, const void* x, int64_t tokens, int64_t H, int64_t I, int64_t E, int64_t k, int normalize,
         const float* router, const float* router_weights, const MoeAct* act, const float* w1, const float* b1,
         const float* w2, const float* b2, const float* w3, const float* b3, void* y);
}  // namespace naive

}  // namespace olc_cm

#endif  // OLC_CONTRIB_MICROSOFT_CM_COMMON_H_
