// MatMulInteger, QLinearMatMul and the com.microsoft MatMulIntegerToFloat
// and DynamicQuantizeMatMul (A quantized to uint8 per tensor at run time,
// as DynamicQuantizeLinear does): validation, zero points and scales, the
// integer GEMM driver (packing into the kernel's group layout, 2-D tasks),
// the output stage (int32; requantized; or float acc * sa * sb + bias)
// and the exact zero-point compensation:
//   sum_k (A - za)(B - zb) = S' - zb' rowsum(A') - za' colsum(B') + K za' zb'
// where A' = A + oa and B' = B - ob are the operands as the kernel sees
// them (oa, ob = 128 where vpdpbusd needs u8 x s8, else 0), za' = za + oa
// and zb' = zb - ob. All int32 sums wrap through uint32 arithmetic.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "adapter_util.h"
#include "batch_util.h"
#include "gemm_driver.h"
#include "int_adapter.h"
#include "scratch.h"

namespace olc_mm {
namespace {

const olc_core_api* g_api = nullptr;

constexpr int64_t kGroupsPerBlock = 256;  // K block, in groups
constexpr int64_t kColsPerBlock = 512;    // N block: a packed B block of at most 512 KiB

// use_vnni = 0 (tuning) selects the vpmaddwd kernel on a VNNI machine, so
// that both AVX-512 kernels can be tested on one CPU.
IntKernel select_int_kernel(const olc_core_api* api, bool use_vnni) {
  const int32_t level = api->simd_level();
  const uint64_t f = api->cpu_features();
  if (level >= OLC_SIMD_AVX512 && (f & OLC_CPU_AVX512_VNNI) && use_vnni) return avx512vnni::int_kernel();
  if (level >= OLC_SIMD_AVX512) return avx512::int_kernel();
  if (level >= OLC_SIMD_AVX2) return avx2::int_kernel();
  return scalar::int_kernel();
}

// The vpmaddubsw kernel for B whose pairs fit int16 (pairs_fit_int16), at
// the AVX2 level only: AVX-512 has VNNI or vpmaddwd at twice the width.
// use_u8s8 = 0 (tuning) keeps to the general kernel. name NULL: none.
IntKernel select_u8s8_kernel(const olc_core_api* api, bool use_u8s8) {
  if (use_u8s8 && api->simd_level() == OLC_SIMD_AVX2) return avx2::int_kernel_u8s8();
  return IntKernel{};
}

// How the kernel sees an operand value.
struct Operand {
  bool is_signed;  // int8 (else uint8)
  const IntKernel* ik;
  bool is_a;
  // The kernel value of byte x and its offset (kernel value = x + off).
  int32_t offset() const { return kernel_offset(*ik, is_a, is_signed); }
  int32_t value(uint8_t x) const {
    const int32_t v = is_signed ? static_cast<int8_t>(x) : x;
    return v + offset();
  }
};

// B block [k0, k0 + kc) x [n0, n0 + nc) -> panels of ng x NR 32-bit
// entries; k past the block and columns past nc are zero.
void pack_b_int(const Operand& op, const uint8_t* B, int64_t ldb, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                int NR, int64_t pstride, uint32_t* dst) {
  const int g = op.ik->group;
  const int64_t ng = (kc + g - 1) / g;
  alignas(64) static const uint8_t zeros[4096] = {};
  const uint8_t flip = op.offset() != 0 ? 0x80 : 0;  // u8 -> s8 for vpdpbusd
#if defined(__SSE2__)
  const __m128i xflip = _mm_set1_epi8(static_cast<char>(flip));
#endif
  // Group of rows by group of rows, across all panels: each source row is
  // read contiguously (a panel-by-panel walk defeats the prefetchers).
  for (int64_t q = 0; q < ng; ++q) {
    for (int64_t j = 0; j * NR < nc; ++j) {
      const int64_t c0 = n0 + j * NR;
      const int w = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
      const uint8_t* r[4];
      for (int t = 0; t < g; ++t) {
        const int64_t k = k0 + q * g + t;
        r[t] = k < k0 + kc ? B + k * ldb + c0 : zeros;
      }
      uint32_t* o = dst + j * pstride + q * NR;
      if (g == 4) {
        uint8_t* ob = reinterpret_cast<uint8_t*>(o);
        const bool whole = r[3] != zeros;  // only the last group can run past the block
        int c = 0;
#if defined(__SSE2__)
        // 16 columns at a time: interleave the four rows' bytes (SSE2 is the
        // x86-64 baseline).
        if (whole) {
          for (; c + 16 <= w; c += 16) {
            const __m128i v0 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + c)), xflip);
            const __m128i v1 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[1] + c)), xflip);
            const __m128i v2 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[2] + c)), xflip);
            const __m128i v3 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[3] + c)), xflip);
            const __m128i p01l = _mm_unpacklo_epi8(v0, v1), p01h = _mm_unpackhi_epi8(v0, v1);
            const __m128i p23l = _mm_unpacklo_epi8(v2, v3), p23h = _mm_unpackhi_epi8(v2, v3);
            __m128i* dst128 = reinterpret_cast<__m128i*>(ob + 4 * c);
            _mm_storeu_si128(dst128, _mm_unpacklo_epi16(p01l, p23l));
            _mm_storeu_si128(dst128 + 1, _mm_unpackhi_epi16(p01l, p23l));
            _mm_storeu_si128(dst128 + 2, _mm_unpacklo_epi16(p01h, p23h));
            _mm_storeu_si128(dst128 + 3, _mm_unpackhi_epi16(p01h, p23h));
          }
        }
#endif
        if (c < w) {
          const uint8_t f0 = r[0] == zeros ? 0 : flip, f1 = r[1] == zeros ? 0 : flip;
          const uint8_t f2 = r[2] == zeros ? 0 : flip, f3 = r[3] == zeros ? 0 : flip;
          for (; c < w; ++c) {
            ob[4 * c] = r[0][c] ^ f0;
            ob[4 * c + 1] = r[1][c] ^ f1;
            ob[4 * c + 2] = r[2][c] ^ f2;
            ob[4 * c + 3] = r[3][c] ^ f3;
          }
        }
      } else if (op.is_signed) {
        for (int c = 0; c < w; ++c)
          o[c] = static_cast<uint16_t>(static_cast<int8_t>(r[0][c])) |
                 static_cast<uint32_t>(static_cast<uint16_t>(static_cast<int8_t>(r[1][c]))) << 16;
      } else {
        for (int c = 0; c < w; ++c) o[c] = r[0][c] | static_cast<uint32_t>(r[1][c]) << 16;
      }
      for (int c = w; c < NR; ++c) o[c] = 0;
    }
  }
}

