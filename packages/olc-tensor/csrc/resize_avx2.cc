// AVX2 float32 resampling passes (see resize_kernels.h): gathers for the
// innermost axis, 8-lane blocks for the outer axes; scalar tails (nothing is
// read or written past the end).
#include <immintrin.h>

#include "resize_kernels.h"

namespace olc_tn {
namespace avx2 {
namespace {

void taps_inner(float* dst, const float* src, const int32_t* idx, const float* w, int32_t k, int64_t n_out) {
  int64_t o = 0;
  if (k == 2) {
    // Two taps (linear): indices and weights interleaved [i0, i1, i0, i1, ...].
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (; o + 8 <= n_out; o += 8) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + 2 * o));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + 2 * o + 8));
      const __m256i pa = _mm256_permutevar8x32_epi32(a, even), pb = _mm256_permutevar8x32_epi32(b, even);
      const __m256i i0 = _mm256_permute2x128_si256(pa, pb, 0x20), i1 = _mm256_permute2x128_si256(pa, pb, 0x31);
      const __m256 wa = _mm256_loadu_ps(w + 2 * o), wb = _mm256_loadu_ps(w + 2 * o + 8);
      const __m256 qa = _mm256_permutevar8x32_ps(wa, even), qb = _mm256_permutevar8x32_ps(wb, even);
      const __m256 w0 = _mm256_permute2f128_ps(qa, qb, 0x20), w1 = _mm256_permute2f128_ps(qa, qb, 0x31);
      const __m256 x0 = _mm256_i32gather_ps(src, i0, 4), x1 = _mm256_i32gather_ps(src, i1, 4);
      _mm256_storeu_ps(dst + o, _mm256_add_ps(_mm256_mul_ps(w0, x0), _mm256_mul_ps(w1, x1)));
    }
  }
  taps_inner_from(dst, src, idx, w, k, o, n_out);
}

void taps_blocks(float* dst, const float* src, const int32_t* lo, const int32_t*, const int32_t* rel, const float* w,
                 int32_t k, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* s = src + lo[b];
    const int32_t* rb = rel + b * k * 16;
    const float* wb = w + b * k * 16;
    for (int h = 0; h < 16; h += 8) {
      __m256 v = _mm256_mul_ps(_mm256_loadu_ps(wb + h),
                               _mm256_i32gather_ps(s, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb + h)), 4));
      for (int32_t t = 1; t < k; ++t) {
        const __m256i it = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb + t * 16 + h));
        v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_loadu_ps(wb + t * 16 + h), _mm256_i32gather_ps(s, it, 4)));
      }
      _mm256_storeu_ps(dst + b * 16 + h, v);
    }
  }
}

void combine(float* dst, const float* const* rows, const float* w, int32_t k, int64_t n) {
  int64_t i = 0;
  if (k == 2) {
    const __m256 w0 = _mm256_set1_ps(w[0]), w1 = _mm256_set1_ps(w[1]);
    const float *r0 = rows[0], *r1 = rows[1];
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_mul_ps(w0, _mm256_loadu_ps(r0 + i)),
                                              _mm256_mul_ps(w1, _mm256_loadu_ps(r1 + i))));
  } else {
    for (; i + 8 <= n; i += 8) {
      __m256 s = _mm256_mul_ps(_mm256_set1_ps(w[0]), _mm256_loadu_ps(rows[0] + i));
      for (int32_t t = 1; t < k; ++t) s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(w[t]), _mm256_loadu_ps(rows[t] + i)));
      _mm256_storeu_ps(dst + i, s);
    }
  }
  for (; i < n; ++i) {
    float s = w[0] * rows[0][i];
    for (int32_t t = 1; t < k; ++t) s += w[t] * rows[t][i];
    dst[i] = s;
  }
}

}  // namespace

ResizeF32 resize_f32() { return {taps_inner, taps_blocks, combine, "avx2"}; }

}  // namespace avx2
}  // namespace olc_tn
