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

template <bool Max>
inline __m512 op(__m512 a, __m512 b) {
  if constexpr (Max) return vfmax(a, b);
  else return _mm512_add_ps(a, b);
}
inline float fmax1(float a, float b) { return std::isnan(b) ? a : (std::isnan(a) || b > a) ? b : a; }

// Even elements of x[0..31] (lanes beyond `valid` elements not loaded).
inline __m512 even16(const float* x, __mmask16 m0, __mmask16 m1) {
  const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(m0, x), ev, _mm512_maskz_loadu_ps(m1, x + 16));
}

template <bool Max>
void window(float* t, const float* x, int64_t n, int64_t k, int64_t d, int64_t st) {
  int64_t i = 0;
  if (st == 1) {
    for (; i + 16 <= n; i += 16) {
      __m512 v = _mm512_loadu_ps(x + i);
      for (int64_t j = 1; j < k; ++j) v = op<Max>(v, _mm512_loadu_ps(x + i + j * d));
      _mm512_storeu_ps(t + i, v);
    }
    if (i < n) {
      const __mmask16 m = tail(n - i);
      __m512 v = _mm512_maskz_loadu_ps(m, x + i);
      for (int64_t j = 1; j < k; ++j) v = op<Max>(v, _mm512_maskz_loadu_ps(m, x + i + j * d));
      _mm512_mask_storeu_ps(t + i, m, v);
    }
    return;
  }
  if (st == 2) {
    for (; i + 16 <= n; i += 16) {
      // Elements 2 * i .. 2 * i + 30 (+ j * d) are read: 31 of the 32.
      const __mmask16 all = 0xFFFF, m1 = 0x7FFF;
      __m512 v = even16(x + 2 * i, all, m1);
      for (int64_t j = 1; j < k; ++j) v = op<Max>(v, even16(x + 2 * i + j * d, all, m1));
      _mm512_storeu_ps(t + i, v);
    }
    if (i < n) {
      const int64_t r = n - i, e = 2 * r - 1;  // elements read per tap
      const __mmask16 m0 = tail(e < 16 ? e : 16), m1 = tail(e > 16 ? e - 16 : 0);
      __m512 v = even16(x + 2 * i, m0, m1);
      for (int64_t j = 1; j < k; ++j) v = op<Max>(v, even16(x + 2 * i + j * d, m0, m1));
      _mm512_mask_storeu_ps(t + i, tail(r), v);
    }
    return;
  }
  if (st == 4) {
    // Stride 4 (the audio stacks' pools of 4): tap j of 16 outputs is every
    // fourth of the 61 elements from x + 16 * 4 * b + j * d, picked from
    // four loads (the last one masked to what is read) by permutes.
    const __m512i every4 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const auto tap = [&](const float* p) {
      const __m512 lo = _mm512_permutex2var_ps(_mm512_loadu_ps(p), every4, _mm512_loadu_ps(p + 16));
      const __m512 hi = _mm512_permutex2var_ps(_mm512_loadu_ps(p + 32), every4, _mm512_maskz_loadu_ps(0x1FFF, p + 48));
      return _mm512_shuffle_f32x4(lo, hi, 0x44);  // lanes 0-7 of lo, then lanes 0-7 of hi
    };
    for (; i + 16 <= n; i += 16) {
      const float* p = x + 4 * i;
      __m512 v = tap(p);
      for (int64_t j = 1; j < k; ++j) v = op<Max>(v, tap(p + j * d));
      _mm512_storeu_ps(t + i, v);
    }
  }
  if ((n - 1) * st + (k - 1) * d < (int64_t{1} << 31)) {
    // Larger strides (1-D audio pools of 4 at stride 4): tap j of 16 outputs
    // is one gather; the tail's gathers are masked.
    const __m512i lane = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(static_cast<int>(st)));
    for (; i < n; i += 16) {
      const __mmask16 mk = n - i >= 16 ? __mmask16(0xFFFF) : tail(n - i);
      const float* p = x + i * st;
      __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, lane, p, 4);
      for (int64_t j = 1; j < k; ++j) v = op<Max>(v, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, lane, p + j * d, 4));
      _mm512_mask_storeu_ps(t + i, mk, v);
    }
    return;
  }
  for (; i < n; ++i) {
    const float* p = x + i * st;
    float m = p[0];
    for (int64_t j = 1; j < k; ++j) m = Max ? fmax1(m, p[j * d]) : m + p[j * d];
    t[i] = m;
  }
}
// Two or three rows (the common 2x2 / 3x3 windows): the row pointers in
// registers and two vectors per step.
template <bool Max, int M>
int64_t rows_fixed(float* dst, const float* const* rows, int64_t n) {
  const float* r0 = rows[0];
  const float* r1 = rows[1];
  const float* r2 = M == 3 ? rows[2] : rows[1];
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 a = op<Max>(_mm512_loadu_ps(r0 + i), _mm512_loadu_ps(r1 + i));
    __m512 b = op<Max>(_mm512_loadu_ps(r0 + i + 16), _mm512_loadu_ps(r1 + i + 16));
    if constexpr (M == 3) {
      a = op<Max>(a, _mm512_loadu_ps(r2 + i));
      b = op<Max>(b, _mm512_loadu_ps(r2 + i + 16));
    }
    _mm512_storeu_ps(dst + i, a);
    _mm512_storeu_ps(dst + i + 16, b);
  }
  return i;
}