// A rows [m0, m0 + mr) over [k0, k0 + kc) -> ng x MR entries.
void pack_a_int(const Operand& op, const uint8_t* A, int64_t lda, int64_t m0, int mr, int64_t k0, int64_t kc, int MR,
                uint32_t* dst) {
  const int g = op.ik->group;
  const int64_t full = kc / g;
  const int64_t ng = (kc + g - 1) / g;
  const uint32_t flip = op.offset() != 0 ? 0x80808080u : 0;  // s8 -> u8 for vpdpbusd
  for (int i = 0; i < mr; ++i) {
    const uint8_t* row = A + (m0 + i) * lda + k0;
    if (g == 4) {
      for (int64_t q = 0; q < full; ++q) {
        uint32_t v;
        std::memcpy(&v, row + 4 * q, 4);
        dst[q * MR + i] = v ^ flip;
      }
      if (full < ng) {
        uint32_t v = 0;
        for (int64_t t = 0; t < kc - 4 * full; ++t) v |= static_cast<uint32_t>(row[4 * full + t] ^ 0x80u * (flip != 0)) << (8 * t);
        dst[full * MR + i] = v;
      }
    } else {
      for (int64_t q = 0; q < ng; ++q) {
        const int64_t k = 2 * q;
        const int32_t a0 = op.is_signed ? static_cast<int8_t>(row[k]) : row[k];
        const int32_t a1 = k + 1 < kc ? (op.is_signed ? static_cast<int8_t>(row[k + 1]) : row[k + 1]) : 0;
        dst[q * MR + i] = static_cast<uint16_t>(a0) | static_cast<uint32_t>(static_cast<uint16_t>(a1)) << 16;
      }
    }
  }
}

// Whether the int16 sum of every two adjacent products of a u8 x s8 kernel
// stays exact for B (nb matrices of K x N, row stride N, as the group-4
// kernel sees them: int8, or uint8 less 128): for each column and each pair
// of rows (2p, 2p + 1) of a matrix, |b0| + |b1| <= 128, so that
// |a0 b0 + a1 b1| <= 255 * 128 = 32640 for any uint8 a0, a1. Seven-bit
// weights (onnxruntime's quantizer with reduce_range) always pass.
bool pairs_fit_int16(bool b_signed, const uint8_t* B, int64_t nb, int64_t K, int64_t N) {
  for (int64_t t = 0; t < nb; ++t) {
    for (int64_t k = 0; k + 1 < K; k += 2) {
      const uint8_t* r0 = B + (t * K + k) * N;
      const uint8_t* r1 = r0 + N;
      int64_t j = 0;
#if defined(__SSE2__)
      // 16 columns at a time, as s8_pair_fits_int16: biased values u = v + 128,
      // |v| = |u - 128| as saturating byte differences; the pair sums
      // saturate at 255, so their maximum tells.
      const __m128i vb = _mm_set1_epi8(static_cast<char>(b_signed ? 0x80 : 0));
      const __m128i mid = _mm_set1_epi8(static_cast<char>(0x80));
      __m128i w = _mm_setzero_si128();
      for (; j + 16 <= N; j += 16) {
        const __m128i u0 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + j)), vb);
        const __m128i u1 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + j)), vb);
        const __m128i a0 = _mm_or_si128(_mm_subs_epu8(u0, mid), _mm_subs_epu8(mid, u0));
        const __m128i a1 = _mm_or_si128(_mm_subs_epu8(u1, mid), _mm_subs_epu8(mid, u1));
        w = _mm_max_epu8(w, _mm_adds_epu8(a0, a1));
      }
      alignas(16) uint8_t lanes[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(lanes), w);
      for (uint8_t x : lanes)
        if (x > 128) return false;
#endif
      for (; j < N; ++j)
        if (!s8_pair_fits_int16(r0[j], r1[j], b_signed)) return false;
    }
  }
  return true;
}

// Sums of the kernel-space values: raw sums plus count * offset.
void row_sums(const Operand& op, const uint8_t* A, int64_t M, int64_t K, int32_t* out) {
  // Sums of the bytes as uint8 (int8 values are x ^ 0x80 - 128), 16 at a
  // time with psadbw.
  const uint8_t xr = op.is_signed ? 0x80 : 0;
  for (int64_t i = 0; i < M; ++i) {
    const uint8_t* r = A + i * K;
    uint64_t s = 0;
    int64_t k = 0;
#if defined(__SSE2__)
    const __m128i x = _mm_set1_epi8(static_cast<char>(xr));
    __m128i acc = _mm_setzero_si128();
    for (; k + 16 <= K; k += 16)
      acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + k)), x),
                                            _mm_setzero_si128()));
    s = static_cast<uint64_t>(_mm_cvtsi128_si64(acc)) + static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc)));
#endif
    for (; k < K; ++k) s += static_cast<uint8_t>(r[k] ^ xr);
    // As uint32 (wrapping): raw = s - 128 K for int8; kernel space adds K * offset.
    uint32_t v = static_cast<uint32_t>(s);
    if (op.is_signed) v -= 128u * static_cast<uint32_t>(K);
    out[i] = static_cast<int32_t>(v + static_cast<uint32_t>(K) * static_cast<uint32_t>(op.offset()));
  }
}

// Columns [0, N) of B with row stride ldb (ldb = N: the whole matrix).
void col_sums(const Operand& op, const uint8_t* B, int64_t K, int64_t N, int32_t* out, int64_t ldb = -1) {
  if (ldb < 0) ldb = N;
  std::fill(out, out + N, 0);
  // int16 partial sums over 128 rows at a time (|sum| <= 128 * 255 fits).
  std::vector<int16_t> acc(static_cast<size_t>(N));
  for (int64_t k0 = 0; k0 < K; k0 += 128) {
    const int64_t k1 = std::min(K, k0 + 128);
    std::fill(acc.begin(), acc.end(), static_cast<int16_t>(0));
    int16_t* a = acc.data();
    for (int64_t k = k0; k < k1; ++k) {
      const uint8_t* r = B + k * ldb;
      if (op.is_signed)
        for (int64_t j = 0; j < N; ++j) a[j] = static_cast<int16_t>(a[j] + static_cast<int8_t>(r[j]));
      else
        for (int64_t j = 0; j < N; ++j) a[j] = static_cast<int16_t>(a[j] + r[j]);
    }
    for (int64_t j = 0; j < N; ++j)
      out[j] = static_cast<int32_t>(static_cast<uint32_t>(out[j]) + static_cast<uint32_t>(static_cast<int32_t>(a[j])));
  }
  for (int64_t j = 0; j < N; ++j)
    out[j] = static_cast<int32_t>(static_cast<uint32_t>(out[j]) + static_cast<uint32_t>(K) * static_cast<uint32_t>(op.offset()));
}

enum class IntOp { kMatMulInteger, kQLinear, kToFloat, kDynamicQuant };

// Input positions of each operator (-1: the operator has no such input).
struct IntInputs {
  int a, b, a_scale, b_scale, a_zp, b_zp, y_scale, y_zp, bias;
};
constexpr IntInputs kInputsOf[] = {
    {0, 1, -1, -1, 2, 3, -1, -1, -1},  // MatMulInteger
    {0, 3, 1, 4, 2, 5, 6, 7, -1},      // QLinearMatMul
    {0, 1, 2, 3, 4, 5, -1, -1, 6},     // MatMulIntegerToFloat
    {0, 1, -1, 2, -1, 3, -1, -1, 4},   // DynamicQuantizeMatMul (A float, quantized here)
};
const char* const kOpNames[] = {"MatMulInteger", "QLinearMatMul", "MatMulIntegerToFloat", "DynamicQuantizeMatMul"};

struct IntState {
  IntOp op;
  bool qlinear;    // QLinearMatMul: requantized output
  bool float_out;  // MatMulIntegerToFloat, DynamicQuantizeMatMul: y = acc * sa * sb + bias
  IntInputs in;
  IntKernel ik;        // exact for every operand
  IntKernel ik_u8s8;   // vpmaddubsw, for B whose pairs fit int16 (name NULL: none here)
  IntKernel packed_ik; // the kernel the constant B was packed for
  bool amx = false;  // AMX-INT8 blocks of 32 x 32 where A is uint8 read in place
  int32_t a_type, b_type, y_type;
  int32_t ka_type;  // A as the integer kernel sees it (uint8 for DynamicQuantizeMatMul)
  std::shared_ptr<PackedB> packed;  // constant B (2-D), whole K
  std::vector<int32_t> packed_colsum;
  std::vector<int64_t> packed_shape;
  std::string detail, detail_u8s8;  // what the run reports: general kernel / u8 x s8 on a dynamic B
};

