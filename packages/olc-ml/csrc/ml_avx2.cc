// AVX2 + FMA level of ml_kernels.h: 8 float32 lanes, masked tail loads.
#include <immintrin.h>

#include <cstdint>

#include "ml_kernels.h"

namespace olc_ml {
namespace avx2 {

namespace {
constexpr const char* kIsa = "avx2";

struct V {
  using R = __m256;
  static constexpr int64_t W = 8;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static R load_part(const float* p, int64_t k) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(k)), idx));
  }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
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
