// Row primitives of float32 pooling (MaxPool, AveragePool, LpPool and the
// global forms): the pooling driver in pool.cc reduces a window separably,
// first whole input rows into one row (rows_*_n), then along the
// contiguous axis with a sliding window (window_*), so every inner loop runs
// over contiguous memory. Max is NaN-ignoring (fmax: a NaN loses to any
// number; NaN only when every element is NaN). Scalar, AVX2 and AVX-512
// variants; max is exact at every level, sums may differ in their last bit
// between levels (the summation order differs).
#ifndef OLC_TENSOR_POOL_KERNELS_H_
#define OLC_TENSOR_POOL_KERNELS_H_

#include <cstdint>
#include <vector>

namespace olc_tn {

struct PoolRowsF32 {
  // dst[i] = fmax / sum over r < m of rows[r][i] (m >= 1), dst apart from
  // the rows (a vector level may store an element twice, the same value).
  void (*rows_max_n)(float* dst, const float* const* rows, int64_t m, int64_t n);
  void (*rows_add_n)(float* dst, const float* const* rows, int64_t m, int64_t n);
  // The same for `count` rows at once, row r from m rows at a fixed pitch:
  // dst[r * n + i] = fmax / sum over j < m of src[r * step + j * pitch + i]
  // (the strided output rows of a 2-D window, in one call).
  void (*rows_max_2d)(float* dst, const float* src, int64_t m, int64_t pitch, int64_t n, int64_t count, int64_t step);
  void (*rows_add_2d)(float* dst, const float* src, int64_t m, int64_t pitch, int64_t n, int64_t count, int64_t step);
  // t[i] = fmax / sum over j < k of x[i * s + j * d], for i < n, t apart
  // from x; reads nothing past x[(n - 1) * s + (k - 1) * d]. Vector paths
  // for s = 1 and s = 2 (deinterleaved), at AVX2 s = 4 (in-lane 4 x 4
  // transposes), masked gathers for other strides (AVX2 and AVX-512); the
  // same tap order at every level.
  void (*window_max)(float* t, const float* x, int64_t n, int64_t k, int64_t d, int64_t s);
  void (*window_add)(float* t, const float* x, int64_t n, int64_t k, int64_t d, int64_t s);
  void (*mul)(float* y, const float* a, const float* b, int64_t n);  // y[i] = a[i] * b[i]
  float (*sum)(const float* x, int64_t n);
  float (*max)(const float* x, int64_t n);  // n >= 1; NaN only when every x is NaN
  // out[c] = sum / max of x[c * n, c * n + n) for c < count (the global
  // pools: several planes in flight at once).
  void (*plane_sums)(const float* x, int64_t n, int64_t count, float* out);
  void (*plane_maxes)(const float* x, int64_t n, int64_t count, float* out);
  const char* isa;
};

// rows_*_2d from an ISA's rows_*_n (included by each ISA file, so the row
// function is inlined into the loop).
template <void (*RowsN)(float*, const float* const*, int64_t, int64_t)>
void rows_2d_of(float* dst, const float* src, int64_t m, int64_t pitch, int64_t n, int64_t count, int64_t step) {
  const float* small[16];
  std::vector<const float*> big(m > 16 ? static_cast<size_t>(m) : 0);
  const float** p = m > 16 ? big.data() : small;
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t j = 0; j < m; ++j) p[j] = src + r * step + j * pitch;
    RowsN(dst + r * n, p, m, n);
  }
}

namespace scalar { PoolRowsF32 pool_rows_f32(); }
namespace avx2 { PoolRowsF32 pool_rows_f32(); }
namespace avx512 { PoolRowsF32 pool_rows_f32(); }

}  // namespace olc_tn

#endif  // OLC_TENSOR_POOL_KERNELS_H_
