// AVX2 float math for the unary kernels, on __m256. static inline only
// (internal linkage): included solely by the AVX2 TU.
//
// Forwards to csrc/vmath/vmath_avx2.h; the lane-by-lane fallback below is
// used only when that header is absent.
#ifndef OLC_ELEMENTWISE_VMATH_SHIM_AVX2_H_
#define OLC_ELEMENTWISE_VMATH_SHIM_AVX2_H_

#include <immintrin.h>

#include "vmath_shim_scalar.h"

namespace olc_ew_vm {

template <float (*F)(float)>
static inline __m256 lanewise256(__m256 v) {
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  for (int i = 0; i < 8; ++i) t[i] = F(t[i]);
  return _mm256_load_ps(t);
}

static inline __m256 vm_exp(__m256 x) { return lanewise256<vm_exp>(x); }
static inline __m256 vm_expm1(__m256 x) { return lanewise256<vm_expm1>(x); }
static inline __m256 vm_log(__m256 x) { return lanewise256<vm_log>(x); }
static inline __m256 vm_log1p(__m256 x) { return lanewise256<vm_log1p>(x); }
static inline __m256 vm_tanh(__m256 x) { return lanewise256<vm_tanh>(x); }
static inline __m256 vm_sigmoid(__m256 x) { return lanewise256<vm_sigmoid>(x); }
static inline __m256 vm_erf(__m256 x) { return lanewise256<vm_erf>(x); }
static inline __m256 vm_sin(__m256 x) { return lanewise256<vm_sin>(x); }
static inline __m256 vm_cos(__m256 x) { return lanewise256<vm_cos>(x); }

}  // namespace olc_ew_vm

#endif  // OLC_ELEMENTWISE_VMATH_SHIM_AVX2_H_
