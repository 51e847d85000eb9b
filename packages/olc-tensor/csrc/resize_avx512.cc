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
  taps_inner_from(dst, src, idx, w, k, o, n_out);
}

void taps_blocks(float* dst, const float* src, const int32_t* lo, const int32_t* cnt, const int32_t* rel,
                 const float* w, int32_t k, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* s = src + lo[b];
    const int32_t c = cnt[b];
    const __m512 s0 = _mm512_maskz_loadu_ps(tail(c < 16 ? c : 16), s);
    const __m512 s1 = _mm512_maskz_loadu_ps(tail(c > 16 ? c - 16 : 0), s + 16);
    const int32_t* rb = rel + b * k * 16;
    const float* wb = w + b * k * 16;
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(wb), _mm512_permutex2var_ps(s0, _mm512_loadu_si512(rb), s1));
    for (int32_t t = 1; t < k; ++t)
      v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_loadu_ps(wb + t * 16),
                                         _mm512_permutex2var_ps(s0, _mm512_loadu_si512(rb + t * 16), s1)));
    _mm512_storeu_ps(dst + b * 16, v);
  }
}

void combine(float* dst, const float* const* rows, const float* w, int32_t k, int64_t n) {
  int64_t i = 0;
  if (k == 2) {
    // Linear: the weights and rows in registers, two vectors per step.
    const __m512 w0 = _mm512_set1_ps(w[0]), w1 = _mm512_set1_ps(w[1]);
    const float* r0 = rows[0];
    const float* r1 = rows[1];
    for (; i + 32 <= n; i += 32) {
      const __m512 a = _mm512_add_ps(_mm512_mul_ps(w0, _mm512_loadu_ps(r0 + i)), _mm512_mul_ps(w1, _mm512_loadu_ps(r1 + i)));
      const __m512 b = _mm512_add_ps(_mm512_mul_ps(w0, _mm512_loadu_ps(r0 + i + 16)),
                                     _mm512_mul_ps(w1, _mm512_loadu_ps(r1 + i + 16)));
      _mm512_storeu_ps(dst + i, a);
      _mm512_storeu_ps(dst + i + 16, b);
    }
  }
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

ResizeF32 resize_f32() { return {taps_inner, taps_blocks, combine, "avx512"}; }

}  // namespace avx512
}  // namespace olc_tn
