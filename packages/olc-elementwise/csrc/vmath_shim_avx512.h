// AVX-512 float math for the unary kernels, on __m512. static inline only
// (internal linkage): included solely by the AVX-512 TU.
//
// Forwards to csrc/vmath/vmath_avx512.h; the lane-by-lane fallback below is
// used only when that header is absent.
#ifndef OLC_ELEMENTWISE_VMATH_SHIM_AVX512_H_
#define OLC_ELEMENTWISE_VMATH_SHIM_AVX512_H_

#include <immintrin.h>

#include "vmath_shim_scalar.h"

namespace olc_ew_vm {

template <float (*F)(float)>
static inline __m512 lanewise512(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  for (int i = 0; i < 16; ++i) t[i] = F(t[i]);
  return _mm512_load_ps(t);
}

static inline __m512 vm_exp(__m512 x) { return lanewise512<vm_exp>(x); }
static inline __m512 vm_expm1(__m512 x) { return lanewise512<vm_expm1>(x); }
static inline __m512 vm_log(__m512 x) { return lanewise512<vm_log>(x); }
static inline __m512 vm_log1p(__m512 x) { return lanewise512<vm_log1p>(x); }
static inline __m512 vm_tanh(__m512 x) { return lanewise512<vm_tanh>(x); }
static inline __m512 vm_sigmoid(__m512 x) { return lanewise512<vm_sigmoid>(x); }
static inline __m512 vm_erf(__m512 x) { return lanewise512<vm_erf>(x); }
static inline __m512 vm_sin(__m512 x) { return lanewise512<vm_sin>(x); }
static inline __m512 vm_cos(__m512 x) { return lanewise512<vm_cos>(x); }

}  // namespace olc_ew_vm

#endif  // OLC_ELEMENTWISE_VMATH_SHIM_AVX512_H_
