// AVX2 + FMA level of ml_kernels.h: 8 float32 lanes, masked tail loads.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ml_kernels.h"
#include "olc/avx2_tail.h"

namespace olc_ml {
namespace avx2 {

namespace {
constexpr const char* kIsa = "avx2";

struct V {
  using R = __m256;
  static constexpr int64_t W = 8;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static R load_part(const float* p, int64_t k) { return olc::avx2::load_first(p, k); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static void store_part(float* p, R v, int64_t k) { olc::avx2::store_first(p, v, k); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  // exp(x) = 2^n e^r, n = round(x / ln 2), r = x - n ln 2 (ln 2 in two
  // parts), e^r by a degree-7 polynomial (Cephes' expf coefficients); 2^n
  // built as two powers of two so n may reach either end of the range.
  static R exp(R x) {
    const R tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
    const R huge = _mm256_cmp_ps(x, _mm256_set1_ps(88.72283f), _CMP_GT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.72283f));
    const R n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    R p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i half = _mm256_srai_epi32(ni, 1);
    const __m256i bias = _mm256_set1_epi32(127);
    const R e1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    const R e2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), bias), 23));
    R y = _mm256_mul_ps(_mm256_mul_ps(p, e1), e2);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), tiny);
    return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), huge);
  }
  static float hsum(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
}  // namespace

#include "ml_kernels.inc"

}  // namespace avx2
}  // namespace olc_ml
