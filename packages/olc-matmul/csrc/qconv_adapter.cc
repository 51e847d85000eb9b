// QLinearConv and ConvInteger (ai.onnx 10): the implicit GEMM of the float
// Conv on the family's integer microkernels (vpdpbusd with AVX512_VNNI, and
// AMX-INT8 tiles beside it for a constant W where the CPU has them;
// vpmaddubsw / vpmaddwd at AVX2; mm_common.h IntKernel):
//   acc[co, p] = sum_k (W[co, k] - wz[co]) (Xcol[k, p] - xz)
// with Xcol the im2col matrix of X padded with its zero point xz, so that
// padding contributes nothing, as in the ONNX reference. The weights are
// the row operand A (packed into the kernel's group layout once, at
// create() for a constant W), the im2col panels the column operand B,
// built per panel from a padded byte copy of X like the float panels. The
// kernel sees A' = A + oa and B' = B - ob (oa, ob = 128 where vpdpbusd
// needs u8 x s8) and the zero points are compensated exactly afterwards:
//   acc = S' - zb' (rowsum(A') - K za') - za' colsum(B')
// (za' = wz + oa, zb' = xz - ob); colsum(B') per output position comes
// from a box sum over the channel sums of the padded input, never from
// the panels. int32 arithmetic wraps through uint32. QLinearConv then adds
// B and requantizes as the ONNX reference does:
//   y = saturate(round_half_even(acc * float32(float32(xs ws) / ys) + yz))
// computed in float64. Portable code (no ISA flags).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "adapter_util.h"
#include "conv_common.h"
#include "conv_kernels.h"
#include "gemm_driver.h"
#include "qconv_adapter.h"
#include "scratch.h"

namespace olc_mm {
namespace {

using namespace conv;  // NOLINT(build/namespaces): the shared attributes and geometry

const olc_core_api* g_api = nullptr;

constexpr int64_t kGroupsPerBlock = 256;  // K block, in groups of the kernel
constexpr int64_t kAmxRows = 32;          // rows of W per AMX block

thread_local Scratch t_panel, t_acc, t_pad, t_csum, t_rowsum;

IntKernel select_kernel(const olc_core_api* api, bool use_vnni) {
  const int32_t level = api->simd_level();
  const uint64_t f = api->cpu_features();
  if (level >= OLC_SIMD_AVX512 && (f & OLC_CPU_AVX512_VNNI) && use_vnni) return avx512vnni::int_kernel();
  if (level >= OLC_SIMD_AVX512) return avx512::int_kernel();
  if (level >= OLC_SIMD_AVX2) return avx2::int_kernel();
  return scalar::int_kernel();
}

// Kernel-space offsets of W (the kernel's A) and of the input (its B).
inline int32_t offset_a(const IntKernel& ik, bool is_signed) { return kernel_offset(ik, true, is_signed); }
inline int32_t offset_b(const IntKernel& ik, bool is_signed) { return kernel_offset(ik, false, is_signed); }
inline int32_t byte_value(uint8_t v, bool is_signed) { return is_signed ? static_cast<int8_t>(v) : v; }

// One group entry from g raw bytes v[0..g) (missing: absent=true -> the
// kernel-space zero). Group 4: the bytes with the sign bit flipped where
// the operand's offset is +-128; group 2: two int16 of the raw values.
inline uint32_t entry(int g, bool is_signed, bool flip, const uint8_t* v, int n) {
  uint32_t e = 0;
  if (g == 4) {
    for (int t = 0; t < n; ++t) e |= static_cast<uint32_t>(static_cast<uint8_t>(v[t] ^ (flip ? 0x80 : 0))) << (8 * t);
  } else {
    for (int t = 0; t < n; ++t) e |= static_cast<uint32_t>(static_cast<uint16_t>(byte_value(v[t], is_signed))) << (16 * t);
  }
  return e;
}

struct QConvState : ConvAttrs {
  bool qlinear;  // QLinearConv (else ConvInteger)
  int32_t x_type, w_type, y_type;
  IntKernel ik;         // exact for every operand: a fed W
  IntKernel packed_ik;  // the constant W's: ik, or the s8 x u8 kernel where W's pairs fit int16
  const ConvKernels* ck;  // the output stage (requantize)
  const olc_tuning_param* t_par = nullptr;
  // Constant W: per group, ceil(Mg / MR) strips of ng x MR entries (whole
  // K), and the kernel-space row sums.
  std::vector<uint32_t> wpack;
  std::vector<int32_t> wrowsum;
  // With AMX-INT8 and the vpdpbusd kernel: the constant W's kernel-space
  // bytes row by row ([Cout, amx_ld], K padded with zeros), the A operand
  // of the tiles (and of the kernel reading A in place for the tails).
  std::vector<uint8_t> amx_rows;
  int64_t amx_ld = 0;
  const void* wdata = nullptr;
  std::vector<int64_t> wshape;
  std::string detail;
};

// Whether every two adjacent weights (k = 2p, 2p + 1 of each row of W
// [rows, Kg]) as the s8 x u8 kernel sees them (int8, or uint8 less 128)
// have |w0| + |w1| <= 128: then no int16 pair sum of vpmaddubsw can
// saturate (128 x 255 = 32640 for any uint8 input). Seven-bit weights
// (onnxruntime's quantizer with reduce_range) always pass.
bool weight_pairs_fit_int16(bool w_signed, const uint8_t* W, int64_t rows, int64_t Kg) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* w = W + r * Kg;
    for (int64_t k = 0; k + 1 < Kg; k += 2)
      if (!s8_pair_fits_int16(w[k], w[k + 1], w_signed)) return false;
  }
  return true;
}