// Quantization parameters of one run, per row / per column.
struct Quant {
  std::vector<int32_t> za, zb;   // size 1 or M / N (already za' and zb')
  std::vector<float> sa, sb, sy; // QLinearMatMul: size 1 or M / N / M
  std::vector<int32_t> zy;       // size 1 or M
  std::vector<float> mult;       // float output: sa * sb, size 1 or N
  std::vector<float> bias;       // float output: [N] or empty
  std::vector<float> mult_full, bias_full;  // the same expanded to N (bias 0 when absent)
  std::vector<int32_t> zb_full;  // zb' expanded to N
};

// Whether the vpdpbusd kernel reads A in place (uint8, whole groups of 4):
// the condition for AMX too.
bool reads_a_in_place(const IntKernel& ik, const Operand& opa, int64_t K) {
  return ik.uk_da && ik.group == 4 && !opa.is_signed && K % 4 == 0;
}

// The AMX blocks' rows: a task's rows start on a block so that all but
// the product's last rows run as whole 32 x 32 AMX blocks.
constexpr int64_t kAmxRows = 32;

struct IntJob {
  const IntState* st;
  const IntKernel* ik;  // st->ik, st->ik_u8s8 or st->packed_ik
  Operand opa, opb;
  int64_t M, N, K;
  const uint8_t* A;
  const uint8_t* B;
  const uint32_t* packed;  // whole-K panels, or NULL
  const int32_t* colsum;   // colsum(B') [N]
  const int32_t* rowsum;   // rowsum(A') [M]
  const Quant* q;
  const uint32_t* colterm;  // za' * colsum[j] when za' is per tensor, else NULL
  void* Y;
  std::atomic<bool>* failed;
  int64_t tm, tn, mstep, nstep;
};

thread_local Scratch t_ia, t_ib, t_ic;

inline int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
inline int32_t wrap_mul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}

// Compensation (and for QLinearMatMul the requantization) of the finished
// rows [i0, i1) x columns [j0, j1) of the task at (m0, n0), whose int32
// block C (stride ldc) starts at (m0, n0):
//   v = S' - zb'[j] (rowsum[i] - K za'[i]) - za'[i] colsum[j].
void finish_block(const IntJob& job, int32_t* C, int64_t ldc, int64_t m0, int64_t n0, int64_t i0, int64_t i1,
                  int64_t j0, int64_t j1) {
  const Quant& q = *job.q;
  const uint32_t Ku = static_cast<uint32_t>(job.K);
  const int64_t nlen = j1 - j0;
  const uint32_t* zbv = reinterpret_cast<const uint32_t*>(q.zb_full.data()) + n0 + j0;
  const uint32_t* csv = reinterpret_cast<const uint32_t*>(job.colsum) + n0 + j0;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t gi = m0 + i;
    const uint32_t za = static_cast<uint32_t>(q.za.size() == 1 ? q.za[0] : q.za[gi]);
    const uint32_t ra = static_cast<uint32_t>(job.rowsum[gi]) - Ku * za;
    uint32_t* c = reinterpret_cast<uint32_t*>(C + i * ldc + j0);
    if (job.st->float_out && job.st->y_type == OLC_DTYPE_FLOAT && job.colterm && job.ik->float_row) {
      // Compensation and float stage in one pass over the row (za per tensor).
      const bool zb_scalar = q.zb.size() == 1;
      job.ik->float_row(c, nlen, ra, zb_scalar ? nullptr : zbv, zbv[0], job.colterm + n0 + j0,
                           q.mult_full.data() + n0 + j0, q.bias_full.data() + n0 + j0);
      continue;
    }
    if (job.colterm && q.zb.size() == 1) {
      // Per-tensor zero points: additions only (vectorizes on the baseline ISA).
      const uint32_t rc = zbv[0] * ra;
      const uint32_t* ct = job.colterm + n0 + j0;
      if (job.ik->comp_row) job.ik->comp_row(c, nlen, rc, ct);
      else
        for (int64_t j = 0; j < nlen; ++j) c[j] = c[j] - rc - ct[j];
    } else if (job.colterm) {
      const uint32_t* ct = job.colterm + n0 + j0;
      for (int64_t j = 0; j < nlen; ++j) c[j] = c[j] - zbv[j] * ra - ct[j];
    } else {
      for (int64_t j = 0; j < nlen; ++j) c[j] = c[j] - zbv[j] * ra - za * csv[j];
    }
    if (job.st->float_out) {
      // y = acc * (sa * sb) + bias; float32 output in place over the int32
      // sums, float16 from the work block. The multiplier and bias arrays
      // (q.mult_full, q.bias_full: N values) keep the loop branch-free.
      const float* mult = q.mult_full.data() + n0 + j0;
      const float* bias = q.bias_full.data() + n0 + j0;
      if (job.st->y_type == OLC_DTYPE_FLOAT) {
        const int32_t* ci = reinterpret_cast<const int32_t*>(c);
        float* yf = reinterpret_cast<float*>(c);
        for (int64_t j = 0; j < nlen; ++j) yf[j] = static_cast<float>(ci[j]) * mult[j] + bias[j];
      } else {
        uint16_t* yh = static_cast<uint16_t*>(job.Y) + gi * job.N + n0 + j0;
        for (int64_t j = 0; j < nlen; ++j)
          yh[j] = f32_to_f16(static_cast<float>(static_cast<int32_t>(c[j])) * mult[j] + bias[j]);
      }
    } else if (job.st->qlinear) {
      const float sa = q.sa.size() == 1 ? q.sa[0] : q.sa[gi];
      const float sy = q.sy.size() == 1 ? q.sy[0] : q.sy[gi];
      const double zy = q.zy.size() == 1 ? q.zy[0] : q.zy[gi];
      const bool u8 = job.st->y_type == OLC_DTYPE_UINT8;
      const double lo = u8 ? 0.0 : -128.0, hi = u8 ? 255.0 : 127.0;
      for (int64_t j = 0; j < nlen; ++j) {
        const float sb = q.sb.size() == 1 ? q.sb[0] : q.sb[n0 + j0 + j];
        const float mult = (sa * sb) / sy;
        // Saturate, then round half to even with the 2^52 + 2^51 shift
        // (exact for |d| < 2^51; NaN saturates to the low bound).
        double d = static_cast<double>(static_cast<int32_t>(c[j])) * static_cast<double>(mult) + zy;
        d = std::min(hi, std::max(lo, d));
        d = (d + 6755399441055744.0) - 6755399441055744.0;
        const int64_t o = gi * job.N + n0 + j0 + j;
        if (u8) static_cast<uint8_t*>(job.Y)[o] = static_cast<uint8_t>(d);
        else static_cast<int8_t*>(job.Y)[o] = static_cast<int8_t>(d);
      }
    }
  }
}

