// Types shared by the portable drivers and the per-ISA kernels of
// olc-matmul. Plain structs and function-pointer tables only: every helper
// here is `static` so that no ISA-specific copy of it can be merged into
// portable code at link time.
#ifndef OLC_MATMUL_MM_COMMON_H_
#define OLC_MATMUL_MM_COMMON_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "olc/kernel_abi.h"

namespace olc_mm {

// Microkernel flags.
enum : int {
  kFirst = 1,  // the first K block: C is not read, the accumulators start at 0
  kLast = 2,   // the last K block: apply the epilogue
  // With kLast: whole-width rows of C that start on a vector boundary are
  // written with non-temporal stores (outputs far larger than the caches;
  // the caller fences before the output is read elsewhere).
  kStream = 4,
};

// Activations a microkernel's epilogue applies (a fused convolution's).
enum EpiAct : int {
  kEpiNone = 0,
  kEpiClamp,        // [a, b]: Relu (0, +inf), Clip
  kEpiLeakyRelu,    // alpha a
  kEpiHardSigmoid,  // alpha a, beta b
  kEpiHardSwish,
  // HardSwish, then y * a + b: the scalar affine PP-LCNet's blocks put after
  // it, applied while the tile is in registers (as a second pass over the
  // stored tile, the PP-OCRv4 recognizer and detector ran 2.5-3 % slower).
  kEpiHardSwishAffine,
};

// Epilogue applied on the last K block: C = alpha * (C + acc) + beta * bias.
// bias points at the bias value of the tile's (0, 0) element, row stride
// bias_rs and column stride bias_cs (each 0 or the broadcast stride); NULL
// when there is no bias (or beta == 0). Then, for a fused convolution, while
// the tile is still in registers: the residual tile at res (row stride
// ld_res; NULL: none) added, and the activation act (parameters act_a,
// act_b) applied. Zero-initialized, the later fields add nothing.
template <typename T>
struct Epi {
  T alpha;
  T beta;
  const T* bias;
  int64_t bias_rs;
  int64_t bias_cs;
  const T* res;
  int64_t ld_res;
  int act;
  T act_a;
  T act_b;
};
// ukernel_tile (mm_kernels.inc) copies these fields one by one: a new field
// must be added there too.
static_assert(sizeof(Epi<float>) == 64 && sizeof(Epi<double>) == 80, "Epi changed: update ukernel_tile's copy");

// x in every lane of V (V may be T itself): a broadcast. (V{} + x would add
// x to 0 first, an addition the compiler keeps because it turns -0 into +0.)
// The conv kernels' GEMV splats as x - 0 instead (conv_kernels.inc: vsplat);
// here that form made the general epilogue (FusedMatMul's alpha) slower:
// attention scores QK^T/8 (1, 12, 128, 64), one thread, 358 -> 383 us.
// Written lane by lane, GCC built a splat of a value read from memory (the
// epilogue's per-row bias) as one masked broadcast per lane, 16 loads and 16
// mask moves for a 512-bit vector: a 12 x 32 tile's epilogue cost more than
// its K = 16 products. A shuffle of lane 0 is one vbroadcastss.
template <typename V, typename T>
static inline V epi_splat(T x) {
  if constexpr (std::is_same<V, T>::value) {
    return x;
  } else {
#if defined(__clang__)
    V v;
    for (int i = 0; i < static_cast<int>(sizeof(V) / sizeof(T)); ++i) v[i] = x;
    return v;
#else
    typedef std::conditional_t<sizeof(T) == 8, int64_t, std::conditional_t<sizeof(T) == 4, int32_t, int16_t>> Lane;
    typedef Lane Index __attribute__((vector_size(sizeof(V))));
    const V v = {x};
    return __builtin_shuffle(v, Index{});
#endif
  }
}

// x (a vector or a scalar of T) through the epilogue's activation kAct, computed
// as the convolution kernels' act_vec does; comparisons written so that a
// NaN takes the branch that returns it.
template <int kAct, typename T, typename V>
static inline V epi_activate_as(const Epi<T>& ep, V x) {
  const V zero = V{} + T(0), one = V{} + T(1);
  if constexpr (kAct == kEpiClamp) {
    const V t = x < ep.act_a ? epi_splat<V>(ep.act_a) : x;
    return t > ep.act_b ? epi_splat<V>(ep.act_b) : t;
  } else if constexpr (kAct == kEpiLeakyRelu) {
    return x < T(0) ? x * ep.act_a : x;
  } else if constexpr (kAct == kEpiHardSigmoid) {
    const V t = x * ep.act_a + ep.act_b;
    return t < T(0) ? zero : (t > T(1) ? one : t);
  } else if constexpr (kAct == kEpiHardSwish) {
    const V t = x * (T(1) / 6) + T(0.5);
    return x * (t < T(0) ? zero : (t > T(1) ? one : t));
  } else if constexpr (kAct == kEpiHardSwishAffine) {
    const V t = x * (T(1) / 6) + T(0.5);
    const V y = x * (t < T(0) ? zero : (t > T(1) ? one : t));
    return y * ep.act_a + ep.act_b;
  } else {
    return x;
  }
}
// The same with the activation read from ep.
template <typename T, typename V>
static inline V epi_activate(const Epi<T>& ep, V x) {
  switch (ep.act) {
    case kEpiClamp: return epi_activate_as<kEpiClamp>(ep, x);
    case kEpiLeakyRelu: return epi_activate_as<kEpiLeakyRelu>(ep, x);
    case kEpiHardSigmoid: return epi_activate_as<kEpiHardSigmoid>(ep, x);
    case kEpiHardSwish: return epi_activate_as<kEpiHardSwish>(ep, x);
    case kEpiHardSwishAffine: return epi_activate_as<kEpiHardSwishAffine>(ep, x);
    default: return x;
  }
}

// C[mr x nr] (+)= Ap[kc x MR] (k-major, MR values per k) * Bp[kc x NR]
// (k-major, row stride ldbp: NR for a packed panel, the matrix row stride
// when B is read in place); mr <= MR, nr <= NR.
template <typename T>
using UKernel = void (*)(int64_t kc, const T* Ap, const T* Bp, int64_t ldbp, T* C, int64_t ldc, int mr, int nr,
                         int flags, const Epi<T>* ep);
// The same with A read in place: row i of the tile at Ap + i * lda. pf, when
// not NULL, is memory the driver needs soon (the next panel of a prepacked
// B): the kernel prefetches its pf_lines cache lines, one per k step.
template <typename T>
using UKernelDA = void (*)(int64_t kc, const T* A, int64_t lda, const T* Bp, int64_t ldbp, T* C, int64_t ldc, int mr,
                           int nr, int flags, const Epi<T>* ep, const void* pf, int64_t pf_lines);
// UKernel with the same prefetch of pf as UKernelDA.
template <typename T>
using UKernelPF = void (*)(int64_t kc, const T* Ap, const T* Bp, int64_t ldbp, T* C, int64_t ldc, int mr, int nr,
                           int flags, const Epi<T>* ep, const void* pf, int64_t pf_lines);
// UKernelPF with A read in place, k-major: A(i, k) at A[k * ka + i] (X's
// rows as the transposed product's strips, no copy).
template <typename T>
using UKernelKA = void (*)(int64_t kc, const T* A, int64_t ka, const T* Bp, int64_t ldbp, T* C, int64_t ldc, int mr,
                           int nr, int flags, const Epi<T>* ep, const void* pf, int64_t pf_lines);
// UKernel with B's rows gathered: row k at B + boff[k] (an im2col matrix
// read straight from its padded source, no panel built). Every row is read
// NR values wide: past a column tail of nr, NR - nr more must be readable
// (their results are dropped).
template <typename T>
using UKernelRows = void (*)(int64_t kc, const T* Ap, const T* B, const int64_t* boff, T* C, int64_t ldc, int mr,
                             int nr, int flags, const Epi<T>* ep);

// UKernelPF with A's columns gathered: A(i, k) at A[aoff[k] + i] (the
// transposed product's strips read straight from an im2col source: rows of
// consecutive positions, one column per tap and channel; no strip built).
template <typename T>
using UKernelRowsA = void (*)(int64_t kc, const T* A, const int64_t* aoff, const T* Bp, int64_t ldbp, T* C,
                              int64_t ldc, int mr, int nr, int flags, const Epi<T>* ep, const void* pf,
                              int64_t pf_lines);

// The cache lines of a block that the next step reads (constant weights,
// likely in L3 or memory), handed out as slices to the current step's
// microkernel calls, which prefetch one line per k step: the block arrives
// while the current step computes, instead of stalling the next one.
class PrefetchSlices {
 public:
  PrefetchSlices() = default;
  PrefetchSlices(const void* block, int64_t bytes, int64_t calls)
      : base_(static_cast<const char*>(block)), lines_(block ? (bytes + 63) / 64 : 0),
        slice_(calls > 0 ? (lines_ + calls - 1) / calls : 0) {}
  // Slice i, for a call of kc k steps: its first line, *lines of them (NULL,
  // 0: none).
  const char* at(int64_t i, int64_t kc, int64_t* lines) const {
    const int64_t first = i * slice_;
    *lines = std::max<int64_t>(0, std::min({slice_, lines_ - first, kc}));
    return *lines ? base_ + 64 * first : nullptr;
  }
  // The next slice, call after call.
  const char* take(int64_t kc, int64_t* lines) { return at(next_++, kc, lines); }
  // The same slicing of another block of the same size (no division: the
  // constructor's is a 64-bit one, dear once per microkernel call).
  PrefetchSlices of(const void* block) const {
    PrefetchSlices p = *this;
    p.base_ = static_cast<const char*>(block);
    return p;
  }

