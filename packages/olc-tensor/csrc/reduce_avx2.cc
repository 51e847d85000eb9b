// AVX2 row reductions of float32 (see reduce_kernels.h).
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "reduce_kernels.h"

namespace olc_tn {
namespace avx2 {
namespace {

double sum(const float* x, int64_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v0)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)));
    a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(v1)));
    a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1)));
  }
  for (; i + 4 <= n; i += 4) a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(x + i)));
  const __m256d a = _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3));
  alignas(32) double t[4];
  _mm256_store_pd(t, a);
  double s = (t[0] + t[1]) + (t[2] + t[3]);
  for (; i < n; ++i) s += x[i];
  return s;
}

template <bool kMax>
float extreme(const float* x, int64_t n) {
  const float init = kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  __m256 m0 = _mm256_set1_ps(init), m1 = m0;
  __m256 nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
    m0 = kMax ? _mm256_max_ps(m0, v0) : _mm256_min_ps(m0, v0);
    m1 = kMax ? _mm256_max_ps(m1, v1) : _mm256_min_ps(m1, v1);
  }
  const __m256 m = kMax ? _mm256_max_ps(m0, m1) : _mm256_min_ps(m0, m1);
  alignas(32) float t[8];
  _mm256_store_ps(t, m);
  float r = t[0];
  for (int k = 1; k < 8; ++k) r = kMax ? (t[k] > r ? t[k] : r) : (t[k] < r ? t[k] : r);
  if (_mm256_movemask_ps(nan)) return std::numeric_limits<float>::quiet_NaN();
  for (; i < n; ++i) {
    if (x[i] != x[i]) return x[i];
    r = kMax ? (x[i] > r ? x[i] : r) : (x[i] < r ? x[i] : r);
  }
  return r;
}

}  // namespace

RowReduceF32 row_reduce_f32() { return {&sum, &extreme<true>, &extreme<false>, "avx2"}; }

}  // namespace avx2
}  // namespace olc_tn