void int_task(const IntJob& job, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const IntKernel& ik = *job.ik;
  const int MR = ik.mr, NR = ik.nr, g = ik.group;
  const int64_t KC = kGroupsPerBlock * g;
  const int64_t mlen = m1 - m0, nlen = n1 - n0;
  const int64_t ng_total = (job.K + g - 1) / g;
  const bool direct_a = reads_a_in_place(ik, job.opa, job.K);
  const bool amx = direct_a && job.st->amx;
  int32_t* C;
  int64_t ldc;
  if (job.st->y_type == OLC_DTYPE_INT32 || job.st->y_type == OLC_DTYPE_FLOAT) {  // the int32 sums in the output
    C = static_cast<int32_t*>(job.Y) + m0 * job.N + n0;
    ldc = job.N;
  } else {
    C = static_cast<int32_t*>(t_ic.get(sizeof(int32_t) * mlen * nlen));
    ldc = nlen;
  }
  uint32_t* ap = static_cast<uint32_t*>(t_ia.get(sizeof(uint32_t) * MR * kGroupsPerBlock));
  uint32_t* bp = job.packed ? nullptr
                            : static_cast<uint32_t*>(t_ib.get(sizeof(uint32_t) * kGroupsPerBlock *
                                                              ((kColsPerBlock + NR - 1) / NR * NR)));
  if (!C || !ap || (!job.packed && !bp)) {
    job.failed->store(true);
    return;
  }
  if (job.K == 0) {
    for (int64_t i = 0; i < mlen; ++i)
      for (int64_t j = 0; j < nlen; ++j) C[i * ldc + j] = 0;
    finish_block(job, C, ldc, m0, n0, 0, mlen, 0, nlen);
    return;
  }
  amx::TileScope tiles(amx);
  for (int64_t nc0 = n0; nc0 < n1; nc0 += kColsPerBlock) {
    const int64_t nc = std::min(kColsPerBlock, n1 - nc0);
    for (int64_t k0 = 0; k0 < job.K; k0 += KC) {
      const int64_t kc = std::min(KC, job.K - k0);
      const int64_t ng = (kc + g - 1) / g;
      const int first = k0 == 0;
      const bool last = k0 + kc == job.K;
      const uint32_t* bblock;
      int64_t pstride;
      if (job.packed) {
        pstride = ng_total * NR;
        bblock = job.packed + (nc0 / NR) * pstride + (k0 / g) * NR;
      } else {
        pstride = ng * NR;
        pack_b_int(job.opb, job.B, job.N, k0, kc, nc0, nc, NR, pstride, bp);
        bblock = bp;
      }
      if (amx) {
        // 32-row blocks: AMX tiles over full 32 x 32 blocks and 64-k steps,
        // the vpdpbusd kernel for the K tail and the partial blocks. Block
        // of rows by block of rows, every panel under each (its 32 rows of
        // A, 32 KiB at most, stay in L1 while the panels stream from L2),
        // then the finished rows. Panel by panel under all the task's rows
        // instead, every tile of A came from L2 and the tiles ran at about
        // a third of their rate (M = 128, one thread, alternating in one
        // process: MatMulIntegerToFloat K 768 N 3072 420-515 -> 373-375 us,
        // DynamicQuantizeMatMul K 3072 N 768 611-653 -> 450-539, MatMulInteger
        // 1024^3 1,616-1,625 -> 1,049-1,503).
        for (int64_t m = m0; m < m1; m += 32) {
          const int64_t rows = std::min<int64_t>(32, m1 - m);
          const uint8_t* Am = job.A + m * job.K + k0;
          for (int64_t j = 0; j * NR < nc; ++j) {
            const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
            amx::int8_block_rows(ik, ng, Am, job.K, bblock + j * pstride, C + (m - m0) * ldc + (nc0 - n0) + j * NR,
                                 ldc, rows, nr, first);
          }
        }
        if (last) finish_block(job, C, ldc, m0, n0, 0, mlen, nc0 - n0, nc0 - n0 + nc);
        continue;
      }
      for (int64_t m = m0; m < m1; m += MR) {
        const int mr = static_cast<int>(std::min<int64_t>(MR, m1 - m));
        if (direct_a) {
          // uint8 A read in place by the vpdpbusd kernel: no packing.
          for (int64_t j = 0; j * NR < nc; ++j) {
            const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
            ik.uk_da(ng, job.A + m * job.K + k0, job.K, bblock + j * pstride,
                     C + (m - m0) * ldc + (nc0 - n0) + j * NR, ldc, mr, nr, first);
          }
          // Finished rows while they are still in cache.
          if (last) finish_block(job, C, ldc, m0, n0, m - m0, m - m0 + mr, nc0 - n0, nc0 - n0 + nc);
          continue;
        }
        pack_a_int(job.opa, job.A, job.K, m, mr, k0, kc, MR, ap);
        for (int64_t j = 0; j * NR < nc; ++j) {
          const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
          ik.uk(ng, ap, bblock + j * pstride, C + (m - m0) * ldc + (nc0 - n0) + j * NR, ldc, mr, nr, first);
        }
        if (last) finish_block(job, C, ldc, m0, n0, m - m0, m - m0 + mr, nc0 - n0, nc0 - n0 + nc);
      }
    }
  }
}

