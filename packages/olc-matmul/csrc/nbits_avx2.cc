// AVX2 MatMulNBits panel dequantization for the float GEMM path
// (accuracy_level 0 to 3, more than four rows): eight columns per
// vpgatherdd, 16, 8 or 4 values per gathered dword, written straight into
// the float32 microkernel's kc x NR panels (w = q * scale - zp * scale).
// The AVX-512 one (nbits_avx512.cc) does the same sixteen columns at a time.
#include <immintrin.h>

#include <algorithm>

#include "mm_common.h"

namespace olc_mm {
namespace avx2 {

void nbits_dequant_fast(const NbDequant* p) {
  const int NR = p->NR;
  const int64_t rs = p->kb * p->blob;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i idx_b = _mm256_mullo_epi32(lane, _mm256_set1_epi32(static_cast<int>(rs)));
  const __m256i idx_s = _mm256_mullo_epi32(lane, _mm256_set1_epi32(static_cast<int>(p->kb)));
  const __m256i mlow = _mm256_set1_epi32((1 << p->bits) - 1);
  const int per = 32 / p->bits;  // values per gathered dword
  const int64_t kend = p->k0 + p->kc;
  for (int64_t j = 0; j * NR < p->nc; ++j) {
    float* d = p->dst + j * p->kc * NR;
    for (int g = 0; g < NR; g += 8) {
      const int64_t c0 = j * NR + g;
      const int64_t w = std::min<int64_t>(8, p->nc - c0);
      float* dg = d + g;
      if (w <= 0) {
        for (int64_t k = 0; k < p->kc; ++k) _mm256_storeu_ps(dg + k * NR, _mm256_setzero_ps());
        continue;
      }
      // Lanes past the last column gather nothing (and load no byte).
      const __m256i mi = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(w)), lane);
      const __m256 mf = _mm256_castsi256_ps(mi);
      const uint8_t* base = p->B + (p->n0 + c0) * rs;
      const float* sbase = p->scales + (p->n0 + c0) * p->kb;
      const float* zbase = p->nzs + (p->n0 + c0) * p->kb;
      for (int64_t k = p->k0; k < kend;) {
        const int64_t b = k / p->bs;
        const __m256 s = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), sbase + b, idx_s, mf, 4);
        const __m256 z = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), zbase + b, idx_s, mf, 4);
        const int64_t bend = std::min(kend, (b + 1) * p->bs);
        for (; k < bend; k += per) {
          const int64_t r = k - b * p->bs;
          const int64_t off = b * p->blob + r * p->bits / 8;
          const __m256i dw = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(),
                                                         reinterpret_cast<const int*>(base + off), idx_b, mi, 1);
          const int nt = static_cast<int>(std::min<int64_t>(per, bend - k));
          float* o = dg + (k - p->k0) * NR;
          const __m128i shift = _mm_cvtsi32_si128(p->bits);
          __m256i cur = dw;
          for (int t = 0; t < nt; ++t) {
            const __m256i q = _mm256_and_si256(cur, mlow);
            _mm256_storeu_ps(o + t * NR, _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), s, z));
            cur = _mm256_srl_epi32(cur, shift);
          }
        }
      }
    }
  }
}

}  // namespace avx2
}  // namespace olc_mm