template <bool Max>
void rows_n(float* dst, const float* const* rows, int64_t m, int64_t n) {
  int64_t i = 0;
  if (m == 2) i = rows_fixed<Max, 2>(dst, rows, n);
  else if (m == 3) i = rows_fixed<Max, 3>(dst, rows, n);
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(rows[0] + i);
    for (int64_t r = 1; r < m; ++r) v = op<Max>(v, _mm512_loadu_ps(rows[r] + i));
    _mm512_storeu_ps(dst + i, v);
  }
  if (i < n) {
    const __mmask16 mk = tail(n - i);
    __m512 v = _mm512_maskz_loadu_ps(mk, rows[0] + i);
    for (int64_t r = 1; r < m; ++r) v = op<Max>(v, _mm512_maskz_loadu_ps(mk, rows[r] + i));
    _mm512_mask_storeu_ps(dst + i, mk, v);
  }
}
// Short rows (the 16- and 32-wide planes of small feature maps): one or two
// masked vectors per row, no per-row pointer table.
template <bool Max>
void rows_2d(float* dst, const float* src, int64_t m, int64_t pitch, int64_t n, int64_t count, int64_t step) {
  if (n > 32) {
    if constexpr (Max) rows_2d_of<rows_n<true>>(dst, src, m, pitch, n, count, step);
    else rows_2d_of<rows_n<false>>(dst, src, m, pitch, n, count, step);
    return;
  }
  const __mmask16 k0 = tail(n < 16 ? n : 16), k1 = tail(n > 16 ? n - 16 : 0);
  for (int64_t r = 0; r < count; ++r) {
    const float* p = src + r * step;
    __m512 a = _mm512_maskz_loadu_ps(k0, p), b = _mm512_maskz_loadu_ps(k1, p + 16);
    for (int64_t j = 1; j < m; ++j) {
      a = op<Max>(a, _mm512_maskz_loadu_ps(k0, p + j * pitch));
      b = op<Max>(b, _mm512_maskz_loadu_ps(k1, p + j * pitch + 16));
    }
    _mm512_mask_storeu_ps(dst + r * n, k0, a);
    _mm512_mask_storeu_ps(dst + r * n + 16, k1, b);
  }
}
void rows_max_n(float* dst, const float* const* rows, int64_t m, int64_t n) { rows_n<true>(dst, rows, m, n); }
void rows_add_n(float* dst, const float* const* rows, int64_t m, int64_t n) { rows_n<false>(dst, rows, m, n); }
void window_max(float* t, const float* x, int64_t n, int64_t k, int64_t d, int64_t st) { window<true>(t, x, n, k, d, st); }
void window_add(float* t, const float* x, int64_t n, int64_t k, int64_t d, int64_t st) { window<false>(t, x, n, k, d, st); }
void mul(float* y, const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  if (i < n) {
    const __mmask16 m = tail(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
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

// Four planes in flight: independent accumulator chains hide the add latency.
void plane_sums(const float* x, int64_t n, int64_t count, float* out) {
  int64_t c = 0;
  const __mmask16 mk = tail(n % 16);
  const int64_t full = n - n % 16;
  for (; c + 4 <= count; c += 4) {
    const float* p0 = x + c * n;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < full; i += 16) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p0 + i));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p0 + n + i));
      a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p0 + 2 * n + i));
      a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p0 + 3 * n + i));
    }
    if (full < n) {
      a0 = _mm512_add_ps(a0, _mm512_maskz_loadu_ps(mk, p0 + full));
      a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps(mk, p0 + n + full));
      a2 = _mm512_add_ps(a2, _mm512_maskz_loadu_ps(mk, p0 + 2 * n + full));
      a3 = _mm512_add_ps(a3, _mm512_maskz_loadu_ps(mk, p0 + 3 * n + full));
    }
    out[c] = _mm512_reduce_add_ps(a0);
    out[c + 1] = _mm512_reduce_add_ps(a1);
    out[c + 2] = _mm512_reduce_add_ps(a2);
    out[c + 3] = _mm512_reduce_add_ps(a3);
  }
  for (; c < count; ++c) out[c] = sum(x + c * n, n);
}
void plane_maxes(const float* x, int64_t n, int64_t count, float* out) {
  for (int64_t c = 0; c < count; ++c) out[c] = max(x + c * n, n);
}

}  // namespace

PoolRowsF32 pool_rows_f32() {
  return {rows_max_n, rows_add_n, rows_2d<true>, rows_2d<false>, window_max, window_add,
          mul, sum, max, plane_sums, plane_maxes, "avx512"};
}

}  // namespace avx512
}  // namespace olc_tn