void int_range(void* user, int64_t begin, int64_t end) {
  const IntJob& job = *static_cast<const IntJob*>(user);
  for (int64_t t = begin; t < end; ++t) {
    const int64_t im = t / job.tn, in = t % job.tn;
    const int64_t m0 = im * job.mstep, m1 = std::min(job.M, m0 + job.mstep);
    const int64_t n0 = in * job.nstep, n1 = std::min(job.N, n0 + job.nstep);
    if (m0 < m1 && n0 < n1) int_task(job, m0, m1, n0, n1);
  }
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Row sums of A and column sums of B split over threads: the first
// `rtasks` tasks take chunks of rows, the rest chunks of columns.
struct SumsJob {
  Operand opa, opb;
  const uint8_t* A;
  const uint8_t* B;
  int64_t M, N, K;
  int32_t* rowsum;  // NULL: not needed
  int32_t* colsum;  // NULL: not needed
  int64_t rtasks, rstep, cstep;
};

void sums_range(void* user, int64_t begin, int64_t end) {
  const SumsJob& j = *static_cast<const SumsJob*>(user);
  for (int64_t t = begin; t < end; ++t) {
    if (t < j.rtasks) {
      const int64_t r0 = t * j.rstep, r1 = std::min(j.M, r0 + j.rstep);
      if (r0 < r1) row_sums(j.opa, j.A + r0 * j.K, r1 - r0, j.K, j.rowsum + r0);
    } else {
      const int64_t c0 = (t - j.rtasks) * j.cstep, c1 = std::min(j.N, c0 + j.cstep);
      if (c0 < c1) col_sums(j.opb, j.B + c0, j.K, c1 - c0, j.colsum + c0, j.N);
    }
  }
}

// Task grid costs in cycles (see choose_int_grid).
constexpr double kIPackB = 0.25;  // per byte of B packed
constexpr double kIReadA = 0.05;  // per byte of A read
constexpr double kIComp = 0.5;    // per output of the compensation pass
constexpr double kITask = 500;
constexpr double kITail = 0.5;    // share of a task lost at the uneven finish
constexpr int64_t kIMaxPer = 4;   // tasks per thread considered
// Two threads from 1M multiply-adds (128^3 on 2 threads: 10.5 us against
// 15 us on one); row and column sums split over the threads from 256 KiB.
constexpr int64_t kIMinMacs = int64_t(1) << 20;
constexpr int64_t kISumsParallel = int64_t(1) << 18;

// The task grid of one product, as for the float driver: in cycles, a task
// costs its multiply-adds (64 per vpdpbusd), the packing of its columns of
// B (unless prepacked), the reading of its rows of A and the compensation
// pass; splitting M repeats the packing of B. Rounds of tasks times the
// largest, plus half a task for the uneven finish.
void choose_int_grid(const IntKernel& ik, int64_t row_unit, int64_t M, int64_t N, int64_t K, bool packed,
                     int64_t threads, int64_t* tm_out, int64_t* tn_out) {
  const int64_t bm = cdiv(M, row_unit), bn = cdiv(N, ik.nr);
  const int64_t maxt = threads * kIMaxPer;
  double best = 0;
  bool have = false;
  for (int64_t tm = 1; tm <= std::min(bm, maxt); ++tm) {
    for (int64_t tn = 1; tn <= std::min(bn, maxt); ++tn) {
      const int64_t mstep = cdiv(bm, tm) * row_unit, nstep = cdiv(bn, tn) * ik.nr;
      if (cdiv(M, mstep) != tm || cdiv(N, nstep) != tn) continue;
      const int64_t tasks = tm * tn;
      if (tasks > maxt || (tasks < threads && (tm < bm || tn < bn))) continue;
      const double mlen = static_cast<double>(std::min(M, mstep)), nlen = static_cast<double>(std::min(N, nstep));
      const double k = static_cast<double>(K);
      double t = mlen * nlen * k / 64.0 + mlen * nlen * kIComp + kITask;
      if (!packed) t += nlen * k * kIPackB;
      t += mlen * k * kIReadA * static_cast<double>(cdiv(static_cast<int64_t>(nlen), kColsPerBlock));
      const double cost = (static_cast<double>(cdiv(tasks, threads)) + kITail) * t;
      if (!have || cost < best * 0.999) {
        best = cost;
        *tm_out = tm;
        *tn_out = tn;
        have = true;
      }
    }
  }
}

void* int_create(IntOp op, const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  AttrReader ar{node, error, esize};
  if (!ar.check_known({})) return nullptr;
  auto st = std::make_unique<IntState>();
  st->op = op;
  st->qlinear = op == IntOp::kQLinear;
  st->float_out = op == IntOp::kToFloat || op == IntOp::kDynamicQuant;
  st->in = kInputsOf[static_cast<int>(op)];
  const IntInputs& ix = st->in;
  static const int kMinIn[] = {2, 8, 4, 3}, kMaxIn[] = {4, 8, 7, 5};
  const int lo = kMinIn[static_cast<int>(op)], hi = kMaxIn[static_cast<int>(op)];
  if (node->n_inputs < lo || node->n_inputs > hi)
    return fail_create(error, esize, "expects %d to %d inputs, got %d", lo, hi, node->n_inputs);
  auto dtype_of = [&](int i) { return i >= 0 && i < node->n_inputs ? node->input_dtypes[i] : OLC_DTYPE_UNDEFINED; };
  st->a_type = dtype_of(ix.a);
  st->b_type = dtype_of(ix.b);
  auto is8 = [](int32_t t) { return t == OLC_DTYPE_UINT8 || t == OLC_DTYPE_INT8; };
  if (op == IntOp::kDynamicQuant) {
    if (st->a_type != OLC_DTYPE_FLOAT || !is8(st->b_type))
      return fail_create(error, esize, "A must be float32 and B uint8 or int8, got %s and %s",
                         olc_dtype_name(st->a_type), olc_dtype_name(st->b_type));
    st->ka_type = OLC_DTYPE_UINT8;
  } else {
    if (!is8(st->a_type) || !is8(st->b_type))
      return fail_create(error, esize, "A and B must be uint8 or int8, got %s and %s", olc_dtype_name(st->a_type),
                         olc_dtype_name(st->b_type));
    st->ka_type = st->a_type;
  }
  // Optional zero points have their operand's type.
  for (const auto& z : {std::make_pair(ix.a_zp, st->a_type), std::make_pair(ix.b_zp, st->b_type)}) {
    const int32_t t = dtype_of(z.first);
    if (t != OLC_DTYPE_UNDEFINED && t != z.second)
      return fail_create(error, esize, "%s type %s differs from %s's %s", z.first == ix.a_zp ? "a_zero_point" : "b_zero_point",
                         olc_dtype_name(t), z.first == ix.a_zp ? "A" : "B", olc_dtype_name(z.second));
  }
  if (op == IntOp::kMatMulInteger) {
    st->y_type = OLC_DTYPE_INT32;
  } else if (op == IntOp::kQLinear) {
    st->y_type = node->input_dtypes[7];
    if (!is8(st->y_type)) return fail_create(error, esize, "y_zero_point must be uint8 or int8");
    for (int i : {1, 4, 6}) {
      const int32_t t = node->input_dtypes[i];
      const bool ok = t == OLC_DTYPE_FLOAT || (node->opset >= 21 && (t == OLC_DTYPE_FLOAT16 || t == OLC_DTYPE_BFLOAT16));
      if (!ok) return fail_create(error, esize, "input %d (a scale) has unsupported type %s", i, olc_dtype_name(t));
    }
    if (node->input_dtypes[2] != st->a_type || node->input_dtypes[5] != st->b_type)
      return fail_create(error, esize, "zero points must have the types of A and B");
  } else {
    // The scales, the bias and Y share one float type: float32 (both ops)
    // or float16 (MatMulIntegerToFloat).
    st->y_type = dtype_of(ix.b_scale);
    const bool ok = st->y_type == OLC_DTYPE_FLOAT || (op == IntOp::kToFloat && st->y_type == OLC_DTYPE_FLOAT16);
    if (!ok)
      return fail_create(error, esize, "b_scale must be %s, got %s", op == IntOp::kToFloat ? "float32 or float16" : "float32",
                         olc_dtype_name(st->y_type));
    for (int i : {ix.a_scale, ix.bias}) {
      const int32_t t = dtype_of(i);
      if (i >= 0 && t != OLC_DTYPE_UNDEFINED && t != st->y_type)
        return fail_create(error, esize, "input %d has type %s, b_scale has %s", i, olc_dtype_name(t),
                           olc_dtype_name(st->y_type));
    }
    if (op == IntOp::kToFloat && dtype_of(ix.a_scale) == OLC_DTYPE_UNDEFINED)
      return fail_create(error, esize, "a_scale is required");
    if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != st->y_type)
      return fail_create(error, esize, "output type %s differs from the scales' %s", olc_dtype_name(node->output_dtypes[0]),
                         olc_dtype_name(st->y_type));
  }
  const olc_tuning_param* vnni = api->tuning_declare_int("olc_matmul", kOpNames[static_cast<int>(op)], "default",
                                                         OLC_DTYPE_UNDEFINED, "use_vnni", 1);
  st->ik = select_int_kernel(api, api->tuning_read_int(vnni) != 0);
  const olc_tuning_param* u8s8 = api->tuning_declare_int("olc_matmul", kOpNames[static_cast<int>(op)], "default",
                                                         OLC_DTYPE_UNDEFINED, "use_u8s8", 1);
  st->ik_u8s8 = select_u8s8_kernel(api, api->tuning_read_int(u8s8) != 0);
  st->packed_ik = st->ik;
  // AMX reuses the vpdpbusd kernel's packed B; use_amx = 0 keeps to VNNI.
  const olc_tuning_param* use_amx = api->tuning_declare_int("olc_matmul", kOpNames[static_cast<int>(op)], "default",
                                                            OLC_DTYPE_UNDEFINED, "use_amx", 1);
  st->amx = api->tuning_read_int(use_amx) != 0 && amx::int8_beside(api->cpu_features(), st->ik);
  // Constant 2-D B: packed once for the whole K with its column sums.
  const olc_tensor* cb = node->input_constants ? &node->input_constants[ix.b] : nullptr;
  std::string note;
  if (cb && cb->data && cb->ndim == 2 && cb->dtype == st->b_type && cb->shape[0] > 0 && cb->shape[1] > 0) {
    const int64_t K = cb->shape[0], N = cb->shape[1];
    const uint8_t* bdata = static_cast<const uint8_t*>(cb->data);
    if (st->ik_u8s8.name && pairs_fit_int16(st->b_type == OLC_DTYPE_INT8, bdata, 1, K, N)) st->packed_ik = st->ik_u8s8;
    const IntKernel& ik = st->packed_ik;
    const int64_t ng = cdiv(K, ik.group);
    const int64_t panels = cdiv(N, ik.nr);
    st->packed = make_packed(PackLayout::kInt, sizeof(uint32_t) * ng * ik.nr * panels);
    if (st->packed) {
      Operand opb{st->b_type == OLC_DTYPE_INT8, &ik, false};
      pack_b_int(opb, bdata, N, 0, K, 0, N, ik.nr, ng * ik.nr, static_cast<uint32_t*>(st->packed->data));
      st->packed_colsum.resize(N);
      col_sums(opb, bdata, K, N, st->packed_colsum.data());
      st->packed_shape = {K, N};
      if (OLC_API_HAS(api, report_prepacked))
        api->report_prepacked(node, st->packed.get(), static_cast<int64_t>(st->packed->bytes));
      char buf[64];
      std::snprintf(buf, sizeof buf, " prepacked-B %.1f KiB", st->packed->bytes / 1024.0);
      note = buf;
    }
  }
  st->detail = std::string(st->amx ? "amx+" : "") + st->packed_ik.name + note;
  if (st->ik_u8s8.name) st->detail_u8s8 = st->ik_u8s8.name;
  return st.release();
}