// W [G * Mg, Kg] (bytes) into strips; rowsum[co] = the kernel-space sum.
void pack_w(const IntKernel& ik, bool w_signed, const uint8_t* W, int64_t G, int64_t Mg, int64_t Kg, uint32_t* dst,
            int32_t* rowsum) {
  const int g = ik.group, MR = ik.mr;
  const int64_t ng = (Kg + g - 1) / g, ns = (Mg + MR - 1) / MR;
  const int32_t off = offset_a(ik, w_signed);
  const bool flip = off != 0;
  for (int64_t gi = 0; gi < G; ++gi)
    for (int64_t s = 0; s < ns; ++s) {
      uint32_t* o = dst + (gi * ns + s) * ng * MR;
      for (int i = 0; i < MR; ++i) {
        const int64_t m = s * MR + i;
        if (m >= Mg) {
          for (int64_t q = 0; q < ng; ++q) o[q * MR + i] = 0;
          continue;
        }
        const uint8_t* row = W + (gi * Mg + m) * Kg;
        uint32_t sum = 0;
        for (int64_t k = 0; k < Kg; ++k) sum += static_cast<uint32_t>(byte_value(row[k], w_signed) + off);
        rowsum[gi * Mg + m] = static_cast<int32_t>(sum);
        for (int64_t q = 0; q < ng; ++q)
          o[q * MR + i] = entry(g, w_signed, flip, row + q * g, static_cast<int>(std::min<int64_t>(g, Kg - q * g)));
      }
    }
}

// W [rows, Kg] as ik's kernel-space bytes (sign bit flipped where its
// offset is +-128, as pack_w's entries), rows ld apart, K past Kg zero:
// the A operand read in place.
void pack_w_rows(const IntKernel& ik, bool w_signed, const uint8_t* W, int64_t rows, int64_t Kg, int64_t ld,
                 uint8_t* dst) {
  const uint8_t flip = offset_a(ik, w_signed) != 0 ? 0x80 : 0;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* o = dst + r * ld;
    for (int64_t k = 0; k < Kg; ++k) o[k] = static_cast<uint8_t>(W[r * Kg + k] ^ flip);
    std::fill(o + Kg, o + ld, uint8_t{0});
  }
}

// ------------------------------------------------------------ input

// x[0..n) split into its even-indexed bytes (to even) and odd-indexed ones
// (to odd): the two phases of a stride-2 row. SSE2 for 32 bytes at a time.
void deinterleave2(const uint8_t* x, int64_t n, uint8_t* even, uint8_t* odd) {
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128i lo = _mm_set1_epi16(0x00FF);
  for (; 2 * i + 32 <= n; i += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * i + 16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(even + i),
                     _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(odd + i), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
  }
#endif
  for (; 2 * i < n; ++i) {
    even[i] = x[2 * i];
    if (2 * i + 1 < n) odd[i] = x[2 * i + 1];
  }
}

// Channels [c0, c1) of one image into the padded byte layout (PadLayout of
// bytes), pads holding the zero point.
void pad_bytes(const Geom& g, const PadLayout& l, const uint8_t* x, uint8_t xz, int64_t c0, int64_t c1, uint8_t* dst) {
  const int64_t sw = l.sw, rowlen = sw * l.Wq, pw = g.pb[2];
  for (int64_t c = c0; c < c1; ++c) {
    uint8_t* dc = dst + c * l.cs;
    std::memset(dc, xz, static_cast<size_t>(l.cs));
    const uint8_t* xc = x + c * g.in_sp;
    for (int64_t id = 0; id < g.in[0]; ++id)
      for (int64_t ih = 0; ih < g.in[1]; ++ih) {
        uint8_t* row = dc + ((id + g.pb[0]) * l.Hp + ih + g.pb[1]) * rowlen;
        const uint8_t* xr = xc + (id * g.in[1] + ih) * g.in[2];
        if (sw == 1) {
          std::memcpy(row + pw, xr, static_cast<size_t>(g.in[2]));
        } else if (sw == 2) {
          // Input column 2i lands at padded column 2i + pw, 2i + 1 at 2i + 1 + pw.
          deinterleave2(xr, g.in[2], row + (pw & 1) * l.Wq + (pw >> 1), row + ((pw + 1) & 1) * l.Wq + ((pw + 1) >> 1));
        } else {
          // Phase by phase: padded column w + pw goes to phase (w + pw) % sw,
          // slot (w + pw) / sw. Written per element with that division, the
          // copy took most of a stride-2 layer (3x3 s2 128@56: 1.3 of 1.7 ms).
          for (int64_t ph = 0; ph < sw; ++ph) {
            uint8_t* dph = row + ph * l.Wq;
            const int64_t q0 = ph >= pw ? 0 : (pw - ph + sw - 1) / sw;  // first slot with w >= 0
            for (int64_t q = q0, w = q0 * sw + ph - pw; q < l.Wq && w < g.in[2]; ++q, w += sw) dph[q] = xr[w];
          }
        }
      }
  }
}

// The raw column sums of the im2col matrix, in two phases: the channel sums
// of a group's padded input (pads count xz) over padded rows [r0, r1), then
// per output position p in [p0, p1) the sum over its kernel window (win:
// the window's g.ksz offsets in the padded layout, channel 0's taps).
void channel_sums(const Geom& g, const PadLayout& l, const uint8_t* src, bool x_signed, int64_t r0, int64_t r1,
                  int32_t* cs) {
  std::fill(cs + r0, cs + r1, 0);
  for (int64_t c = 0; c < g.Cg; ++c) {
    const uint8_t* p = src + c * l.cs;
    if (x_signed)
      for (int64_t i = r0; i < r1; ++i) cs[i] += static_cast<int8_t>(p[i]);
    else
      for (int64_t i = r0; i < r1; ++i) cs[i] += p[i];
  }
}

