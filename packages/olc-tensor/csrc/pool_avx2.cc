// AVX2 float32 pooling rows (see pool_kernels.h). Nothing is read or
// written past n: a row of a vector or more ends with one more whole
// vector ending at n (its first lanes stored twice, the same values: the
// destination is apart from the sources), a shorter row runs through
// masked loads and olc/avx2_tail.h's partial stores (not vmaskmovps, whose
// store form is microcoded on AMD Zen).
#include <immintrin.h>

#include <cmath>

#include "olc/avx2_tail.h"
#include "pool_kernels.h"

namespace olc_tn {
namespace avx2 {
namespace {

inline float fmax1(float a, float b) { return std::isnan(b) ? a : (std::isnan(a) || b > a) ? b : a; }

// fmax(a, b): max_ps returns its second operand when either is NaN, so a
// NaN b is replaced by a.
inline __m256 vfmax(__m256 a, __m256 b) {
  return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
}

template <bool Max>
void rows_n(float* dst, const float* const* rows, int64_t m, int64_t n);
void rows_max_n(float* dst, const float* const* rows, int64_t m, int64_t n) { rows_n<true>(dst, rows, m, n); }
void rows_add_n(float* dst, const float* const* rows, int64_t m, int64_t n) { rows_n<false>(dst, rows, m, n); }

// Lanes i*2 + j*d of x for 8 outputs: even elements of x[0..15].
inline __m256 even8(const float* x) {
  const __m256i idx = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256 a = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x), idx);
  const __m256 b = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + 8), idx);
  return _mm256_permute2f128_ps(a, b, 0x20);
}

template <bool Max>
inline __m256 op(__m256 a, __m256 b) {
  if constexpr (Max) return vfmax(a, b);
  else return _mm256_add_ps(a, b);
}
template <bool Max>
inline float op1(float a, float b) {
  if constexpr (Max) return fmax1(a, b);
  else return a + b;
}

