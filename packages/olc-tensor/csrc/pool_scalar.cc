// Portable float32 pooling rows (see pool_kernels.h).
#include <cmath>

#include "pool_kernels.h"

namespace olc_tn {
namespace scalar {
namespace {

inline float fmax1(float a, float b) { return std::isnan(b) ? a : (std::isnan(a) || b > a) ? b : a; }

void rows_max_n(float* dst, const float* const* rows, int64_t m, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = rows[0][i];
    for (int64_t r = 1; r < m; ++r) v = fmax1(v, rows[r][i]);
    dst[i] = v;
  }
}
void rows_add_n(float* dst, const float* const* rows, int64_t m, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = rows[0][i];
    for (int64_t r = 1; r < m; ++r) v += rows[r][i];
    dst[i] = v;
  }
}
void window_max(float* t, const float* x, int64_t n, int64_t k, int64_t d, int64_t st) {
  for (int64_t i = 0; i < n; ++i) {
    const float* p = x + i * st;
    float m = p[0];
    for (int64_t j = 1; j < k; ++j) m = fmax1(m, p[j * d]);
    t[i] = m;
  }
}
void window_add(float* t, const float* x, int64_t n, int64_t k, int64_t d, int64_t st) {
  for (int64_t i = 0; i < n; ++i) {
    const float* p = x + i * st;
    float s = p[0];
    for (int64_t j = 1; j < k; ++j) s += p[j * d];
    t[i] = s;
  }
}
void mul(float* y, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
float sum(const float* x, int64_t n) {
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i];
    s1 += x[i + 1];
    s2 += x[i + 2];
    s3 += x[i + 3];
  }
  for (; i < n; ++i) s0 += x[i];
  return (s0 + s1) + (s2 + s3);
}
float max(const float* x, int64_t n) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = fmax1(m, x[i]);
  return m;
}

void plane_sums(const float* x, int64_t n, int64_t count, float* out) {
  for (int64_t c = 0; c < count; ++c) out[c] = sum(x + c * n, n);
}
void plane_maxes(const float* x, int64_t n, int64_t count, float* out) {
  for (int64_t c = 0; c < count; ++c) out[c] = max(x + c * n, n);
}

}  // namespace

PoolRowsF32 pool_rows_f32() {
  return {rows_max_n, rows_add_n, rows_2d_of<rows_max_n>, rows_2d_of<rows_add_n>, window_max, window_add,
          mul, sum, max, plane_sums, plane_maxes, "scalar"};
}

}  // namespace scalar
}  // namespace olc_tn