void window_sums(const Geom& g, const PadLayout& l, const int32_t* cs, const int64_t* win, int64_t p0, int64_t p1,
                 int32_t* out) {
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t ow = p % g.out[2], oh = (p / g.out[2]) % g.out[1], od = p / (g.out[2] * g.out[1]);
    const int64_t base = out_row_offset(g, l, od, oh) + ow;
    uint32_t s = 0;
    for (int64_t t = 0; t < g.ksz; ++t) s += static_cast<uint32_t>(cs[base + win[t]]);
    out[p] = static_cast<int32_t>(s);
  }
}

// The input's preparation for a chunk of images, shared out on threads:
// the padded byte copy (items: image x channel), the channel sums (image x
// group x a share of the padded rows), the window sums (image x group x a
// share of the output positions).
struct PrepJob {
  const Geom* g;
  const PadLayout* l;
  const uint8_t* x;      // the chunk's first image
  uint8_t xz;
  uint8_t* buf;          // the padded copy (copy) or NULL
  const uint8_t* src;    // the input in PadLayout
  int64_t img_stride;
  bool x_signed;
  int64_t shares;        // row / position shares per (image, group)
  int64_t rows;          // padded rows of a channel (l's Dp Hp sw Wq)
  int32_t* rowsums;      // [image][group][rows]
  const int64_t* win;    // a kernel window: channel 0's tap offsets
  int32_t* csum;         // [image][group][out_sp]
};

void pad_range(void* user, int64_t begin, int64_t end) {
  const PrepJob& j = *static_cast<const PrepJob*>(user);
  const Geom& g = *j.g;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t i = t / g.C, c = t % g.C;
    pad_bytes(g, *j.l, j.x + i * g.C * g.in_sp, j.xz, c, c + 1, j.buf + i * j.img_stride);
  }
}

void channel_sums_range(void* user, int64_t begin, int64_t end) {
  const PrepJob& j = *static_cast<const PrepJob*>(user);
  const Geom& g = *j.g;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t s = t % j.shares, ig = t / j.shares, i = ig / g.G, gi = ig % g.G;
    channel_sums(g, *j.l, j.src + i * j.img_stride + gi * g.Cg * j.l->cs, j.x_signed, s * j.rows / j.shares,
                 (s + 1) * j.rows / j.shares, j.rowsums + ig * j.rows);
  }
}

void window_sums_range(void* user, int64_t begin, int64_t end) {
  const PrepJob& j = *static_cast<const PrepJob*>(user);
  const Geom& g = *j.g;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t s = t % j.shares, ig = t / j.shares;
    window_sums(g, *j.l, j.rowsums + ig * j.rows, j.win, s * g.out_sp / j.shares, (s + 1) * g.out_sp / j.shares,
                j.csum + ig * g.out_sp);
  }
}

// ------------------------------------------------------------ the product

struct QJob {
  const Geom* g;
  const QConvState* st;
  const IntKernel* ik;     // st->ik or st->packed_ik
  const uint32_t* wp;      // strips
  const int32_t* rowsum;   // rowsum(A') [Cout]
  const uint8_t* amx_rows; // QConvState::amx_rows for a packed W with AMX, else NULL
  int64_t amx_ld;
  const uint8_t* src;      // the input in PadLayout l, images n0 ..
  PadLayout l;
  int64_t n0, img_stride;
  const int64_t* koff;     // [Kg]
  const int32_t* csum;     // raw column sums [image in chunk][G][out_sp]
  // Quantization: zero points (raw), scales.
  int32_t xz;
  const int32_t* wz;       // [Cout]
  const float* mult;       // QLinearConv: float32(float32(xs ws) / ys) [Cout]
  int32_t yz;
  const int32_t* bias;     // QLinearConv B [Cout] or NULL
  void* y;
  int64_t NC, tn, tm, mstep;
  std::atomic<bool>* failed;
};

// Columns [0, len) of g byte rows r[0..n) (n <= g; rows n..g count as the
// kernel-space zero) as group entries at o: group 4, the four bytes of a
// column in one entry (sign bits flipped by `flip`); group 2, two int16.
// SSE2 (the x86-64 baseline) for 16 / 8 columns at a time.
void entries(int g, bool is_signed, uint8_t flip, const uint8_t* const* r, int n, int64_t len, uint32_t* o) {
  int64_t c = 0;
#if defined(__SSE2__)
  if (g == 4 && n == 4) {
    const __m128i xf = _mm_set1_epi8(static_cast<char>(flip));
    for (; c + 16 <= len; c += 16) {
      const __m128i v0 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + c)), xf);
      const __m128i v1 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[1] + c)), xf);
      const __m128i v2 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[2] + c)), xf);
      const __m128i v3 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[3] + c)), xf);
      const __m128i p01l = _mm_unpacklo_epi8(v0, v1), p01h = _mm_unpackhi_epi8(v0, v1);
      const __m128i p23l = _mm_unpacklo_epi8(v2, v3), p23h = _mm_unpackhi_epi8(v2, v3);
      __m128i* d = reinterpret_cast<__m128i*>(o + c);
      _mm_storeu_si128(d, _mm_unpacklo_epi16(p01l, p23l));
      _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(p01l, p23l));
      _mm_storeu_si128(d + 2, _mm_unpacklo_epi16(p01h, p23h));
      _mm_storeu_si128(d + 3, _mm_unpackhi_epi16(p01h, p23h));
    }
    for (; c + 8 <= len; c += 8) {  // 8 columns: the low halves
      const __m128i v0 = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r[0] + c)), xf);
      const __m128i v1 = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r[1] + c)), xf);
      const __m128i v2 = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r[2] + c)), xf);
      const __m128i v3 = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r[3] + c)), xf);
      const __m128i p01 = _mm_unpacklo_epi8(v0, v1), p23 = _mm_unpacklo_epi8(v2, v3);
      __m128i* d = reinterpret_cast<__m128i*>(o + c);
      _mm_storeu_si128(d, _mm_unpacklo_epi16(p01, p23));
      _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(p01, p23));
    }
  } else if (g == 2 && n == 2) {
    const __m128i zero = _mm_setzero_si128();
    for (; c + 8 <= len; c += 8) {
      __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r[0] + c));
      __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r[1] + c));
      if (is_signed) {  // sign-extend: the byte in the high half, shifted down
        a = _mm_srai_epi16(_mm_unpacklo_epi8(zero, a), 8);
        b = _mm_srai_epi16(_mm_unpacklo_epi8(zero, b), 8);
      } else {
        a = _mm_unpacklo_epi8(a, zero);
        b = _mm_unpacklo_epi8(b, zero);
      }
      __m128i* d = reinterpret_cast<__m128i*>(o + c);
      _mm_storeu_si128(d, _mm_unpacklo_epi16(a, b));
      _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(a, b));
    }
  }