void* mmi_create(const olc_core_api* api, const olc_node_info* node, char* e, size_t n) {
  return int_create(IntOp::kMatMulInteger, api, node, e, n);
}
void* qlm_create(const olc_core_api* api, const olc_node_info* node, char* e, size_t n) {
  return int_create(IntOp::kQLinear, api, node, e, n);
}
void* mif_create(const olc_core_api* api, const olc_node_info* node, char* e, size_t n) {
  return int_create(IntOp::kToFloat, api, node, e, n);
}
void* dqmm_create(const olc_core_api* api, const olc_node_info* node, char* e, size_t n) {
  return int_create(IntOp::kDynamicQuant, api, node, e, n);
}
void int_destroy(void* s) { delete static_cast<IntState*>(s); }

bool read_scale(olc_context* ctx, const olc_tensor& t, int64_t per, const char* what, const char* dim,
                std::vector<float>* out) {
  const int64_t n = olc_element_count(&t);
  if (!(n == 1 || (n == per && t.ndim == 1))) {
    if (per == 1) fail_run(ctx, "%s of shape %s must be a scalar (%s)", what, shape_str(t).c_str(), dim);
    else
      fail_run(ctx, "%s of shape %s must be a scalar or 1-D with %lld elements (%s)", what, shape_str(t).c_str(),
               (long long)per, dim);
    return false;
  }
  out->resize(n);
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (t.dtype == OLC_DTYPE_FLOAT) v = static_cast<const float*>(t.data)[i];
    else if (t.dtype == OLC_DTYPE_FLOAT16) v = f16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
    else v = bf16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
    (*out)[i] = v;
  }
  return true;
}

bool read_zp(olc_context* ctx, const olc_tensor* t, int32_t dtype, int64_t per, const char* what, const char* dim,
             int32_t offset_sign_add, std::vector<int32_t>* out) {
  if (!t) {
    out->assign(1, offset_sign_add);
    return true;
  }
  if (t->dtype != dtype) {
    fail_run(ctx, "%s has type %s, expected %s", what, olc_dtype_name(t->dtype), olc_dtype_name(dtype));
    return false;
  }
  const int64_t n = olc_element_count(t);
  bool shape_ok = n == 1 || n == per;
  if (n == per && n != 1) {
    // 1-D [per], or [per, 1] / [1, per] style with one non-unit dimension.
    int non1 = 0;
    for (int32_t d = 0; d < t->ndim; ++d) non1 += t->shape[d] != 1;
    shape_ok = non1 == 1;
  }
  if (!shape_ok) {
    fail_run(ctx, "%s of shape %s must be a scalar or have %lld elements (%s)", what, shape_str(*t).c_str(),
             (long long)per, dim);
    return false;
  }
  out->resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t x = static_cast<const uint8_t*>(t->data)[i];
    const int32_t v = dtype == OLC_DTYPE_INT8 ? static_cast<int8_t>(x) : x;
    (*out)[i] = v + offset_sign_add;
  }
  return true;
}

// A's range [lo, hi] (widened to hold 0) over x[0, n); false when x holds
// NaN or an infinity.
bool a_range(const IntKernel& ik, const float* x, int64_t n, float* lo, float* hi) {
  if (ik.range) return ik.range(x, n, lo, hi);
  // x - x is 0 for every finite x and NaN for an infinity or NaN, which
  // the sum keeps.
  float l = 0.0f, h = 0.0f, bad = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    l = x[i] < l ? x[i] : l;
    h = x[i] > h ? x[i] : h;
    bad += x[i] - x[i];
  }
  *lo = l;
  *hi = h;
  return bad == 0.0f;
}

// x[0, n) to uint8 at scale s and zero point z.
void a_quant(const IntKernel& ik, const float* x, int64_t n, float s, float z, uint8_t* q) {
  if (ik.quant_u8) return ik.quant_u8(x, n, s, static_cast<int32_t>(z), q);
  // x / s is within [-255, 255]: the 1.5 * 2^23 shift rounds it to the
  // nearest integer, ties to even, in the default rounding mode.
  constexpr float kShift = 12582912.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float r = (x[i] / s + kShift) - kShift;
    q[i] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, r + z)));
  }
}

// The two passes over A shared out in chunks (the quantization divides
// each value, as the schema's x / scale must: M = 128, K = 3072 took a
// quarter of the product's one-thread time, and all of it ran on the
// calling thread while the others waited).
struct QuantAJob {
  const IntKernel* ik;
  const float* x;
  int64_t n, chunk;
  uint8_t* q;
  float s, z;
  std::vector<float> lo, hi;
  std::vector<char> finite;
};

void a_range_chunks(void* user, int64_t begin, int64_t end) {
  QuantAJob& j = *static_cast<QuantAJob*>(user);
  for (int64_t c = begin; c < end; ++c) {
    const int64_t i0 = c * j.chunk, len = std::min(j.chunk, j.n - i0);
    j.finite[c] = a_range(*j.ik, j.x + i0, len, &j.lo[c], &j.hi[c]);
  }
}

void a_quant_chunks(void* user, int64_t begin, int64_t end) {
  const QuantAJob& j = *static_cast<const QuantAJob*>(user);
  for (int64_t c = begin; c < end; ++c) {
    const int64_t i0 = c * j.chunk;
    a_quant(*j.ik, j.x + i0, std::min(j.chunk, j.n - i0), j.s, j.z, j.q + i0);
  }
}

// From 64K values A's passes go to the threads.
constexpr int64_t kQuantAParallel = int64_t(1) << 16;

