// AVX2 integer microkernels. The general one takes int16 pairs through
// vpmaddwd (exact for every int8 and uint8 operand), tile 6 x 16. The u8 x s8
// one multiplies bytes with vpmaddubsw, twice the products per instruction,
// but saturates each int16 sum of two adjacent products: the driver takes it
// only for a B whose adjacent pairs of (kernel-space, int8) values satisfy
// |b0| + |b1| <= 128, where no sum can leave int16 (255 * 128 = 32640).
// Tile 4 x 16: with the product and the ones vector, six rows would spill.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "mm_common.h"

namespace olc_mm {
namespace avx2 {
namespace {

constexpr int kMR = 6, kNR = 16;

// The first nr columns of M accumulated rows into C (row stride ldc): stored
// on the first K block, else added (wrapping, as int32 sums do).
template <int M>
void store_tile(const __m256i (&acc)[M][2], int32_t* C, int64_t ldc, int nr, int first) {
  for (int i = 0; i < M; ++i) {
    alignas(32) int32_t t[kNR];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), acc[i][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(t + 8), acc[i][1]);
    int32_t* c = C + i * ldc;
    for (int j = 0; j < nr; ++j)
      c[j] = first ? t[j] : static_cast<int32_t>(static_cast<uint32_t>(c[j]) + static_cast<uint32_t>(t[j]));
  }
}

template <int M>
void tile(int64_t ng, const uint32_t* Ap, const uint32_t* Bp, int32_t* C, int64_t ldc, int nr, int first) {
  __m256i acc[M][2];
  for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < ng; ++q) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bp));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bp + 8));
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      const __m256i a = _mm256_set1_epi32(static_cast<int>(Ap[i]));
      acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(a, b0));
      acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(a, b1));
    }
    Ap += kMR;
    Bp += kNR;
  }
  store_tile<M>(acc, C, ldc, nr, first);
}

void ukernel(int64_t ng, const uint32_t* Ap, const uint32_t* Bp, int32_t* C, int64_t ldc, int mr, int nr,
             int first) {
  switch (mr) {
    case 6: return tile<6>(ng, Ap, Bp, C, ldc, nr, first);
    case 5: return tile<5>(ng, Ap, Bp, C, ldc, nr, first);
    case 4: return tile<4>(ng, Ap, Bp, C, ldc, nr, first);
    case 3: return tile<3>(ng, Ap, Bp, C, ldc, nr, first);
    case 2: return tile<2>(ng, Ap, Bp, C, ldc, nr, first);
    case 1: return tile<1>(ng, Ap, Bp, C, ldc, nr, first);
    default: return;
  }
}

void quant_u8(const float* x, int64_t n, float scale, int32_t zp, uint8_t* q) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256i z = _mm256_set1_epi32(zp), lo = _mm256_setzero_si256(), hi = _mm256_set1_epi32(255);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i r = _mm256_add_epi32(_mm256_cvttps_epi32(v), z);
    r = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
    const __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packus_epi16(h, h));
  }
  for (; i < n; ++i) {
    const float r = std::nearbyint(x[i] / scale) + static_cast<float>(zp);
    q[i] = static_cast<uint8_t>(r < 0.0f ? 0.0f : r > 255.0f ? 255.0f : r);
  }
}

bool range(const float* x, int64_t n, float* lo, float* hi) {
  __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    vlo = _mm256_min_ps(vlo, v);
    vhi = _mm256_max_ps(vhi, v);
    bad = _mm256_add_ps(bad, _mm256_sub_ps(v, v));  // NaN from an infinity or NaN, kept by the sum
  }
  alignas(32) float l[8], h[8], b[8];
  _mm256_store_ps(l, vlo);
  _mm256_store_ps(h, vhi);
  _mm256_store_ps(b, bad);
  float rl = 0.0f, rh = 0.0f, rb = 0.0f;
  for (int k = 0; k < 8; ++k) {
    rl = std::min(rl, l[k]);
    rh = std::max(rh, h[k]);
    rb += b[k];
  }
  for (; i < n; ++i) {
    rl = x[i] < rl ? x[i] : rl;
    rh = x[i] > rh ? x[i] : rh;
    rb += x[i] - x[i];
  }
  *lo = rl;
  *hi = rh;
  return rb == 0.0f;
}