#endif
  for (; c < len; ++c) {
    uint8_t v[4];
    for (int t = 0; t < n; ++t) v[t] = r[t][c];
    o[c] = entry(g, is_signed, flip != 0, v, n);
  }
}

// One int panel: ng x NR entries of the columns' runs (B' = the raw byte
// flipped where vpdpbusd needs s8; k past the block: zero entries).
void int_panel(const QJob& job, const uint8_t* srcg, int64_t k0, int64_t kc, const int64_t* runs, int64_t nruns,
               int nr, uint32_t* dst) {
  const int g = job.ik->group, NR = job.ik->nr;
  const bool xs = job.st->x_type == OLC_DTYPE_INT8;
  const uint8_t flip = offset_b(*job.ik, xs) != 0 ? 0x80 : 0;
  const int64_t ng = (kc + g - 1) / g;
  for (int64_t q = 0; q < ng; ++q) {
    const int n = static_cast<int>(std::min<int64_t>(g, kc - q * g));
    const int64_t* ko = job.koff + k0 + q * g;
    uint32_t* o = dst + q * NR;
    for (int64_t u = 0; u < nruns; ++u) {
      const int64_t col = runs[3 * u], len = runs[3 * u + 1], off = runs[3 * u + 2];
      const uint8_t* r[4];
      for (int t = 0; t < n; ++t) r[t] = srcg + ko[t] + off;
      entries(g, xs, flip, r, n, len, o + col);
    }
    for (int c = nr; c < NR; ++c) o[c] = 0;
  }
}

// Compensation and output of rows [i0, i1) (of the group, from co0) x
// columns [s0, s0 + nc) of image n; C holds the kernel sums (stride ldc).
void finish(const QJob& job, int32_t* C, int64_t ldc, int64_t n, int64_t gi, int64_t i0, int64_t i1, int64_t s0,
            int64_t nc) {
  const Geom& g = *job.g;
  const QConvState& st = *job.st;
  const uint32_t K = static_cast<uint32_t>(g.Kg);
  const int32_t oa = offset_a(*job.ik, st.w_type == OLC_DTYPE_INT8), ob = offset_b(*job.ik, st.x_type == OLC_DTYPE_INT8);
  const uint32_t zb = static_cast<uint32_t>(job.xz + ob);
  const int32_t* cs = job.csum + ((n - job.n0) * g.G + gi) * g.out_sp + s0;
  const bool u8 = st.y_type == OLC_DTYPE_UINT8;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t co = gi * g.Mg + i;
    const uint32_t za = static_cast<uint32_t>(job.wz[co] + oa);
    const uint32_t ra = static_cast<uint32_t>(job.rowsum[co]) - K * za;
    uint32_t* c = reinterpret_cast<uint32_t*>(C + (i - i0) * ldc);
    const uint32_t koff = K * static_cast<uint32_t>(ob);  // colsum(B') = raw colsum + K ob
    const uint32_t row = zb * ra + za * koff;             // the row's constant part
    if (!st.qlinear) {  // ConvInteger: the int32 sums are the output (C is Y)
      for (int64_t j = 0; j < nc; ++j) c[j] = c[j] - row - za * static_cast<uint32_t>(cs[j]);
      continue;
    }
    const uint32_t b = job.bias ? static_cast<uint32_t>(job.bias[co]) : 0u;
    const double mult = job.mult[co], yz = job.yz;
    const int64_t o = (n * g.Cout + co) * g.out_sp + s0;
    st.ck->requantize(c, cs, za, nc, b - row, mult, yz, u8, static_cast<uint8_t*>(job.y) + o);
  }
}

