// AVX-512 level of ml_kernels.h: 16 float32 lanes, masked tail loads.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ml_kernels.h"

namespace olc_ml {
namespace avx512 {

namespace {
constexpr const char* kIsa = "avx512";

struct V {
  using R = __m512;
  static constexpr int64_t W = 16;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load_part(const float* p, int64_t k) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << k) - 1u), p);
  }
  static __mmask16 first(int64_t k) { return static_cast<__mmask16>((1u << k) - 1u); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static void store_part(float* p, R v, int64_t k) { _mm512_mask_storeu_ps(p, first(k), v); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  // As the AVX2 level's exp, with scalef for 2^n.
  static R exp(R x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654f), _CMP_LT_OQ);
    const __mmask16 huge = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.72283f), _CMP_GT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33654f)), _mm512_set1_ps(88.72283f));
    const R n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    R p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    R y = _mm512_scalef_ps(p, n);
    y = _mm512_mask_mov_ps(y, tiny, _mm512_setzero_ps());
    return _mm512_mask_mov_ps(y, huge, _mm512_set1_ps(__builtin_inff()));
  }
  static float hsum(R v) { return _mm512_reduce_add_ps(v); }
};
}  // namespace

#include "ml_kernels.inc"

}  // namespace avx512
}  // namespace olc_ml
