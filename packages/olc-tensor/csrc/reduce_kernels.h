// Row reductions of float32 (the hot case of ReduceSum/Mean/Max/Min/L1/L2/
// SumSquare over a contiguous inner axis), and the column form that folds
// a row into a row of accumulators (a kept inner axis): sums (of x, |x| or x*x)
// accumulate in float64 across several independent accumulators; max/min
// propagate NaN; sum_exp feeds ReduceLogSumExp (float64 exp: the library's
// in scalar code, a degree-11 polynomial after range reduction in the SIMD
// variants, relative error below 1e-13). Scalar, AVX2 and AVX-512
// variants; the summation order differs between levels (results agree to
// float64 rounding, then round once to float32), max/min are exact.
#ifndef OLC_TENSOR_REDUCE_KERNELS_H_
#define OLC_TENSOR_REDUCE_KERNELS_H_

#include <cstdint>

namespace olc_tn {

struct RowReduceF32 {
  double (*sum)(const float* x, int64_t n);
  float (*max)(const float* x, int64_t n);  // n >= 1
  float (*min)(const float* x, int64_t n);  // n >= 1
  double (*sum_abs)(const float* x, int64_t n);  // sum of |x|
  double (*sum_sq)(const float* x, int64_t n);   // sum of x * x, each square exact in float64
  // sum of exp(x - m) in float64, for finite m >= every x (no NaN);
  // terms below exp(-700) count as that (they vanish next to the 1 of x = m).
  double (*sum_exp)(const float* x, int64_t n, double m);
  // Columns: acc[i] = acc[i] + f(x[i]) (f as above) summed over `rows`
  // rows ld floats apart (four at a time in registers before acc is read),
  // or max/min(acc[i], x[i]) of one row, where a NaN on either side gives
  // NaN and a tie keeps acc[i]; the float64 accumulators of a kept inner
  // axis, i < n.
  void (*col_sum)(double* acc, const float* x, int64_t n, int64_t rows, int64_t ld);
  void (*col_sum_abs)(double* acc, const float* x, int64_t n, int64_t rows, int64_t ld);
  void (*col_sum_sq)(double* acc, const float* x, int64_t n, int64_t rows, int64_t ld);
  void (*col_max)(double* acc, const float* x, int64_t n);
  void (*col_min)(double* acc, const float* x, int64_t n);
  const char* isa;
};

namespace scalar { RowReduceF32 row_reduce_f32(); }
namespace avx2 { RowReduceF32 row_reduce_f32(); }
namespace avx512 { RowReduceF32 row_reduce_f32(); }

}  // namespace olc_tn

#endif  // OLC_TENSOR_REDUCE_KERNELS_H_