void q_range(void* user, int64_t begin, int64_t end) {
  const QJob& job = *static_cast<const QJob*>(user);
  const Geom& g = *job.g;
  const IntKernel& ik = *job.ik;
  const int MR = ik.mr, NR = ik.nr, grp = ik.group;
  const int64_t ngt = (g.Kg + grp - 1) / grp;  // groups over the whole K
  const int64_t nstrips = (g.Mg + MR - 1) / MR;
  const int64_t KC = kGroupsPerBlock * grp;
  std::vector<int64_t> runs(static_cast<size_t>(3 * NR));
  amx::TileScope tiles(job.amx_rows != nullptr);
  for (int64_t t = begin; t < end; ++t) {
    const int64_t ti = t % job.tn;
    const int64_t mi = (t / job.tn) % job.tm;
    const int64_t gi = (t / (job.tn * job.tm)) % g.G;
    const int64_t n = job.n0 + t / (job.tn * job.tm * g.G);
    const int64_t s0 = ti * job.NC, nc = std::min(job.NC, g.out_sp - s0);
    const int64_t m0 = mi * job.mstep, m1 = std::min(g.Mg, m0 + job.mstep);
    if (m0 >= m1 || nc <= 0) continue;
    int32_t* C;
    int64_t ldc;
    if (!job.st->qlinear) {
      C = static_cast<int32_t*>(job.y) + (n * g.Cout + gi * g.Mg + m0) * g.out_sp + s0;
      ldc = g.out_sp;
    } else {
      ldc = (nc + NR - 1) / NR * NR;
      C = static_cast<int32_t*>(t_acc.get(sizeof(int32_t) * (m1 - m0) * ldc));
    }
    uint32_t* panel = static_cast<uint32_t*>(t_panel.get(sizeof(uint32_t) * kGroupsPerBlock * NR));
    if (!C || !panel) {
      job.failed->store(true);
      return;
    }
    const uint8_t* srcg = job.src + (n - job.n0) * job.img_stride + gi * g.Cg * job.l.cs;
    for (int64_t k0 = 0; k0 < g.Kg; k0 += KC) {
      const int64_t kc = std::min(KC, g.Kg - k0);
      const int64_t ng = (kc + grp - 1) / grp;
      const int first = k0 == 0;
      for (int64_t j = 0; j * NR < nc; ++j) {
        const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
        const int64_t nruns = panel_runs(g, job.l, s0 + j * NR, nr, runs.data());
        int_panel(job, srcg, k0, kc, runs.data(), nruns, nr, panel);
        if (job.amx_rows) {
          // 32-row blocks of W against the panel: AMX tiles over whole 32 x
          // 32 blocks and 64-k steps, the kernel reading W's rows in place
          // for the K tail, the last rows and a narrower last panel.
          for (int64_t m = m0; m < m1; m += kAmxRows)
            amx::int8_block_rows(ik, ng, job.amx_rows + (gi * g.Mg + m) * job.amx_ld + k0, job.amx_ld, panel,
                                 C + (m - m0) * ldc + j * NR, ldc, std::min<int64_t>(kAmxRows, m1 - m), nr, first);
          continue;
        }
        for (int64_t m = m0; m < m1; m += MR) {
          const int mr = static_cast<int>(std::min<int64_t>(MR, m1 - m));
          const uint32_t* ap = job.wp + ((gi * nstrips + m / MR) * ngt + k0 / grp) * MR;
          ik.uk(ng, ap, panel, C + (m - m0) * ldc + j * NR, ldc, mr, nr, first);
        }
      }
    }
    finish(job, C, ldc, n, gi, m0, m1, s0, nc);
  }
}

// ------------------------------------------------------------ create / run

bool is_byte_type(int32_t t) { return t == OLC_DTYPE_UINT8 || t == OLC_DTYPE_INT8; }

void* qconv_create_impl(const olc_core_api* api, const olc_node_info* node, bool qlinear, char* error,
                        size_t esize) {
  auto st = std::make_unique<QConvState>();
  st->qlinear = qlinear;
  const ConvOp kind = qlinear ? ConvOp::kQLinearConv : ConvOp::kConvInteger;
  if (!parse_attrs(node, kind, st.get(), error, esize)) return nullptr;
  const char* op = op_name(kind);
  const int xi = 0, wi = qlinear ? 3 : 1;
  if (qlinear ? (node->n_inputs < 8 || node->n_inputs > 9) : (node->n_inputs < 2 || node->n_inputs > 4))
    return fail_create(error, esize, "%s takes %s inputs, got %d", op, qlinear ? "8 or 9" : "2 to 4", node->n_inputs);
  if (node->n_outputs != 1) return fail_create(error, esize, "expects 1 output, got %d", node->n_outputs);
  st->x_type = node->input_dtypes[xi];
  st->w_type = node->input_dtypes[wi];
  if (!is_byte_type(st->x_type) || !is_byte_type(st->w_type))
    return fail_create(error, esize, "x and w must be uint8 or int8, got %s and %s", olc_dtype_name(st->x_type),
                       olc_dtype_name(st->w_type));
  // Zero points have their operand's type; scales are float32.
  const int zx = qlinear ? 2 : 2, zw = qlinear ? 5 : 3;
  if (zx < node->n_inputs && node->input_dtypes[zx] != OLC_DTYPE_UNDEFINED && node->input_dtypes[zx] != st->x_type)
    return fail_create(error, esize, "x_zero_point has type %s, x has %s", olc_dtype_name(node->input_dtypes[zx]),
                       olc_dtype_name(st->x_type));
  if (zw < node->n_inputs && node->input_dtypes[zw] != OLC_DTYPE_UNDEFINED && node->input_dtypes[zw] != st->w_type)
    return fail_create(error, esize, "w_zero_point has type %s, w has %s", olc_dtype_name(node->input_dtypes[zw]),
                       olc_dtype_name(st->w_type));
  if (qlinear) {
    for (int i : {1, 4, 6})
      if (node->input_dtypes[i] != OLC_DTYPE_FLOAT)
        return fail_create(error, esize, "input %d (a scale) must be float32, got %s", i,
                           olc_dtype_name(node->input_dtypes[i]));
    st->y_type = node->input_dtypes[7];
    if (!is_byte_type(st->y_type))
      return fail_create(error, esize, "y_zero_point must be uint8 or int8, got %s", olc_dtype_name(st->y_type));
    if (node->n_inputs > 8 && node->input_dtypes[8] != OLC_DTYPE_UNDEFINED && node->input_dtypes[8] != OLC_DTYPE_INT32)
      return fail_create(error, esize, "B must be int32, got %s", olc_dtype_name(node->input_dtypes[8]));
  } else {
    st->y_type = OLC_DTYPE_INT32;
  }
  const olc_tuning_param* vnni =
      api->tuning_declare_int("olc_matmul", op, "default", OLC_DTYPE_UNDEFINED, "use_vnni", 1);
  st->ik = select_kernel(api, api->tuning_read_int(vnni) != 0);
  st->packed_ik = st->ik;
  const olc_tuning_param* u8s8 =
      api->tuning_declare_int("olc_matmul", op, "default", OLC_DTYPE_UNDEFINED, "use_u8s8", 1);
  st->ck = conv_kernels_for(api->simd_level());
  st->t_par = api->tuning_declare_int("olc_matmul", op, "default", OLC_DTYPE_UNDEFINED, "parallel_min_macs", 1 << 16);
  // Constant W: packed once.
  std::string note;
  const olc_tensor* cw = node->input_constants ? &node->input_constants[wi] : nullptr;
  if (cw && cw->data && cw->dtype == st->w_type && cw->ndim >= 3 && cw->ndim <= 5 && cw->shape[0] % st->group == 0 &&
      olc_element_count(cw) > 0) {
    const int64_t cout = cw->shape[0], Mg = cout / st->group, Kg = olc_element_count(cw) / cout;
    const uint8_t* wdata = static_cast<const uint8_t*>(cw->data);
    // At the AVX2 level, weights whose pairs fit int16 go to the s8 x u8
    // vpmaddubsw kernel (twice the products of vpmaddwd per instruction).
    if (api->simd_level() == OLC_SIMD_AVX2 && api->tuning_read_int(u8s8) != 0 &&
        weight_pairs_fit_int16(st->w_type == OLC_DTYPE_INT8, wdata, cout, Kg))
      st->packed_ik = avx2::int_kernel_u8s8(true);
    const IntKernel& pk = st->packed_ik;
    st->wpack.resize(static_cast<size_t>(st->group * ((Mg + pk.mr - 1) / pk.mr) * ((Kg + pk.group - 1) / pk.group) * pk.mr));
    st->wrowsum.resize(static_cast<size_t>(cout));
    pack_w(pk, st->w_type == OLC_DTYPE_INT8, wdata, st->group, Mg, Kg, st->wpack.data(), st->wrowsum.data());
    // AMX-INT8 blocks beside the vpdpbusd kernel (whose panels are the
    // tiles' B layout); use_amx = 0 keeps to vpdpbusd.
    const olc_tuning_param* use_amx =
        api->tuning_declare_int("olc_matmul", op, "default", OLC_DTYPE_UNDEFINED, "use_amx", 1);
    if (api->tuning_read_int(use_amx) != 0 && amx::int8_beside(api->cpu_features(), pk)) {
      st->amx_ld = (Kg + 63) / 64 * 64;
      st->amx_rows.resize(static_cast<size_t>(cout * st->amx_ld));
      pack_w_rows(pk, st->w_type == OLC_DTYPE_INT8, wdata, cout, Kg, st->amx_ld, st->amx_rows.data());
    }
    st->wdata = cw->data;
    st->wshape.assign(cw->shape, cw->shape + cw->ndim);
    const size_t bytes = st->wpack.size() * 4 + st->wrowsum.size() * 4 + st->amx_rows.size();
    if (OLC_API_HAS(api, report_prepacked)) api->report_prepacked(node, st->wpack.data(), static_cast<int64_t>(bytes));
    char buf[64];
    std::snprintf(buf, sizeof buf, " prepacked-W %.1f KiB", bytes / 1024.0);
    note = buf;
  }
  st->detail = std::string(st->amx_rows.empty() ? "" : "amx+") + st->packed_ik.name + " implicit-gemm" + note;
  return st.release();
}

