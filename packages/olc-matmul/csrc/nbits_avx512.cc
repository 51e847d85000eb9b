// AVX-512 MatMulNBits kernels (float activations): the GEMV for 4 and 8
// bits (four weight rows per pass sharing the activation loads, nibbles
// widened with vpmovzxbd; 2 bits take the generic one) and the panel
// dequantization for the GEMM path (16 columns per vpgatherdd, 16, 8 or 4
// values per gathered dword).
#include <immintrin.h>

#include <algorithm>

#include "mm_common.h"

namespace olc_mm {
namespace avx512 {
namespace {

inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

template <int R, bool Four>
void rows_t(const NbGemv* p, int64_t n) {
  const int64_t kb = p->kb, blob = p->blob;
  const int64_t steps = Four ? p->bs / 32 : p->bs / 16;
  __m512 acc[R];
  const uint8_t* row[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    row[r] = p->B + (n + r) * kb * blob;
  }
  const __m512i m15 = _mm512_set1_epi32(15);
  const float* a = p->a;
  for (int64_t b = 0; b < kb; ++b) {
    __m512 inner[R];
    for (int r = 0; r < R; ++r) inner[r] = _mm512_setzero_ps();
    for (int64_t s = 0; s < steps; ++s) {
      if (Four) {
        const __m512 a0 = _mm512_loadu_ps(a), a1 = _mm512_loadu_ps(a + 16);
        a += 32;
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row[r])));
          row[r] += 16;
          const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(w, m15));
          const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(w, 4));
          inner[r] = _mm512_fmadd_ps(lo, a0, _mm512_fmadd_ps(hi, a1, inner[r]));
        }
      } else {
        const __m512 a0 = _mm512_loadu_ps(a);
        a += 16;
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row[r])));
          row[r] += 16;
          inner[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(w), a0, inner[r]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(inner[r], _mm512_set1_ps(p->scales[(n + r) * kb + b]), acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    // Zero-point term: dot(sz[n, :], asum).
    const float* sz = p->sz + (n + r) * kb;
    __m512 c = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 16 <= kb; b += 16) c = _mm512_fmadd_ps(_mm512_loadu_ps(sz + b), _mm512_loadu_ps(p->asum + b), c);
    if (b < kb) {
      const __mmask16 m = static_cast<__mmask16>((1u << (kb - b)) - 1u);
      c = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, sz + b), _mm512_maskz_loadu_ps(m, p->asum + b), c);
    }
    float y = hsum(acc[r]) - hsum(c);
    if (p->bias) y += p->bias[n + r];
    p->y[n + r] = y;
  }
}

}  // namespace

void nbits_gemv_fast(const NbGemv* p, int64_t n0, int64_t n1) {
  if (p->chunk != 16 || p->bits == 2) return nbits_gemv_generic(p, n0, n1);
  const bool four = p->bits == 4;
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) four ? rows_t<4, true>(p, n) : rows_t<4, false>(p, n);
  for (; n < n1; ++n) four ? rows_t<1, true>(p, n) : rows_t<1, false>(p, n);
}

void nbits_dequant_fast(const NbDequant* p) {
  const int NR = p->NR;
  const int64_t rs = p->kb * p->blob;
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i idx_b = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int>(rs)));
  const __m512i idx_s = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int>(p->kb)));
  const __m512i mlow = _mm512_set1_epi32((1 << p->bits) - 1);
  const int per = 32 / p->bits;  // values per gathered dword
  const int shift = p->bits;
  const int64_t kend = p->k0 + p->kc;
  for (int64_t j = 0; j * NR < p->nc; ++j) {
    float* d = p->dst + j * p->kc * NR;
    for (int g = 0; g < NR; g += 16) {
      const int64_t c0 = j * NR + g;
      const int64_t w = std::min<int64_t>(16, p->nc - c0);
      float* dg = d + g;
      if (w <= 0) {
        for (int64_t k = 0; k < p->kc; ++k) _mm512_storeu_ps(dg + k * NR, _mm512_setzero_ps());
        continue;
      }
      const __mmask16 m = static_cast<__mmask16>(w >= 16 ? 0xffffu : (1u << w) - 1u);
      const uint8_t* base = p->B + (p->n0 + c0) * rs;
      const float* sbase = p->scales + (p->n0 + c0) * p->kb;
      const float* zbase = p->nzs + (p->n0 + c0) * p->kb;
      for (int64_t k = p->k0; k < kend;) {
        const int64_t b = k / p->bs;
        const __m512 s = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx_s, sbase + b, 4);
        const __m512 z = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx_s, zbase + b, 4);
        const int64_t bend = std::min(kend, (b + 1) * p->bs);
        for (; k < bend; k += per) {
          const int64_t r = k - b * p->bs;
          const int64_t off = b * p->blob + r * p->bits / 8;
          const __m512i dw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx_b, base + off, 1);
          const int nt = static_cast<int>(std::min<int64_t>(per, bend - k));
          float* o = dg + (k - p->k0) * NR;
          for (int t = 0; t < nt; ++t) {
            const __m512i q = _mm512_and_si512(_mm512_srli_epi32(dw, static_cast<unsigned>(shift * t)), mlow);
            _mm512_storeu_ps(o + t * NR, _mm512_fmadd_ps(_mm512_cvtepi32_ps(q), s, z));
          }
        }
      }
    }
  }
}

}  // namespace avx512
}  // namespace olc_mm