// DynamicQuantizeMatMul's A: uint8 per tensor as DynamicQuantizeLinear
// defines it (the range widened to hold 0, scale = range / 255, zero point
// and values rounded half to even and saturated), with a range of 0 taken
// as scale 1 as onnxruntime does. Returns false when A holds NaN or an
// infinity (no scale exists).
bool quantize_a_u8(const IntKernel& ik, olc_context* ctx, int64_t threads, const float* x, int64_t n, uint8_t* q,
                   float* scale, int32_t* zp) {
  QuantAJob j{&ik, x, n, n, q, 1.0f, 0.0f, {}, {}, {}};
  const int64_t chunks = threads > 1 && n >= kQuantAParallel ? 4 * threads : 1;
  const int64_t per = (n + chunks - 1) / chunks;
  j.chunk = std::max<int64_t>(16, (per + 15) / 16 * 16);  // whole vectors but the last
  const int64_t nc = std::max<int64_t>(1, (n + j.chunk - 1) / j.chunk);
  j.lo.assign(nc, 0.0f);
  j.hi.assign(nc, 0.0f);
  j.finite.assign(nc, 1);
  if (nc > 1) g_api->parallel_for(ctx, nc, 1, 0, &a_range_chunks, &j);
  else a_range_chunks(&j, 0, nc);
  float lo = 0.0f, hi = 0.0f;
  for (int64_t c = 0; c < nc; ++c) {
    if (!j.finite[c]) return false;
    lo = std::min(lo, j.lo[c]);
    hi = std::max(hi, j.hi[c]);
  }
  j.s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  j.z = std::nearbyint(std::min(255.0f, std::max(0.0f, 0.0f - lo / j.s)));
  if (nc > 1) g_api->parallel_for(ctx, nc, 1, 0, &a_quant_chunks, &j);
  else a_quant_chunks(&j, 0, nc);
  *scale = j.s;
  *zp = static_cast<int32_t>(j.z);
  return true;
}