void* qlinear_conv_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return qconv_create_impl(api, node, true, error, esize);
}
void* conv_integer_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return qconv_create_impl(api, node, false, error, esize);
}
void qconv_destroy(void* state) { delete static_cast<QConvState*>(state); }

bool check_tensor(olc_context* ctx, const olc_tensor& t, int idx, const char* name) {
  const int64_t n = olc_element_count(&t);
  if (n < 0) return fail_run(ctx, "%s (input %d) has a negative dimension", name, idx), false;
  if (n > 0 && !t.data) return fail_run(ctx, "%s (input %d) has no data", name, idx), false;
  return true;
}

// A scalar (one value, rank 0 or 1) of a per-tensor quantization input.
bool scalar_of(olc_context* ctx, const olc_tensor& t, const char* name, double* v) {
  if (olc_element_count(&t) != 1 || t.ndim > 1)
    return fail_run(ctx, "%s must be a scalar (per tensor), got %s", name, shape_str(t).c_str()), false;
  switch (t.dtype) {
    case OLC_DTYPE_FLOAT: *v = *static_cast<const float*>(t.data); break;
    case OLC_DTYPE_UINT8: *v = *static_cast<const uint8_t*>(t.data); break;
    case OLC_DTYPE_INT8: *v = *static_cast<const int8_t*>(t.data); break;
    default: return fail_run(ctx, "%s has an unexpected type %s", name, olc_dtype_name(t.dtype)), false;
  }
  return true;
}

// Per tensor or per output channel ([M]): M values as double.
bool per_channel(olc_context* ctx, const olc_tensor& t, const char* name, int64_t M, std::vector<double>* out) {
  const int64_t n = olc_element_count(&t);
  if (!(n == 1 && t.ndim <= 1) && !(t.ndim == 1 && n == M))
    return fail_run(ctx, "%s must be a scalar or 1-D with %lld values (the output channels), got %s", name,
                    (long long)M, shape_str(t).c_str()),
           false;
  out->resize(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) {
    const int64_t j = n == 1 ? 0 : i;
    switch (t.dtype) {
      case OLC_DTYPE_FLOAT: (*out)[i] = static_cast<const float*>(t.data)[j]; break;
      case OLC_DTYPE_UINT8: (*out)[i] = static_cast<const uint8_t*>(t.data)[j]; break;
      case OLC_DTYPE_INT8: (*out)[i] = static_cast<const int8_t*>(t.data)[j]; break;
      default: return fail_run(ctx, "%s has an unexpected type %s", name, olc_dtype_name(t.dtype)), false;
    }
  }
  return true;
}

