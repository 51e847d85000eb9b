// onnxruntime's score transforms (its ml_common.h), reproduced operation by
// operation in float32 so scores round as its do: shared by the tree,
// linear and SVM kernels.
#ifndef OLC_ML_TRANSFORMS_H_
#define OLC_ML_TRANSFORMS_H_

#include <cmath>
#include <cstdint>
#include <limits>

namespace olc_ml {

enum PostTransform { kNone = 0, kSoftmax = 1, kLogistic = 2, kSoftmaxZero = 3, kProbit = 4 };

inline float logistic(float v) {
  const float e = 1.0f / (1.0f + std::exp(-std::abs(v)));
  return v < 0 ? 1.0f - e : e;
}

inline float erf_inv(float x) {
  const float sgn = x < 0 ? -1.0f : 1.0f;
  x = (1 - x) * (1 + x);
  const float lg = std::log(x);
  const float v = 2 / (static_cast<float>(M_PI) * 0.147f) + 0.5f * lg;
  const float v2 = 1 / (0.147f) * lg;
  const float v3 = -v + std::sqrt(v * v - v2);
  return sgn * std::sqrt(v3);
}

inline float probit(float v) { return static_cast<float>(M_SQRT2) * erf_inv(2 * v - 1); }

// In place over one row of n >= 1 scores.
inline void softmax(float* z, int64_t n) {
  float vmax = -std::numeric_limits<float>::max();
  for (int64_t k = 0; k < n; ++k) vmax = std::max(vmax, z[k]);
  float sum = 0.f;
  for (int64_t k = 0; k < n; ++k) {
    z[k] = std::exp(z[k] - vmax);
    sum += z[k];
  }
  for (int64_t k = 0; k < n; ++k) z[k] = z[k] / sum;
}

// Softmax over the non-zero scores; a zero stays (times exp(-max)).
inline void softmax_zero(float* z, int64_t n) {
  float vmax = -std::numeric_limits<float>::max();
  for (int64_t k = 0; k < n; ++k) vmax = std::max(vmax, z[k]);
  const float exp_neg_max = std::exp(-vmax);
  float sum = 0.f;
  for (int64_t k = 0; k < n; ++k) {
    if (z[k] > 0.0000001f || z[k] < -0.0000001f) {
      z[k] = std::exp(z[k] - vmax);
      sum += z[k];
    } else {
      z[k] = z[k] * exp_neg_max;
    }
  }
  for (int64_t k = 0; k < n; ++k) z[k] = z[k] / sum;
}

// The transform of a row of n >= 2 scores, in place.
inline void transform_row(PostTransform post, float* z, int64_t n) {
  switch (post) {
    case kProbit:
      for (int64_t k = 0; k < n; ++k) z[k] = probit(z[k]);
      break;
    case kLogistic:
      for (int64_t k = 0; k < n; ++k) z[k] = logistic(z[k]);
      break;
    case kSoftmax: softmax(z, n); break;
    case kSoftmaxZero: softmax_zero(z, n); break;
    default: break;
  }
}

}  // namespace olc_ml

#endif  // OLC_ML_TRANSFORMS_H_
