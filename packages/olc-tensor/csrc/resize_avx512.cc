// AVX-512 float32 resampling passes (see resize_kernels.h); masked tails.
#include <immintrin.h>

#include "resize_kernels.h"

namespace olc_tn {
namespace avx512 {
namespace {

inline __mmask16 tail(int64_t r) { return static_cast<__mmask16>((1u << r) - 1u); }

void taps_inner(float* dst, const float* src, const int32_t* idx, const float* w, int32_t k, int64_t n_out) {
  int64_t o = 0;
  if (k == 2) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (; o + 16 <= n_out; o += 16) {
      const __m512i a = _mm512_loadu_si512(idx + 2 * o), b = _mm512_loadu_si512(idx + 2 * o + 16);
      const __m512 wa = _mm512_loadu_ps(w + 2 * o), wb = _mm512_loadu_ps(w + 2 * o + 16);
      const __m512i i0 = _mm512_permutex2var_epi32(a, ev, b), i1 = _mm512_permutex2var_epi32(a, od, b);
      const __m512 w0 = _mm512_permutex2var_ps(wa, ev, wb), w1 = _mm512_permutex2var_ps(wa, od, wb);
      const __m512 x0 = _mm512_i32gather_ps(i0, src, 4), x1 = _mm512_i32gather_ps(i1, src, 4);
      _mm512_storeu_ps(dst + o, _mm512_add_ps(_mm512_mul_ps(w0, x0), _mm512_mul_ps(w1, x1)));
    }
  }
  for (; o < n_out; ++o) {
    const int32_t* ix = idx + o * k;
    const float* wo = w + o * k;
    float s = wo[0] * src[ix[0]];
    for (int32_t t = 1; t < k; ++t) s += wo[t] * src[ix[t]];
    dst[o] = s;
  }
}

void combine(float* dst, const float* const* rows, const float* w, int32_t k, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 s = _mm512_mul_ps(_mm512_set1_ps(w[0]), _mm512_loadu_ps(rows[0] + i));
    for (int32_t t = 1; t < k; ++t) s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(w[t]), _mm512_loadu_ps(rows[t] + i)));
    _mm512_storeu_ps(dst + i, s);
  }
  if (i < n) {
    const __mmask16 m = tail(n - i);
    __m512 s = _mm512_mul_ps(_mm512_set1_ps(w[0]), _mm512_maskz_loadu_ps(m, rows[0] + i));
    for (int32_t t = 1; t < k; ++t)
      s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(w[t]), _mm512_maskz_loadu_ps(m, rows[t] + i)));
    _mm512_mask_storeu_ps(dst + i, m, s);
  }
}

}  // namespace

ResizeF32 resize_f32() { return {taps_inner, combine, "avx512"}; }

}  // namespace avx512
}  // namespace olc_tn