int32_t qconv_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const QConvState* st = static_cast<const QConvState*>(state);
  if (n_outputs != 1) return fail_run(ctx, "expects 1 output");
  auto present = [&](int i) { return i < n_inputs && inputs[i].dtype != OLC_DTYPE_UNDEFINED; };
  const int wi = st->qlinear ? 3 : 1;
  const olc_tensor& x = inputs[0];
  const olc_tensor& w = inputs[wi];
  if (x.dtype != st->x_type || w.dtype != st->w_type)
    return fail_run(ctx, "x / w have types %s / %s, the kernel was created for %s / %s", olc_dtype_name(x.dtype),
                    olc_dtype_name(w.dtype), olc_dtype_name(st->x_type), olc_dtype_name(st->w_type));
  static const char* const kNames[] = {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale",
                                       "y_zero_point", "B"};
  static const char* const kIntNames[] = {"x", "w", "x_zero_point", "w_zero_point"};
  for (int i = 0; i < n_inputs; ++i)
    if (present(i) && !check_tensor(ctx, inputs[i], i, st->qlinear ? kNames[i] : kIntNames[i])) return OLC_ERROR;
  const olc_tensor* b = st->qlinear && present(8) ? &inputs[8] : nullptr;
  Geom g;
  char err[400];
  if (!resolve(st, x, w, b, &g, err, sizeof err)) return fail_run(ctx, "%s", err);
  // Quantization parameters (checked before the output exists).
  double xzd = 0, xs = 1, ys = 1, yzd = 0;
  std::vector<double> wzd(static_cast<size_t>(g.Cout), 0.0), wsd;
  const int zx = 2, zw = st->qlinear ? 5 : 3;
  if (present(zx) && !scalar_of(ctx, inputs[zx], "x_zero_point", &xzd)) return OLC_ERROR;
  if (present(zw) && !per_channel(ctx, inputs[zw], "w_zero_point", g.Cout, &wzd)) return OLC_ERROR;
  std::vector<float> mult;
  if (st->qlinear) {
    if (!scalar_of(ctx, inputs[1], "x_scale", &xs) || !per_channel(ctx, inputs[4], "w_scale", g.Cout, &wsd) ||
        !scalar_of(ctx, inputs[6], "y_scale", &ys) || !scalar_of(ctx, inputs[7], "y_zero_point", &yzd))
      return OLC_ERROR;
    if (b && b->dtype != OLC_DTYPE_INT32) return fail_run(ctx, "B must be int32, got %s", olc_dtype_name(b->dtype));
    mult.resize(static_cast<size_t>(g.Cout));
    for (int64_t i = 0; i < g.Cout; ++i)
      mult[i] = static_cast<float>(static_cast<float>(static_cast<float>(xs) * static_cast<float>(wsd[i])) /
                                   static_cast<float>(ys));
  }
  std::vector<int32_t> wz(wzd.begin(), wzd.end());
  std::vector<int64_t> oshape(x.ndim);
  oshape[0] = g.N;
  oshape[1] = g.Cout;
  for (int i = 0; i < g.nsp; ++i) oshape[2 + i] = g.out[3 - g.nsp + i];
  void* y = g_api->allocate_output(ctx, 0, st->y_type, x.ndim, oshape.data());
  const int64_t total = g.N * g.Cout * g.out_sp;
  if (!y && total > 0) return OLC_ERROR;
  if (total == 0) return OLC_OK;
  const bool packed = !st->wpack.empty() && w.data == st->wdata &&
                      w.ndim == static_cast<int32_t>(st->wshape.size()) &&
                      std::equal(st->wshape.begin(), st->wshape.end(), w.shape);
  const IntKernel& ik = packed ? st->packed_ik : st->ik;
  const int MR = ik.mr, NR = ik.nr;
  std::vector<uint32_t> wrun;
  std::vector<int32_t> rsrun;
  const uint32_t* wp;
  const int32_t* rowsum;
  if (packed) {
    wp = st->wpack.data();
    rowsum = st->wrowsum.data();
  } else {
    wrun.resize(static_cast<size_t>(g.G * ((g.Mg + MR - 1) / MR) * ((g.Kg + ik.group - 1) / ik.group) * MR));
    rsrun.resize(static_cast<size_t>(g.Cout));
    if (g.Kg > 0)
      pack_w(ik, st->w_type == OLC_DTYPE_INT8, static_cast<const uint8_t*>(w.data), g.G, g.Mg, g.Kg, wrun.data(),
             rsrun.data());
    wp = wrun.data();
    rowsum = rsrun.data();
  }
  const int64_t macs = total * g.Kg;
  const int64_t threads =
      macs >= g_api->tuning_read_int(st->t_par) ? std::max<int32_t>(1, g_api->concurrency(ctx)) : 1;
  std::atomic<bool> failed{false};
  QJob job{};
  job.g = &g;
  job.st = st;
  job.ik = &ik;
  job.wp = wp;
  job.rowsum = rowsum;
  if (packed && !st->amx_rows.empty()) {
    job.amx_rows = st->amx_rows.data();
    job.amx_ld = st->amx_ld;
  }
  job.xz = static_cast<int32_t>(xzd);
  job.wz = wz.data();
  job.mult = mult.data();
  job.yz = static_cast<int32_t>(yzd);
  job.bias = b ? static_cast<const int32_t*>(b->data) : nullptr;
  job.y = y;
  job.failed = &failed;
  // Tiles of output positions (multiples of NR), channel shares when the
  // tiles are fewer than the threads (as the float Conv).
  job.NC = 8 * NR;
  job.tn = (g.out_sp + job.NC - 1) / job.NC;
  if (threads > 1 && g.N * g.G * job.tn < 8 * threads) {
    int64_t tn = job.tn;
    while ((g.N * g.G * tn) % threads) ++tn;
    const int64_t nc = ((g.out_sp + tn - 1) / tn + NR - 1) / NR * NR;
    if (nc >= 2 * NR) {
      job.NC = nc;
      job.tn = (g.out_sp + nc - 1) / nc;
    }
  }
  // Channel shares in whole AMX blocks where the tiles run.
  const int64_t row_unit = job.amx_rows ? kAmxRows : MR;
  const int64_t base = g.N * g.G * job.tn, mblocks = (g.Mg + row_unit - 1) / row_unit;
  job.tm = 1;
  if (threads > 1 && base < 4 * threads && base % threads)
    while (job.tm < mblocks && (base * job.tm) % threads) ++job.tm;
  job.mstep = (mblocks + job.tm - 1) / job.tm * row_unit;
  job.tm = (g.Mg + job.mstep - 1) / job.mstep;
  // The input as bytes in PadLayout: X itself without padding at unit W
  // stride, else a padded copy (pads = the zero point) per chunk of images.
  bool copy = g.s[2] != 1;
  for (int i = 0; i < 3; ++i) copy = copy || g.pb[i] || g.pe[i];
  PadLayout& l = job.l;
  if (copy) {
    l.Dp = g.in[0] + g.pb[0] + g.pe[0];
    l.Hp = g.in[1] + g.pb[1] + g.pe[1];
    l.sw = g.s[2];
    l.Wq = (g.in[2] + g.pb[2] + g.pe[2] + l.sw - 1) / l.sw;
    l.cs = l.Dp * l.Hp * l.sw * l.Wq;
  } else {
    l = PadLayout{g.in[0], g.in[1], 1, g.in[2], g.in_sp};
  }
  job.img_stride = g.C * l.cs;
  std::vector<int64_t> koff(static_cast<size_t>(g.Kg));
  channel_tap_offsets(g, l, koff.data());
  job.koff = koff.data();
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(g.N, (int64_t(16) << 20) / std::max<int64_t>(1, job.img_stride)));
  uint8_t* buf = nullptr;
  if (copy) {
    buf = static_cast<uint8_t*>(t_pad.get(static_cast<size_t>(chunk * job.img_stride)));
    if (!buf) return fail_run(ctx, "out of memory for the %s work buffers", st->qlinear ? "QLinearConv" : "ConvInteger");
  }
  int32_t* csum = static_cast<int32_t*>(t_csum.get(sizeof(int32_t) * chunk * g.G * g.out_sp));
  const int64_t prows = l.Dp * l.Hp * l.sw * l.Wq;
  int32_t* rowsums = static_cast<int32_t*>(t_rowsum.get(sizeof(int32_t) * chunk * g.G * prows));
  if (!csum || !rowsums) return fail_run(ctx, "out of memory for the work buffers");
  job.csum = csum;
  // On threads, the preparation too: it is serial work of about the size of
  // the input (3x3 64->64 at 56x56 stride 2 on AMX: a tenth of the layer).
  const bool share_prep = threads > 1 && g.C * l.cs >= (int64_t(1) << 16);
  PrepJob pj{&g, &l, nullptr, static_cast<uint8_t>(job.xz), buf, nullptr, job.img_stride,
             st->x_type == OLC_DTYPE_INT8, share_prep ? 2 * threads : 1, prows, rowsums, koff.data(), csum};
  auto run_prep = [&](void (*fn)(void*, int64_t, int64_t), int64_t items) {
    if (share_prep && items > 1) g_api->parallel_for(ctx, items, 1, 0, fn, &pj);
    else fn(&pj, 0, items);
  };
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t nimg = std::min(chunk, g.N - n0);
    const uint8_t* x8 = static_cast<const uint8_t*>(x.data);
    pj.x = x8 + n0 * g.C * g.in_sp;
    if (copy) {
      run_prep(&pad_range, nimg * g.C);
      job.src = buf;
    } else {
      job.src = x8 + n0 * job.img_stride;
    }
    pj.src = job.src;
    job.n0 = n0;
    run_prep(&channel_sums_range, nimg * g.G * pj.shares);
    run_prep(&window_sums_range, nimg * g.G * pj.shares);
    if (g.Kg == 0) {
      // No products: the compensation alone (zero sums).
      for (int64_t i = 0; i < nimg; ++i)
        for (int64_t gi = 0; gi < g.G; ++gi) {
          std::vector<int32_t> zeros(static_cast<size_t>(g.Mg * g.out_sp), 0);
          int32_t* C = st->qlinear ? zeros.data()
                                   : static_cast<int32_t*>(y) + ((n0 + i) * g.Cout + gi * g.Mg) * g.out_sp;
          if (!st->qlinear) std::fill(C, C + g.Mg * g.out_sp, 0);
          finish(job, C, g.out_sp, n0 + i, gi, 0, g.Mg, 0, g.out_sp);
        }
      continue;
    }
    const int64_t tasks = nimg * g.G * job.tn * job.tm;
    if (threads > 1 && tasks > 1) g_api->parallel_for(ctx, tasks, 1, 0, &q_range, &job);
    else q_range(&job, 0, tasks);
    if (failed.load()) break;
  }
  if (failed.load()) return fail_run(ctx, "out of memory for the work buffers");
  g_api->record_usage_detail(ctx, st->detail.c_str());
  return OLC_OK;
}

const olc_kernel_vtable kQLinearConv = {OLC_ABI_VERSION, 0, "olc_matmul::QLinearConv",
                                        guarded_create<qlinear_conv_create>, guarded_run<qconv_run>, qconv_destroy};
const olc_kernel_vtable kConvInteger = {OLC_ABI_VERSION, 0, "olc_matmul::ConvInteger",
                                        guarded_create<conv_integer_create>, guarded_run<qconv_run>, qconv_destroy};

}  // namespace

void set_qconv_api(const olc_core_api* api) { g_api = api; }
const olc_kernel_vtable* qlinear_conv_vtable() { return &kQLinearConv; }
const olc_kernel_vtable* conv_integer_vtable() { return &kConvInteger; }

}  // namespace olc_mm