int32_t int_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) {
  const IntState* st = static_cast<const IntState*>(state);
  const IntInputs& ix = st->in;
  if (n_outputs != 1) return fail_run(ctx, "expects 1 output");
  auto present = [&](int i) {
    return i >= 0 && i < n_inputs && in[i].dtype != OLC_DTYPE_UNDEFINED ? &in[i] : nullptr;
  };
  const olc_tensor& a = in[ix.a];
  const olc_tensor& b = in[ix.b];
  if (a.dtype != st->a_type || b.dtype != st->b_type) return fail_run(ctx, "A or B type differs from the model's");
  for (int i = 0; i < n_inputs; ++i) {
    if (!present(i)) continue;
    const int64_t n = olc_element_count(&in[i]);
    if (n < 0) return fail_run(ctx, "input %d has a negative dimension or too many elements", i);
    if (n > 0 && !in[i].data) return fail_run(ctx, "input %d has no data", i);
  }
  MatmulShape ms;
  const std::string err = matmul_shape(a, b, &ms);
  if (!err.empty())
    return fail_run(ctx, "A %s and B %s: %s", shape_str(a).c_str(), shape_str(b).c_str(), err.c_str());
  // The kernel: the one the constant B was packed for; for a dynamic B the
  // u8 x s8 kernel where every pair of B fits int16 (one pass over B, small
  // against the product but not against a single row of A), else the
  // general one.
  const bool use_packed = st->packed && b.ndim == 2 && b.shape[0] == st->packed_shape[0] &&
                          b.shape[1] == st->packed_shape[1];
  const bool u8s8 = !use_packed && st->ik_u8s8.name && ms.M >= st->ik_u8s8.mr &&
                    pairs_fit_int16(st->b_type == OLC_DTYPE_INT8, static_cast<const uint8_t*>(b.data),
                                    olc_element_count(&b) / std::max<int64_t>(1, ms.K * ms.N), ms.K, ms.N);
  const IntKernel& ik = use_packed ? st->packed_ik : u8s8 ? st->ik_u8s8 : st->ik;
  Operand opa{st->ka_type == OLC_DTYPE_INT8, &ik, true};
  Operand opb{st->b_type == OLC_DTYPE_INT8, &ik, false};
  Quant q;
  // za' = za + oa, zb' = zb - ob (kernel-space zero points). The float
  // operators take per-tensor A parameters only (as onnxruntime).
  const int64_t za_per = st->float_out ? 1 : ms.M;
  if (st->op != IntOp::kDynamicQuant &&
      !read_zp(ctx, present(ix.a_zp), st->a_type, za_per, "a_zero_point", st->float_out ? "per tensor" : "per row of A",
               opa.offset(), &q.za))
    return OLC_ERROR;
  if (!read_zp(ctx, present(ix.b_zp), st->b_type, ms.N, "b_zero_point", "per column of B", opb.offset(), &q.zb))
    return OLC_ERROR;
  if (st->qlinear) {
    if (!read_scale(ctx, in[1], ms.M, "a_scale", "per row of A", &q.sa) ||
        !read_scale(ctx, in[4], ms.N, "b_scale", "per column of B", &q.sb) ||
        !read_scale(ctx, in[6], ms.M, "y_scale", "per row of Y", &q.sy))
      return OLC_ERROR;
    std::vector<int32_t> zy;
    const olc_tensor* tz = present(7);
    if (!tz) return fail_run(ctx, "y_zero_point is required");
    if (!read_zp(ctx, tz, st->y_type, ms.M, "y_zero_point", "per row of Y", 0, &q.zy)) return OLC_ERROR;
  }
  if (st->float_out) {
    if (st->op == IntOp::kToFloat && !read_scale(ctx, in[ix.a_scale], 1, "a_scale", "per tensor", &q.sa))
      return OLC_ERROR;
    if (!read_scale(ctx, in[ix.b_scale], ms.N, "b_scale", "per column of B", &q.sb)) return OLC_ERROR;
    if (const olc_tensor* tb = present(ix.bias)) {
      if (tb->ndim != 1 || tb->shape[0] != ms.N)
        return fail_run(ctx, "bias of shape %s must be 1-D with N = %lld elements", shape_str(*tb).c_str(),
                        (long long)ms.N);
      if (!read_scale(ctx, *tb, ms.N, "bias", "per column of B", &q.bias)) return OLC_ERROR;
    }
  }
  const int64_t threads = (ms.M * ms.N * ms.K * ms.nbatch >= kIMinMacs) ? g_api->concurrency(ctx) : 1;
  // DynamicQuantizeMatMul: A to uint8 with its scale and zero point.
  std::vector<uint8_t> aq;
  const void* a_data = a.data;
  bool a_finite = true;
  if (st->op == IntOp::kDynamicQuant) {
    const int64_t na = olc_element_count(&a);
    aq.resize(static_cast<size_t>(na));
    float sa = 1.0f;
    int32_t za = 0;
    a_finite = quantize_a_u8(ik, ctx, threads, static_cast<const float*>(a.data), na, aq.data(), &sa, &za);
    q.sa.assign(1, sa);
    q.za.assign(1, za + opa.offset());
    a_data = aq.data();
  }
  if (st->float_out) {
    q.mult.resize(q.sb.size());
    for (size_t j = 0; j < q.sb.size(); ++j) q.mult[j] = q.sa[0] * q.sb[j];
    q.mult_full.resize(ms.N);
    q.bias_full.assign(ms.N, 0.0f);
    for (int64_t j = 0; j < ms.N; ++j) {
      q.mult_full[j] = q.mult.size() == 1 ? q.mult[0] : q.mult[j];
      if (!q.bias.empty()) q.bias_full[j] = q.bias[j];
    }
  }
  q.zb_full.resize(ms.N);
  for (int64_t j = 0; j < ms.N; ++j) q.zb_full[j] = q.zb.size() == 1 ? q.zb[0] : q.zb[j];
  void* y = g_api->allocate_output(ctx, 0, st->y_type, static_cast<int32_t>(ms.out_shape.size()), ms.out_shape.data());
  const int64_t total = ms.nbatch * ms.M * ms.N;
  if (!y && total > 0) return OLC_ERROR;
  g_api->record_usage_detail(ctx, (u8s8 ? st->detail_u8s8 : st->detail).c_str());
  if (total == 0) return OLC_OK;
  if (!a_finite) {
    // NaN or an infinity in A: no quantization exists; every output is NaN.
    for (int64_t i = 0; i < total; ++i) {
      if (st->y_type == OLC_DTYPE_FLOAT) static_cast<float*>(y)[i] = std::numeric_limits<float>::quiet_NaN();
      else static_cast<uint16_t*>(y)[i] = 0x7e00u;
    }
    return OLC_OK;
  }
  const size_t ysize = olc_dtype_size(st->y_type);
  std::vector<int32_t> rowsum(ms.M, 0), colsum;
  std::vector<uint32_t> colterm;
  std::atomic<bool> failed{false};
  // Row sums only matter where some zb' is non-zero, column sums where some
  // za' is (symmetric int8 weights, uint8 activations without zero point).
  const bool need_row = std::any_of(q.zb.begin(), q.zb.end(), [](int32_t v) { return v != 0; });
  const bool need_col = std::any_of(q.za.begin(), q.za.end(), [](int32_t v) { return v != 0; });
  for (int64_t t = 0; t < ms.nbatch; ++t) {
    const uint8_t* A = static_cast<const uint8_t*>(a_data) + ms.a_index[t] * ms.M * ms.K;
    const uint8_t* B = static_cast<const uint8_t*>(b.data) + ms.b_index[t] * ms.K * ms.N;
    const int32_t* cs;
    bool do_col = false;
    if (!need_col) {
      colsum.assign(ms.N, 0);
      cs = colsum.data();
    } else if (use_packed) {
      cs = st->packed_colsum.data();
    } else if (t == 0 || ms.b_index[t] != ms.b_index[t - 1]) {
      colsum.resize(ms.N);
      do_col = true;
      cs = colsum.data();
    } else {
      cs = colsum.data();
    }
    {
      // Both sums read every byte of A and B once: split them over the
      // threads when there is enough to share.
      const int64_t bytes = (need_row ? ms.M * ms.K : 0) + (do_col ? ms.K * ms.N : 0);
      SumsJob sj{opa, opb, A, B, ms.M, ms.N, ms.K, need_row ? rowsum.data() : nullptr,
                 do_col ? colsum.data() : nullptr, 0, 1, 1};
      if (threads > 1 && bytes >= kISumsParallel) {
        const int64_t per = threads * 2;
        sj.rtasks = need_row ? per : 0;
        sj.rstep = cdiv(ms.M, per);
        sj.cstep = cdiv(cdiv(ms.N, per), 64) * 64;
        const int64_t ctasks = do_col ? cdiv(ms.N, sj.cstep) : 0;
        g_api->parallel_for(ctx, sj.rtasks + ctasks, 1, 0, &sums_range, &sj);
      } else {
        if (need_row) row_sums(opa, A, ms.M, ms.K, rowsum.data());
        if (do_col) col_sums(opb, B, ms.K, ms.N, colsum.data());
      }
    }
    // za' colsum[j], for every column when za is per tensor.
    const bool za_per_tensor = q.za.size() == 1;
    if (za_per_tensor) {
      colterm.resize(ms.N);
      const uint32_t za = static_cast<uint32_t>(q.za[0]);
      for (int64_t j = 0; j < ms.N; ++j) colterm[j] = za * static_cast<uint32_t>(cs[j]);
    }
    IntJob job{st, &ik, opa, opb, ms.M, ms.N, ms.K, A, B,
               use_packed ? static_cast<const uint32_t*>(st->packed->data) : nullptr, cs, rowsum.data(), &q,
               za_per_tensor ? colterm.data() : nullptr, static_cast<char*>(y) + t * ms.M * ms.N * ysize, &failed, 1,
               1, 0, 0};
    // Tasks' rows in whole AMX blocks where AMX runs: at MR-row steps (12)
    // two threads split 128 rows as 72 + 56, and the 8 and 24 rows past
    // their AMX blocks ran on vpdpbusd at a fraction of the rate (M = 128,
    // K = 768, N = 3072, two threads: no faster than one).
    const int64_t row_unit = st->amx && reads_a_in_place(ik, opa, ms.K) ? kAmxRows : ik.mr;
    const int64_t bm = cdiv(ms.M, row_unit), bn = cdiv(ms.N, ik.nr);
    if (threads > 1) {
      // Whole rows per thread where there are enough of them: each task
      // reads its own rows of A and writes whole rows of C (measured faster
      // at 128, 512 and 1024 cubed than any split of N, although every task
      // packs all of a dynamic B).
      if (bm >= threads && (use_packed || ms.M >= 32 * threads)) {
        job.tm = threads;
        job.tn = 1;
      } else {
        choose_int_grid(ik, row_unit, ms.M, ms.N, ms.K, use_packed, threads, &job.tm, &job.tn);
      }
    }
    job.mstep = cdiv(bm, job.tm) * row_unit;
    job.nstep = cdiv(bn, job.tn) * ik.nr;
    job.tm = cdiv(ms.M, job.mstep);
    job.tn = cdiv(ms.N, job.nstep);
    const int64_t tasks = job.tm * job.tn;
    if (threads > 1 && tasks > 1) g_api->parallel_for(ctx, tasks, 1, 0, &int_range, &job);
    else int_range(&job, 0, tasks);
    if (failed.load()) return fail_run(ctx, "out of memory for the integer GEMM work buffers");
  }
  return OLC_OK;
}

const olc_kernel_vtable kMMI = {OLC_ABI_VERSION, 0, "olc_matmul::MatMulInteger", guarded_create<mmi_create>,
                                guarded_run<int_run>, int_destroy};
const olc_kernel_vtable kQLM = {OLC_ABI_VERSION, 0, "olc_matmul::QLinearMatMul", guarded_create<qlm_create>,
                                guarded_run<int_run>, int_destroy};
const olc_kernel_vtable kMIF = {OLC_ABI_VERSION, 0, "olc_matmul::MatMulIntegerToFloat", guarded_create<mif_create>,
                                guarded_run<int_run>, int_destroy};
const olc_kernel_vtable kDQMM = {OLC_ABI_VERSION, 0, "olc_matmul::DynamicQuantizeMatMul", guarded_create<dqmm_create>,
                                 guarded_run<int_run>, int_destroy};

}  // namespace

void set_int_api(const olc_core_api* api) { g_api = api; }
const olc_kernel_vtable* matmul_integer_vtable() { return &kMMI; }
const olc_kernel_vtable* qlinear_matmul_vtable() { return &kQLM; }
const olc_kernel_vtable* matmul_integer_to_float_vtable() { return &kMIF; }
const olc_kernel_vtable* dynamic_quantize_matmul_vtable() { return &kDQMM; }

}  // namespace olc_mm
