// Row reductions of float32 (the hot case of ReduceSum/Mean/Max/Min over a
// contiguous inner axis): sums accumulate in float64 across several
// independent accumulators; max/min propagate NaN. Scalar, AVX2 and AVX-512
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
  const char* isa;
};

namespace scalar { RowReduceF32 row_reduce_f32(); }
namespace avx2 { RowReduceF32 row_reduce_f32(); }
namespace avx512 { RowReduceF32 row_reduce_f32(); }

}  // namespace olc_tn

#endif  // OLC_TENSOR_REDUCE_KERNELS_H_