// Column j of the 8 x 4 matrix q[0..32) (rows of 4) into c[j], its rows
// in the order 0, 2, 4, 6, 1, 3, 5, 7 (each 128-bit lane transposed as
// a 4 x 4 block).
inline void columns4(const float* q, __m256* c) {
  const __m256 v0 = _mm256_loadu_ps(q), v1 = _mm256_loadu_ps(q + 8);
  const __m256 v2 = _mm256_loadu_ps(q + 16), v3 = _mm256_loadu_ps(q + 24);
  const __m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
  const __m256 t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
  c[0] = _mm256_shuffle_ps(t0, t2, 0x44);
  c[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
  c[2] = _mm256_shuffle_ps(t1, t3, 0x44);
  c[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

template <bool Max>
void window(float* t, const float* x, int64_t n, int64_t k, int64_t d, int64_t st) {
  int64_t i = 0;
  if (st == 1) {
    const auto whole = [&](int64_t at) {
      __m256 m = _mm256_loadu_ps(x + at);
      for (int64_t j = 1; j < k; ++j) m = op<Max>(m, _mm256_loadu_ps(x + at + j * d));
      _mm256_storeu_ps(t + at, m);
    };
    for (; i + 8 <= n; i += 8) whole(i);
    if (i < n && n >= 8) {
      whole(n - 8);
    } else if (i < n) {
      const __m256i mk = olc::avx2::first_lanes(n - i);
      __m256 m = _mm256_maskload_ps(x + i, mk);
      for (int64_t j = 1; j < k; ++j) m = op<Max>(m, _mm256_maskload_ps(x + i + j * d, mk));
      olc::avx2::store_first(t + i, m, n - i);
    }
    return;
  }
  if (st == 2) {
    // The pair of loads reaches x[2 * i + 15 + j * d]: full blocks while that
    // stays within the last element read, x[2 * (n - 1) + (k - 1) * d].
    for (; i + 8 < n; i += 8) {
      __m256 m = even8(x + 2 * i);
      for (int64_t j = 1; j < k; ++j) m = op<Max>(m, even8(x + 2 * i + j * d));
      _mm256_storeu_ps(t + i, m);
    }
  }
  if (st == 4) {
    // Stride 4 (1-D audio pools of 4 at stride 4): the 32 values under 8
    // outputs as four loads and one in-lane 4x4 transpose give tap offsets
    // o .. o + 3 (mod 4) of all 8 at once; AVX2 gathers cost several
    // cycles per element on AMD Zen (a fifth of an M5-style audio stack's
    // time was its pools' gathers). The loads of 8 outputs reach 3 values
    // past the last one's window: whole blocks while another output
    // follows.
    for (; i + 8 < n; i += 8) {
      const float* p = x + 4 * i;
      __m256 c[4], m = _mm256_setzero_ps();
      int64_t group = -1;  // the 4-aligned offset whose columns c holds
      for (int64_t j = 0; j < k; ++j) {
        const int64_t o = j * d;
        if (o / 4 != group) {
          group = o / 4;
          columns4(p + 4 * group, c);
        }
        m = j == 0 ? c[o % 4] : op<Max>(m, c[o % 4]);
      }
      // The columns hold outputs 0, 2, 4, 6, 1, 3, 5, 7.
      _mm256_storeu_ps(t + i, _mm256_permutevar8x32_ps(m, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
  }
  if (st > 2 && (n - 1) * st + (k - 1) * d < (int64_t{1} << 31)) {
    // Other strides past 2 (and stride 4's last outputs): tap j of 8
    // outputs is one gather; a row shorter than 8 has its gathers masked.
    const __m256i lane = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32(static_cast<int>(st)));
    for (; i < n; i += 8) {
      if (i + 8 > n && n >= 8) i = n - 8;
      const __m256i mk = olc::avx2::first_lanes(n - i);
      const float* p = x + i * st;
      __m256 m = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), p, lane, _mm256_castsi256_ps(mk), 4);
      for (int64_t j = 1; j < k; ++j)
        m = op<Max>(m, _mm256_mask_i32gather_ps(_mm256_setzero_ps(), p + j * d, lane, _mm256_castsi256_ps(mk), 4));
      if (i + 8 <= n) _mm256_storeu_ps(t + i, m);
      else olc::avx2::store_first(t + i, m, n - i);
    }
  }
  for (; i < n; ++i) {
    const float* p = x + i * st;
    float m = p[0];
    for (int64_t j = 1; j < k; ++j) m = op1<Max>(m, p[j * d]);
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
  for (; i + 16 <= n; i += 16) {
    __m256 a = op<Max>(_mm256_loadu_ps(r0 + i), _mm256_loadu_ps(r1 + i));
    __m256 b = op<Max>(_mm256_loadu_ps(r0 + i + 8), _mm256_loadu_ps(r1 + i + 8));
    if constexpr (M == 3) {
      a = op<Max>(a, _mm256_loadu_ps(r2 + i));
      b = op<Max>(b, _mm256_loadu_ps(r2 + i + 8));
    }
    _mm256_storeu_ps(dst + i, a);
    _mm256_storeu_ps(dst + i + 8, b);
  }
  return i;
}

template <bool Max>
void rows_n(float* dst, const float* const* rows, int64_t m, int64_t n) {
  int64_t i = 0;
  if (m == 2) i = rows_fixed<Max, 2>(dst, rows, n);
  else if (m == 3) i = rows_fixed<Max, 3>(dst, rows, n);
  const auto whole = [&](int64_t at) {
    __m256 v = _mm256_loadu_ps(rows[0] + at);
    for (int64_t r = 1; r < m; ++r) v = op<Max>(v, _mm256_loadu_ps(rows[r] + at));
    _mm256_storeu_ps(dst + at, v);
  };
  for (; i + 8 <= n; i += 8) whole(i);
  if (i < n && n >= 8) {
    whole(n - 8);
  } else if (i < n) {
    const __m256i mk = olc::avx2::first_lanes(n - i);
    __m256 v = _mm256_maskload_ps(rows[0] + i, mk);
    for (int64_t r = 1; r < m; ++r) v = op<Max>(v, _mm256_maskload_ps(rows[r] + i, mk));
    olc::avx2::store_first(dst + i, v, n - i);
  }
}
void window_max(float* t, const float* x, int64_t n, int64_t k, int64_t d, int64_t st) { window<true>(t, x, n, k, d, st); }
void window_add(float* t, const float* x, int64_t n, int64_t k, int64_t d, int64_t st) { window<false>(t, x, n, k, d, st); }
void mul(float* y, const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) y[i] = a[i] * b[i];
}
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
float sum(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
  if (i < n) a1 = _mm256_add_ps(a1, _mm256_maskload_ps(x + i, olc::avx2::first_lanes(n - i)));
  return hsum(_mm256_add_ps(a0, a1));
}
float max(const float* x, int64_t n) {
  if (n < 8) {
    float m = x[0];
    for (int64_t i = 1; i < n; ++i) m = fmax1(m, x[i]);
    return m;
  }
  __m256 m = _mm256_loadu_ps(x);
  int64_t i = 8;
  for (; i + 8 <= n; i += 8) m = vfmax(m, _mm256_loadu_ps(x + i));
  // The last 8 elements overlap the ones already seen: max is idempotent.
  if (i < n) m = vfmax(m, _mm256_loadu_ps(x + n - 8));
  alignas(32) float t[8];
  _mm256_store_ps(t, m);
  float r = t[0];
  for (int j = 1; j < 8; ++j) r = fmax1(r, t[j]);
  return r;
}

// Four planes in flight: independent accumulator chains hide the add latency.
void plane_sums(const float* x, int64_t n, int64_t count, float* out) {
  int64_t c = 0;
  if (n >= 8) {
    const __m256i mk = olc::avx2::first_lanes(n % 8);
    const int64_t full = n - n % 8;
    for (; c + 4 <= count; c += 4) {
      const float* p0 = x + c * n;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t i = 0; i < full; i += 8) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p0 + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p0 + n + i));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p0 + 2 * n + i));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p0 + 3 * n + i));
      }
      if (full < n) {
        a0 = _mm256_add_ps(a0, _mm256_maskload_ps(p0 + full, mk));
        a1 = _mm256_add_ps(a1, _mm256_maskload_ps(p0 + n + full, mk));
        a2 = _mm256_add_ps(a2, _mm256_maskload_ps(p0 + 2 * n + full, mk));
        a3 = _mm256_add_ps(a3, _mm256_maskload_ps(p0 + 3 * n + full, mk));
      }
      out[c] = hsum(a0);
      out[c + 1] = hsum(a1);
      out[c + 2] = hsum(a2);
      out[c + 3] = hsum(a3);
    }
  }
  for (; c < count; ++c) out[c] = sum(x + c * n, n);
}
void plane_maxes(const float* x, int64_t n, int64_t count, float* out) {
  for (int64_t c = 0; c < count; ++c) out[c] = max(x + c * n, n);
}

}  // namespace

PoolRowsF32 pool_rows_f32() {
  return {rows_max_n, rows_add_n, rows_2d_of<rows_max_n>, rows_2d_of<rows_add_n>, window_max, window_add,
          mul, sum, max, plane_sums, plane_maxes, "avx2"};
}

}  // namespace avx2
}  // namespace olc_tn
