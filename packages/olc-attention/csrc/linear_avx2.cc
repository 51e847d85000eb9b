// AVX2 + FMA level of the recurrent-state kernels (linear_kernels.inc):
// 8 float32 lanes, slabs of two vectors (16 state columns), two query
// heads per pass (the 16 ymm registers hold the slab, its update and
// retrieval and the readouts).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "linear_common.h"

namespace olc_attn {
namespace avx2 {

namespace {

struct L8 {
  using R = __m256;
  static constexpr int64_t W = 8;
  static constexpr int kNV = 2;
  static constexpr int kNVWide = 2;
  static constexpr int kMaxQ = 2;
  static R ld(const float* p) { return _mm256_loadu_ps(p); }
  static void st(float* p, R v) { _mm256_storeu_ps(p, v); }
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R round(R a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R exp2i(R n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static R lt(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static R gt(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static R select(R m, R a, R b) { return _mm256_blendv_ps(b, a, m); }
};

#include "linear_kernels.inc"

}  // namespace

const LinearKernels* linear_kernels() {
  static const LinearKernels k = make_linear_kernels<L8>("avx2");
  return &k;
}

}  // namespace avx2
}  // namespace olc_attn
