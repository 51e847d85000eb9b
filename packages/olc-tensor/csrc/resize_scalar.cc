// Portable float32 resampling passes (see resize_kernels.h).
#include "resize_kernels.h"

namespace olc_tn {
namespace scalar {
namespace {

void taps_inner(float* dst, const float* src, const int32_t* idx, const float* w, int32_t k, int64_t n_out) {
  taps_inner_from(dst, src, idx, w, k, 0, n_out);
}

void taps_blocks(float* dst, const float* src, const int32_t* lo, const int32_t*, const int32_t* rel, const float* w,
                 int32_t k, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* s = src + lo[b];
    const int32_t* rb = rel + b * k * 16;
    const float* wb = w + b * k * 16;
    for (int j = 0; j < 16; ++j) {
      float v = wb[j] * s[rb[j]];
      for (int32_t t = 1; t < k; ++t) v += wb[t * 16 + j] * s[rb[t * 16 + j]];
      dst[b * 16 + j] = v;
    }
  }
}

void combine(float* dst, const float* const* rows, const float* w, int32_t k, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float s = w[0] * rows[0][i];
    for (int32_t t = 1; t < k; ++t) s += w[t] * rows[t][i];
    dst[i] = s;
  }
}

}  // namespace

ResizeF32 resize_f32() { return {taps_inner, taps_blocks, combine, "scalar"}; }

}  // namespace scalar
}  // namespace olc_tn