 private:
  const char* base_ = nullptr;
  int64_t lines_ = 0, slice_ = 0, next_ = 0;
};

// y[i] = sum_k X[i * ldx + k] * v[k], i < m      (dot products)
template <typename T>
using GemvRows = void (*)(int64_t m, int64_t k, const T* X, int64_t ldx, const T* v, T* y);
// y[j] = sum_k v[k] * X[k * ldx + j], j < n      (row combinations)
template <typename T>
using GemvCols = void (*)(int64_t n, int64_t k, const T* X, int64_t ldx, const T* v, T* y);

// bfloat16 pair microkernel: Ap holds kc2 k-pairs x MR (each a 32-bit pair
// of bf16), Bp holds kc2 k-pairs x NR x 2 bf16; C is float32.
using UKernelBf16 = void (*)(int64_t kc2, const uint16_t* Ap, const uint16_t* Bp, float* C, int64_t ldc, int mr,
                             int nr, int flags, const Epi<float>* ep);

// Integer microkernel over k groups: C[mr x nr] (int32, wrapping) (+)=
// sum over ng groups of the dot product of A's and B's 32-bit group entries.
// Ap: per group MR entries, Bp: per group NR entries. A group entry holds
// 4 k values as bytes (u8 for A, s8 for B: vpdpbusd) or 2 k values as int16
// (pmaddwd; exact for any int8/uint8 operands).
using UKernelI32 = void (*)(int64_t ng, const uint32_t* Ap, const uint32_t* Bp, int32_t* C, int64_t ldc, int mr,
                            int nr, int first);

// The same with a uint8 A read in place (group 4, K a multiple of 4): row i
// of the tile at A + i * lda, group q at byte 4 q.
using UKernelI32DA = void (*)(int64_t ng, const uint8_t* A, int64_t lda, const uint32_t* Bp, int32_t* C, int64_t ldc,
                              int mr, int nr, int first);

struct IntKernel {
  const char* name;
  int mr, nr;
  int group;  // k values per 32-bit entry: 4 (u8 x s8 bytes) or 2 (int16 pairs)
  UKernelI32 uk;
  UKernelI32DA uk_da;  // NULL where not provided
  // c[j] -= rc + ct[j], j < n (wrapping): the per-tensor zero-point
  // compensation of one output row; NULL: the portable loop.
  void (*comp_row)(uint32_t* c, int64_t n, uint32_t rc, const uint32_t* ct);
  // q[i] = saturate_u8(rint(x[i] / scale) + zp), i < n, ties to even (the
  // body of DynamicQuantizeLinear, x finite); NULL: the portable loop.
  void (*quant_u8)(const float* x, int64_t n, float scale, int32_t zp, uint8_t* q);
  // min(0, x), max(0, x) over x[0, n); false when some x is infinite or NaN.
  // NULL: the portable loop.
  bool (*range)(const float* x, int64_t n, float* lo, float* hi);
  // The float output stage of one row in one pass, over the int32 sums in
  // place: c[j] = float(int32(c[j] - zb[j] ra - ct[j])) * mult[j] + bias[j]
  // (zb NULL: zb0 for every column; wrapping uint32 arithmetic); NULL: the
  // portable loops.
  void (*float_row)(uint32_t* c, int64_t n, uint32_t ra, const uint32_t* zb, uint32_t zb0, const uint32_t* ct,
                    const float* mult, const float* bias);
  // Group 4 only: the kernel multiplies s8 A by u8 B (vpmaddubsw with the
  // operands the other way round) instead of u8 A by s8 B.
  bool signed_a = false;
};

// What a kernel adds to an operand byte (as int8 or uint8) to get the value
// it multiplies: group 4 takes one operand as u8 and the other as s8, so an
// int8 operand on the u8 side is offset by +128 and a uint8 operand on the
// s8 side by -128 (the adapters compensate with row and column sums);
// group 2 (int16 pairs) takes both as they are.
static inline int32_t kernel_offset(const IntKernel& ik, bool is_a, bool is_signed) {
  if (ik.group != 4) return 0;
  const bool s8_side = is_a == ik.signed_a;
  if (s8_side) return is_signed ? 0 : -128;
  return is_signed ? 128 : 0;
}

// Whether two adjacent bytes of vpmaddubsw's signed operand, as it sees them
// (int8 as they are, uint8 less 128), have |v0| + |v1| <= 128: then their
// int16 pair sum with any two uint8 cannot saturate (255 x 128 = 32640).
static inline bool s8_pair_fits_int16(uint8_t x0, uint8_t x1, bool is_signed) {
  const int bias = is_signed ? 0x80 : 0;  // (x ^ bias) - 128 is the value
  const int v0 = (x0 ^ bias) - 128, v1 = (x1 ^ bias) - 128;
  return (v0 < 0 ? -v0 : v0) + (v1 < 0 ? -v1 : v1) <= 128;
}

// MatMulNBits GEMV over rows n0 .. n1 of B (one activation row):
//   y[n] = sum_b scale[n, b] * dot(q block, a block) - dot(sz[n, :], asum)
//          (+ bias[n])
// where sz = scale * zero point and asum holds the per-block sums of a.
// With f = 8 / bits values per byte, `a` is permuted per span of f * chunk
// lanes: the k = 0 mod f values, then k = 1 mod f, ... (the bit fields of
// the same bytes, low bits first).
struct NbGemv {
  int bits;
  int chunk;  // bytes per inner step (from nbits_chunk())
  int64_t bs, kb, blob;
  const uint8_t* B;      // [N, kb, blob]
  const float* scales;   // [N, kb]
  const float* sz;       // [N, kb]
  const float* a;        // kb * bs values (permuted for 4 bits), zero padded
  const float* asum;     // [kb]
  const float* bias;     // [N] or NULL
  float* y;
};
using NbGemvFn = void (*)(const NbGemv* p, int64_t n0, int64_t n1);

// MatMulNBits dequantization of w[n, k], n in [n0, n0 + nc), k in
// [k0, k0 + kc) (k0 a multiple of the block size), into float32 panels of
// kc x NR (zero padded columns): w = q * scale + nzs, nzs = -zp * scale.
struct NbDequant {
  int bits;
  int64_t bs, kb, blob;
  const uint8_t* B;
  const float* scales;  // [N, kb]
  const float* nzs;     // [N, kb]
  int64_t n0, nc, k0, kc;
  int NR;
  float* dst;
};
using NbDequantFn = void (*)(const NbDequant* p);

struct IsaKernels {
  const char* name;
  int mr_f32, nr_f32;
  int mr_f64, nr_f64;
  UKernel<float> uk_f32;
  UKernel<double> uk_f64;
  UKernelDA<float> ukda_f32;
  UKernelDA<double> ukda_f64;
  UKernelPF<float> ukpf_f32;
  UKernelKA<float> ukka_f32;
  UKernelRows<float> ukrows_f32;
  UKernelRowsA<float> ukrowsa_f32;
  GemvRows<float> gemv_rows_f32;
  GemvCols<float> gemv_cols_f32;
  GemvRows<double> gemv_rows_f64;
  GemvCols<double> gemv_cols_f64;
  NbGemvFn nbits_gemv;
  int (*nbits_chunk)(int bits, int64_t bs);
  NbDequantFn nbits_dequant;
  // NULL where the level has no such kernel.
  int mr_bf16, nr_bf16;
  UKernelBf16 uk_bf16;
};

namespace scalar { const IsaKernels* kernels(); }
namespace avx2 { const IsaKernels* kernels(); }
namespace avx512 { const IsaKernels* kernels(); }
// AVX512_BF16 (vdpbf16ps) and AVX512_VNNI (vpdpbusd) kernels: NULL members
// when not built.
namespace avx512bf16 { UKernelBf16 uk_bf16(int* mr, int* nr); }
namespace avx512vnni { IntKernel int_kernel(); }
namespace avx512 {
IntKernel int_kernel();
void comp_row_avx512(uint32_t* c, int64_t n, uint32_t rc, const uint32_t* ct);
void quant_u8_avx512(const float* x, int64_t n, float scale, int32_t zp, uint8_t* q);
bool range_avx512(const float* x, int64_t n, float* lo, float* hi);
void float_row_avx512(uint32_t* c, int64_t n, uint32_t ra, const uint32_t* zb, uint32_t zb0, const uint32_t* ct,
                      const float* mult, const float* bias);
void nbits_gemv_generic(const NbGemv* p, int64_t n0, int64_t n1);
void nbits_gemv_fast(const NbGemv* p, int64_t n0, int64_t n1);
void nbits_dequant_fast(const NbDequant* p);
}  // namespace avx512
namespace avx2 {
IntKernel int_kernel();
// vpmaddubsw (group 4): exact only where the signed operand's adjacent
// pairs of values have |v0| + |v1| <= 128 (int_adapter.cc and
// qconv_adapter.cc check). signed_a false: u8 A x s8 B; true: s8 A x u8 B.
IntKernel int_kernel_u8s8(bool signed_a = false);
void nbits_dequant_fast(const NbDequant* p);
}  // namespace avx2
namespace scalar { IntKernel int_kernel(); }
// AMX (int_amx.cc, mm_amx_bf16.cc): begin() configures this thread's tiles,
// end() releases them; block_32x32 adds A[32 x 4 ng] (uint8, row stride lda)
// times 32 columns of an avx512vnni packed B panel to C (ng a multiple of
// 16); bf16_block_32x32 adds A[32 x 32 steps] (bfloat16) times 32 columns of
// a vdpbf16ps k-pair panel (at its k-pair of the first k) to float32 C.
namespace amx {
void begin();
void end();
void block_32x32(int64_t ng, const uint8_t* A, int64_t lda, const uint32_t* Bp, int32_t* C, int64_t ldc, int first);
void bf16_block_32x32(int64_t steps, const uint16_t* A, int64_t lda, const uint16_t* Bp, float* C, int64_t ldc,
                      int first);

// Whether AMX-INT8 blocks can run beside integer kernel ik on a CPU with
// these features (cpu_features()): the tiles read ik's packed B panels and
// leave the K tail and partial blocks to ik's kernel reading A in place,
// which the avx512vnni kernel alone has in that layout (group 4, 32
// columns).
static inline bool int8_beside(uint64_t cpu_features, const IntKernel& ik) {
  const uint64_t bits = OLC_CPU_AMX_TILE | OLC_CPU_AMX_INT8;
  return (cpu_features & bits) == bits && !std::strcmp(ik.name, "avx512vnni") && ik.nr == 32 && ik.group == 4 &&
         ik.uk_da != nullptr;
}

// rows (at most 32) rows of A (uint8 read in place, row stride lda) times
// one nr-column panel of ik's packed B (ng groups) into C (row stride ldc;
// stored when first, else added): whole 32 x 32 blocks of 64-k steps on
// the tiles (configured by the caller), the K tail, fewer rows and a
// narrower panel on ik.uk_da.
static inline void int8_block_rows(const IntKernel& ik, int64_t ng, const uint8_t* A, int64_t lda, const uint32_t* Bp,
                            int32_t* C, int64_t ldc, int64_t rows, int nr, int first) {
  const int64_t ngm = ng / 16 * 16;
  int64_t done = 0;  // groups the tiles took
  if (rows == 32 && nr == 32 && ngm > 0) {
    block_32x32(ngm, A, lda, Bp, C, ldc, first);
    done = ngm;
  }
  if (done < ng)
    for (int64_t i = 0; i < rows; i += ik.mr)
      ik.uk_da(ng - done, A + i * lda + 4 * done, lda, Bp + done * ik.nr, C + i * ldc, ldc,
               static_cast<int>(std::min<int64_t>(ik.mr, rows - i)), nr, done == 0 ? first : 0);
}

// Tiles configured for one task and released after it (a thread holding
// tile state makes every context switch save 8 KiB more).
struct TileScope {
  bool on;
  explicit TileScope(bool o) : on(o) {
    if (on) begin();
  }
  ~TileScope() {
    if (on) end();
  }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
};
}  // namespace amx

static inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays NaN (quiet).
static inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

static inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {
      // Subnormal: normalise.
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else {
    u = sign | (exp + (127 - 15)) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, overflow to infinity, NaN stays NaN.
static inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {
    // Result subnormal or zero: scale so the rounding happens at bit 0.
    if (a < 0x33000000u) return sign;  // below half the smallest subnormal
    const uint32_t e = a >> 23;
    const uint32_t man = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 .. 24
    uint32_t r = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = a - (112u << 23);  // rebias
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

}  // namespace olc_mm

#endif  // OLC_MATMUL_MM_COMMON_H_
