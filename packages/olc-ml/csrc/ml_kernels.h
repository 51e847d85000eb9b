// The numeric primitives of the linear, SVM and preprocessing kernels, one
// table per ISA level (ml_scalar.cc, ml_avx2.cc, ml_avx512.cc, all built
// from ml_kernels.inc). Plain data only: safe to include from translation
// units compiled with different ISA flags. The functions only assert; the
// adapters validate shapes and attributes first.
#ifndef OLC_ML_ML_KERNELS_H_
#define OLC_ML_ML_KERNELS_H_

#include <cstdint>

namespace olc_ml {

struct MlKernels {
  const char* isa;
  // out[i * m + j] = sum_f x[i * k + f] * w[j * k + f] for rows i in [0, n)
  // and weight rows j in [0, m): X W^T, float32 accumulation.
  void (*dot)(const float* x, int64_t n, int64_t k, const float* w, int64_t m, float* out);
  // out[i * m + j] = sum_f (x[i * k + f] - w[j * k + f])^2.
  void (*sqdist)(const float* x, int64_t n, int64_t k, const float* w, int64_t m, float* out);
  // The same two over weights stored transposed, wt[f * m + j]: vectorized
  // across the weight rows (no horizontal sums), for many weight rows (an
  // SVM's support vectors).
  void (*dot_t)(const float* x, int64_t n, int64_t k, const float* wt, int64_t m, float* out);
  void (*sqdist_t)(const float* x, int64_t n, int64_t k, const float* wt, int64_t m, float* out);
  // v[i] = exp(a * v[i]) (an RBF kernel's values); results below the
  // smallest normal float are 0.
  void (*exp_scaled)(float* v, int64_t n, float a);
  // y[i] = (x[i] - offset[i % f]) * scale[i % f] over n = rows * f values.
  void (*scale)(const float* x, float* y, int64_t rows, int64_t f, const float* offset, const float* scale);
  // y[i] = x[i] > threshold ? 1 : 0 (NaN: 0).
  void (*binarize)(const float* x, float* y, int64_t n, float threshold);
};

namespace scalar { const MlKernels* kernels(); }
namespace avx2 { const MlKernels* kernels(); }
namespace avx512 { const MlKernels* kernels(); }

// The table of the highest level the CPU (and OLC_SIMD) allows.
const MlKernels* best_kernels(int32_t simd_level);

}  // namespace olc_ml

#endif  // OLC_ML_ML_KERNELS_H_
