// AVX-512 row reductions of float32 (see reduce_kernels.h), masked tails.
#include <immintrin.h>

#include <limits>

#include "reduce_kernels.h"

namespace olc_tn {
namespace avx512 {
namespace {

double sum(const float* x, int64_t n) {
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), a2 = _mm512_setzero_pd(), a3 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(v0)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v0), 1))));
    a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm512_castps512_ps256(v1)));
    a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v1), 1))));
  }
  for (; i < n; i += 8) {
    const int64_t k = n - i < 8 ? n - i : 8;
    const __mmask8 m = static_cast<__mmask8>((1u << k) - 1u);
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + i)));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
}

template <bool kMax>
float extreme(const float* x, int64_t n) {
  const float init = kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const __m512 vinit = _mm512_set1_ps(init);
  __m512 m0 = vinit, m1 = vinit;
  __mmask16 nan = 0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    nan |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q);
    m0 = kMax ? _mm512_max_ps(m0, v0) : _mm512_min_ps(m0, v0);
    m1 = kMax ? _mm512_max_ps(m1, v1) : _mm512_min_ps(m1, v1);
  }
  for (; i < n; i += 16) {
    const int64_t k = n - i < 16 ? n - i : 16;
    const __mmask16 m = static_cast<__mmask16>((1u << k) - 1u);
    const __m512 v = _mm512_mask_loadu_ps(vinit, m, x + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    m0 = kMax ? _mm512_max_ps(m0, v) : _mm512_min_ps(m0, v);
  }
  if (nan) return std::numeric_limits<float>::quiet_NaN();
  const __m512 m = kMax ? _mm512_max_ps(m0, m1) : _mm512_min_ps(m0, m1);
  return kMax ? _mm512_reduce_max_ps(m) : _mm512_reduce_min_ps(m);
}

}  // namespace

RowReduceF32 row_reduce_f32() { return {&sum, &extreme<true>, &extreme<false>, "avx512"}; }

}  // namespace avx512
}  // namespace olc_tn
