// The sampling loops shared by RoiAlign and GridSample, the row adds of
// Col2Im and MaxUnpool's index check. Both samplers first build a tap plan
// (see sample_plan.h): for each output point, T taps (an index into one
// input plane and a weight), the same for every channel; the per-channel
// work is then one pass of gathers over the plan:
//   taps_sum: y[p] = (sum over t < T of w[p, t] * x[idx[p, t]]) / divisor
//   taps_max: y[p] = max over t < T of w[p, t] * x[idx[p, t]] (NaN ignored;
//             NaN only when every term is NaN)
// A tap with a negative index reads 0 (a zero-padded or out-of-range
// sample); T == 0 gives 0. The plan is laid out in blocks of kSampleBlock
// points, tap-major within a block: tap t of point p sits at
//   ((p / kSampleBlock) * T + t) * kSampleBlock + p % kSampleBlock,
// and the lanes of a last, partial block hold index -1 and weight 0.
// Nothing is read from x but the taps with a non-negative index, and
// nothing is written past y[n - 1]. The sums run in the same tap order at
// every level (a multiply, then an add; no contraction), so the scalar,
// AVX2 and AVX-512 variants give the same bits.
#ifndef OLC_TENSOR_SAMPLE_KERNELS_H_
#define OLC_TENSOR_SAMPLE_KERNELS_H_

#include <cstdint>

namespace olc_tn {

constexpr int64_t kSampleBlock = 16;

struct SampleF32 {
  void (*taps_sum)(float* y, const float* x, const int32_t* idx, const float* w, int64_t taps, int64_t n,
                   float divisor);
  void (*taps_max)(float* y, const float* x, const int32_t* idx, const float* w, int64_t taps, int64_t n);
  // dst[r * dst_stride + i] += src[r * src_stride + i], i < n, r < rows
  void (*add_rows)(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t n, int64_t rows);
  // Whether every idx[i], i < n, lies in [lo, lo + span) (MaxUnpool: a
  // plane's indices within that plane)
  bool (*within)(const int64_t* idx, int64_t n, int64_t lo, int64_t span);
  const char* isa;
};

namespace scalar { SampleF32 sample_f32(); }
namespace avx2 { SampleF32 sample_f32(); }
namespace avx512 { SampleF32 sample_f32(); }

}  // namespace olc_tn

#endif  // OLC_TENSOR_SAMPLE_KERNELS_H_
