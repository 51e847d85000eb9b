// Row primitives of float32 pooling (MaxPool, AveragePool, LpPool and the
// global forms): the pooling driver in pool.cc reduces a window separably,
// first whole input rows into one row buffer (rows_*), then along the
// contiguous axis with a sliding window (window_*), so every inner loop runs
// over contiguous memory. Max is NaN-ignoring (fmax: a NaN loses to any
// number; NaN only when every element is NaN). Scalar, AVX2 and AVX-512
// variants; max is exact at every level, sums may differ in their last bit
// between levels (the summation order differs).
#ifndef OLC_TENSOR_POOL_KERNELS_H_
#define OLC_TENSOR_POOL_KERNELS_H_

#include <cstdint>

namespace olc_tn {

struct PoolRowsF32 {
  void (*rows_max)(float* acc, const float* x, int64_t n);  // acc[i] = fmax(acc[i], x[i])
  void (*rows_add)(float* acc, const float* x, int64_t n);  // acc[i] += x[i]
  // t[i] = fmax / sum over j < k of x[i + j * d], for i < n.
  void (*window_max)(float* t, const float* x, int64_t n, int64_t k, int64_t d);
  void (*window_add)(float* t, const float* x, int64_t n, int64_t k, int64_t d);
  float (*sum)(const float* x, int64_t n);
  float (*max)(const float* x, int64_t n);  // n >= 1; NaN only when every x is NaN
  const char* isa;
};

namespace scalar { PoolRowsF32 pool_rows_f32(); }
namespace avx2 { PoolRowsF32 pool_rows_f32(); }
namespace avx512 { PoolRowsF32 pool_rows_f32(); }

}  // namespace olc_tn

#endif  // OLC_TENSOR_POOL_KERNELS_H_
