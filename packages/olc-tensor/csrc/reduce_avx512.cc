// AVX-512 row reductions of float32 (see reduce_kernels.h), masked tails.
#include <immintrin.h>

#include <limits>

#include "reduce_kernels.h"

namespace olc_tn {
namespace avx512 {
namespace {

// Sums of f(x) in float64 for f = identity, |x| or x * x (the square of a
// float32 is exact in float64); masked tails.
enum class Fn { Id, Abs, Sq };

template <Fn F>
inline __m512d term(__m512d v) {
  if constexpr (F == Fn::Abs) return _mm512_abs_pd(v);
  else if constexpr (F == Fn::Sq) return _mm512_mul_pd(v, v);
  else return v;
}

template <Fn F>
double sum_of(const float* x, int64_t n) {
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), a2 = _mm512_setzero_pd(), a3 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    a0 = _mm512_add_pd(a0, term<F>(_mm512_cvtps_pd(_mm512_castps512_ps256(v0))));
    a1 = _mm512_add_pd(a1, term<F>(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v0, 1))));
    a2 = _mm512_add_pd(a2, term<F>(_mm512_cvtps_pd(_mm512_castps512_ps256(v1))));
    a3 = _mm512_add_pd(a3, term<F>(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v1, 1))));
  }
  for (; i < n; i += 8) {
    const int64_t k = n - i < 8 ? n - i : 8;
    const __mmask8 m = static_cast<__mmask8>((1u << k) - 1u);
    a0 = _mm512_add_pd(a0, term<F>(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + i))));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
}

// exp(d) for d in [-700, 0]: d = k ln2 + r, |r| <= ln2 / 2, exp(r) by its
// Taylor series to r^11 (remainder below 2e-13), scaled by 2^k (vscalefpd).
inline __m512d exp_pd(__m512d d) {
  d = _mm512_min_pd(_mm512_max_pd(d, _mm512_set1_pd(-700.0)), _mm512_setzero_pd());
  const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(d, _mm512_set1_pd(1.4426950408889634)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0.6931471805598903), d);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(5.497923018708371e-14), r);
  __m512d p = _mm512_set1_pd(1.0 / 39916800.0);
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 3628800.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 362880.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 40320.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 5040.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 720.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 120.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 24.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 6.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.5));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
  return _mm512_scalef_pd(p, k);
}

double sum_exp(const float* x, int64_t n, double m) {
  const __m512d vm = _mm512_set1_pd(m);
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    a0 = _mm512_add_pd(a0, exp_pd(_mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), vm)));
    a1 = _mm512_add_pd(a1, exp_pd(_mm512_sub_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)), vm)));
  }
  for (; i < n; i += 8) {
    const int64_t k = n - i < 8 ? n - i : 8;
    const __mmask8 mk = static_cast<__mmask8>((1u << k) - 1u);
    const __m512d e = exp_pd(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(mk, x + i)), vm));
    a0 = _mm512_mask_add_pd(a0, mk, a0, e);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
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

// The float64 terms of eight floats.
template <Fn F>
inline __m512d terms8(const float* x, __mmask8 m) {
  return term<F>(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x)));
}

// Four rows at a time, summed in registers and then added to acc: a pass
// over the columns reads and writes acc once per four rows.
template <Fn F>
void col_sum(double* acc, const float* x, int64_t n, int64_t rows, int64_t ld) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* x0 = x + r * ld;
    for (int64_t i = 0; i < n; i += 8) {
      const int64_t k = n - i < 8 ? n - i : 8;
      const __mmask8 m = static_cast<__mmask8>((1u << k) - 1u);
      const __m512d s01 = _mm512_add_pd(terms8<F>(x0 + i, m), terms8<F>(x0 + ld + i, m));
      const __m512d s23 = _mm512_add_pd(terms8<F>(x0 + 2 * ld + i, m), terms8<F>(x0 + 3 * ld + i, m));
      _mm512_mask_storeu_pd(acc + i, m, _mm512_add_pd(_mm512_maskz_loadu_pd(m, acc + i), _mm512_add_pd(s01, s23)));
    }
  }
  for (; r < rows; ++r)
    for (int64_t i = 0; i < n; i += 8) {
      const int64_t k = n - i < 8 ? n - i : 8;
      const __mmask8 m = static_cast<__mmask8>((1u << k) - 1u);
      _mm512_mask_storeu_pd(acc + i, m, _mm512_add_pd(_mm512_maskz_loadu_pd(m, acc + i), terms8<F>(x + r * ld + i, m)));
    }
}

// max_pd / min_pd(v, a) return a on a tie or when a is NaN; a NaN in v is
// put in explicitly (the canonical quiet NaN, as the scalar fold gives).
template <bool kMax>
void col_extreme(double* acc, const float* x, int64_t n) {
  const __m512d qnan = _mm512_set1_pd(std::numeric_limits<double>::quiet_NaN());
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t k = n - i < 8 ? n - i : 8;
    const __mmask8 m = static_cast<__mmask8>((1u << k) - 1u);
    const __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + i)), a = _mm512_maskz_loadu_pd(m, acc + i);
    const __m512d r = kMax ? _mm512_max_pd(v, a) : _mm512_min_pd(v, a);
    _mm512_mask_storeu_pd(acc + i, m, _mm512_mask_blend_pd(_mm512_cmp_pd_mask(v, v, _CMP_UNORD_Q), r, qnan));
  }
}

}  // namespace

RowReduceF32 row_reduce_f32() {
  return {&sum_of<Fn::Id>,       &extreme<true>,       &extreme<false>,      &sum_of<Fn::Abs>,
          &sum_of<Fn::Sq>,       &sum_exp,             &col_sum<Fn::Id>,     &col_sum<Fn::Abs>,
          &col_sum<Fn::Sq>,      &col_extreme<true>,   &col_extreme<false>,  "avx512"};
}

}  // namespace avx512
}  // namespace olc_tn
