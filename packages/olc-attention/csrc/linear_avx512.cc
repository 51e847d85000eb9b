// AVX-512 (F, BW, VL, DQ) level of the recurrent-state kernels
// (linear_kernels.inc): 16 float32 lanes, slabs of four vectors (64 state
// columns, 32 KB of rows at dk 128: L1) with four query heads per pass, or
// of eight vectors with one (a fifth fewer cycles per state element here:
// broadcasts and loop overhead spread over twice the columns).
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
namespace avx512 {

namespace {

struct L16 {
  using R = __m512;
  static constexpr int64_t W = 16;
  static constexpr int kNV = 4;
  static constexpr int kNVWide = 8;
  static constexpr int kMaxQ = 4;
  static R ld(const float* p) { return _mm512_loadu_ps(p); }
  static void st(float* p, R v) { _mm512_storeu_ps(p, v); }
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static R round(R a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R exp2i(R n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static __mmask16 lt(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static __mmask16 gt(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static R select(__mmask16 m, R a, R b) { return _mm512_mask_blend_ps(m, b, a); }
};

#include "linear_kernels.inc"

}  // namespace

const LinearKernels* linear_kernels() {
  static const LinearKernels k = make_linear_kernels<L16>("avx512");
  return &k;
}

}  // namespace avx512
}  // namespace olc_attn
