// AVX-512 float32 pooling rows (see pool_kernels.h). Tails are masked:
// nothing is read or written past n.
#include <immintrin.h>

#include <cmath>

#include "pool_kernels.h"

namespace olc_tn {
namespace avx512 {
namespace {

// fmax(a, b): max_ps returns b when either is NaN; keep a where b is NaN.
inline __m512 vfmax(__m512 a, __m512 b) {
  return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), a);
}
inline __mmask16 tail(int64_t r) { return static_cast<__mmask16>((1u << r) - 1u); }

void rows_max(float* acc, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(acc + i, vfmax(_mm512_loadu_ps(acc + i), _mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = tail(n - i);
    _mm512_mask_storeu_ps(acc + i, m, vfmax(_mm512_maskz_loadu_ps(m, acc + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}
void rows_add(float* acc, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(acc + i, _mm512_add_ps(_mm512_loadu_ps(acc + i), _mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = tail(n - i);
    _mm512_mask_storeu_ps(acc + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}
void window_max(float* t, const float* x, int64_t n, int64_t k, int64_t d) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    for (int64_t j = 1; j < k; ++j) v = vfmax(v, _mm512_loadu_ps(x + i + j * d));
    _mm512_storeu_ps(t + i, v);
  }
  if (i < n) {
    const __mmask16 m = tail(n - i);
    __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    for (int64_t j = 1; j < k; ++j) v = vfmax(v, _mm512_maskz_loadu_ps(m, x + i + j * d));
    _mm512_mask_storeu_ps(t + i, m, v);
  }
}
void window_add(float* t, const float* x, int64_t n, int64_t k, int64_t d) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    for (int64_t j = 1; j < k; ++j) v = _mm512_add_ps(v, _mm512_loadu_ps(x + i + j * d));
    _mm512_storeu_ps(t + i, v);
  }
  if (i < n) {
    const __mmask16 m = tail(n - i);
    __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    for (int64_t j = 1; j < k; ++j) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, x + i + j * d));
    _mm512_mask_storeu_ps(t + i, m, v);
  }
}
float sum(const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
  if (i < n) a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps(tail(n - i), x + i));
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}
float max(const float* x, int64_t n) {
  // Masked-off lanes load NaN, which fmax ignores.
  const __m512 nan = _mm512_set1_ps(std::nanf(""));
  __m512 m = nan;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) m = vfmax(m, _mm512_loadu_ps(x + i));
  if (i < n) m = vfmax(m, _mm512_mask_loadu_ps(nan, tail(n - i), x + i));
  alignas(64) float t[16];
  _mm512_store_ps(t, m);
  float r = t[0];
  for (int j = 1; j < 16; ++j) r = std::isnan(t[j]) ? r : (std::isnan(r) || t[j] > r) ? t[j] : r;
  return r;
}

}  // namespace

PoolRowsF32 pool_rows_f32() { return {rows_max, rows_add, window_max, window_add, sum, max, "avx512"}; }

}  // namespace avx512
}  // namespace olc_tn