void float_row(uint32_t* c, int64_t n, uint32_t ra, const uint32_t* zb, uint32_t zb0, const uint32_t* ct,
               const float* mult, const float* bias) {
  const __m256i vra = _mm256_set1_epi32(static_cast<int>(ra));
  const __m256i rc = _mm256_set1_epi32(static_cast<int>(zb0 * ra));
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + j));
    const __m256i z =
        zb ? _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(zb + j)), vra) : rc;
    v = _mm256_sub_epi32(_mm256_sub_epi32(v, z), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ct + j)));
    _mm256_storeu_ps(reinterpret_cast<float*>(c + j),
                     _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_loadu_ps(mult + j), _mm256_loadu_ps(bias + j)));
  }
  for (; j < n; ++j) {
    const uint32_t v = c[j] - (zb ? zb[j] : zb0) * ra - ct[j];
    const float y = static_cast<float>(static_cast<int32_t>(v)) * mult[j] + bias[j];
    std::memcpy(c + j, &y, 4);
  }
}

constexpr int kMR8 = 4;

// Groups of four k: A entries are four uint8, B entries four int8 of one
// column (the vpdpbusd layout), or with SA the other way round (A int8, B
// uint8); DA reads A in place (row stride lda).
template <int M, bool DA, bool SA>
void tile_u8s8(int64_t ng, const uint32_t* Ap, const uint8_t* A, int64_t lda, const uint32_t* Bp, int32_t* C,
               int64_t ldc, int nr, int first) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[M][2];
  for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < ng; ++q) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bp));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bp + 8));
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      int32_t av;
      if (DA) std::memcpy(&av, A + i * lda + 4 * q, 4);
      else av = static_cast<int32_t>(Ap[i]);
      const __m256i a = _mm256_set1_epi32(av);
      // vpmaddubsw takes its unsigned operand first.
      const __m256i p0 = SA ? _mm256_maddubs_epi16(b0, a) : _mm256_maddubs_epi16(a, b0);
      const __m256i p1 = SA ? _mm256_maddubs_epi16(b1, a) : _mm256_maddubs_epi16(a, b1);
      acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(p0, ones));
      acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(p1, ones));
    }
    if (!DA) Ap += kMR8;
    Bp += kNR;
  }
  store_tile<M>(acc, C, ldc, nr, first);
}

template <bool DA, bool SA>
void dispatch_u8s8(int64_t ng, const uint32_t* Ap, const uint8_t* A, int64_t lda, const uint32_t* Bp, int32_t* C,
                   int64_t ldc, int mr, int nr, int first) {
  switch (mr) {
    case 4: return tile_u8s8<4, DA, SA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 3: return tile_u8s8<3, DA, SA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 2: return tile_u8s8<2, DA, SA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 1: return tile_u8s8<1, DA, SA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    default: return;
  }
}

template <bool SA>
void ukernel_u8s8(int64_t ng, const uint32_t* Ap, const uint32_t* Bp, int32_t* C, int64_t ldc, int mr, int nr,
                  int first) {
  dispatch_u8s8<false, SA>(ng, Ap, nullptr, 0, Bp, C, ldc, mr, nr, first);
}

void ukernel_u8s8_da(int64_t ng, const uint8_t* A, int64_t lda, const uint32_t* Bp, int32_t* C, int64_t ldc, int mr,
                     int nr, int first) {
  dispatch_u8s8<true, false>(ng, nullptr, A, lda, Bp, C, ldc, mr, nr, first);
}

}  // namespace

IntKernel int_kernel_u8s8(bool signed_a) {
  // The in-place A reader takes uint8 A only.
  if (signed_a)
    return {"avx2-s8u8", kMR8, kNR, 4, &ukernel_u8s8<true>, nullptr, nullptr, &quant_u8, &range, &float_row, true};
  return {"avx2-u8s8", kMR8, kNR, 4, &ukernel_u8s8<false>, &ukernel_u8s8_da, nullptr, &quant_u8, &range, &float_row,
          false};
}

IntKernel int_kernel() { return {"avx2", kMR, kNR, 2, &ukernel, nullptr, nullptr, &quant_u8, &range, &float_row}; }

}  // namespace avx2
}  // namespace olc_mm
