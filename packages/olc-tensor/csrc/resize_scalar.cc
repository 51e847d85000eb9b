// Portable float32 resampling passes (see resize_kernels.h).
#include "resize_kernels.h"

namespace olc_tn {
namespace scalar {
namespace {

void taps_inner(float* dst, const float* src, const int32_t* idx, const float* w, int32_t k, int64_t n_out) {
  for (int64_t o = 0; o < n_out; ++o) {
    const int32_t* ix = idx + o * k;
    const float* wo = w + o * k;
    float s = wo[0] * src[ix[0]];
    for (int32_t t = 1; t < k; ++t) s += wo[t] * src[ix[t]];
    dst[o] = s;
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

ResizeF32 resize_f32() { return {taps_inner, combine, "scalar"}; }

}  // namespace scalar
}  // namespace olc_tn
