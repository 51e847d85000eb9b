// The tap plan of the samplers (RoiAlign, GridSample): per output point, T
// taps (an index into one input plane, -1 for a sample that reads 0, and a
// weight), in the blocked layout of sample_kernels.h. float32 plans run on
// the ISA loops; float64 ones on the portable loops here (same order).
// Compiled only into portable translation units.
#ifndef OLC_TENSOR_SAMPLE_PLAN_H_
#define OLC_TENSOR_SAMPLE_PLAN_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common.h"
#include "fp_convert.h"
#include "sample_kernels.h"

namespace olc_tn {

template <class F>
struct TapPlan {
  int64_t taps = 0, points = 0;
  std::vector<int32_t> idx;
  std::vector<F> w;

  // Room for `points` points of `taps` taps, every tap reading 0.
  void reset(int64_t n_points, int64_t n_taps) {
    points = n_points;
    taps = n_taps;
    const size_t n = static_cast<size_t>((n_points + kSampleBlock - 1) / kSampleBlock * kSampleBlock * n_taps);
    idx.assign(n, -1);
    w.assign(n, F(0));
  }
  size_t at(int64_t p, int64_t t) const {
    return static_cast<size_t>(((p / kSampleBlock) * taps + t) * kSampleBlock + p % kSampleBlock);
  }
  void set(int64_t p, int64_t t, int32_t i, F wt) {
    const size_t k = at(p, t);
    idx[k] = i;
    w[k] = wt;
  }
};

// The float64 loops, in the order of the float32 ones.
inline void taps_sum_f64(double* y, const double* x, const TapPlan<double>& plan, double divisor) {
  for (int64_t p = 0; p < plan.points; ++p) {
    double acc = 0;
    for (int64_t t = 0; t < plan.taps; ++t) {
      const size_t k = plan.at(p, t);
      const double v = plan.w[k] * (plan.idx[k] >= 0 ? x[plan.idx[k]] : 0.0);
      acc = t == 0 ? v : acc + v;
    }
    y[p] = plan.taps > 0 && divisor != 1.0 ? acc / divisor : acc;
  }
}
inline void taps_max_f64(double* y, const double* x, const TapPlan<double>& plan) {
  for (int64_t p = 0; p < plan.points; ++p) {
    double acc = 0;
    for (int64_t t = 0; t < plan.taps; ++t) {
      const size_t k = plan.at(p, t);
      const double v = plan.w[k] * (plan.idx[k] >= 0 ? x[plan.idx[k]] : 0.0);
      acc = t == 0 || std::isnan(acc) || v > acc ? v : acc;
    }
    y[p] = acc;
  }
}

// n values of a float32/float16/bfloat16 buffer as float32: the buffer
// itself for float32, else a widened copy held in *buf (split across the
// executor above `min_bytes`).
inline const float* widen_f32(olc_context* ctx, int32_t dtype, const void* src, int64_t n, std::vector<float>* buf,
                              int64_t min_bytes) {
  if (dtype == OLC_DTYPE_FLOAT) return static_cast<const float*>(src);
  buf->resize(static_cast<size_t>(n));
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = buf->data();
  const bool bf = dtype == OLC_DTYPE_BFLOAT16;
  par_for(ctx, n, 4096, n * 2, min_bytes, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) d[i] = bf ? bf16_to_f32(s[i]) : f16_to_f32(s[i]);
  });
  return d;
}

// The float32 results in src rounded once to float16/bfloat16 at dst.
inline void narrow_f32(olc_context* ctx, int32_t dtype, const float* src, void* dst, int64_t n, int64_t min_bytes) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const bool bf = dtype == OLC_DTYPE_BFLOAT16;
  par_for(ctx, n, 4096, n * 2, min_bytes, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) d[i] = bf ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
  });
}

}  // namespace olc_tn

#endif  // OLC_TENSOR_SAMPLE_PLAN_H_
