// AVX-512 float math for the unary kernels, on __m512, from csrc/vmath.
// static inline only (internal linkage): included solely by the AVX-512 TU.
#ifndef OLC_ELEMENTWISE_VMATH_SHIM_AVX512_H_
#define OLC_ELEMENTWISE_VMATH_SHIM_AVX512_H_

#include "vmath/vmath_avx512.h"
#include "vmath_shim_scalar.h"

namespace olc_ew_vm {

static inline __m512 vm_exp(__m512 x) { return olc_v512_exp(x); }
static inline __m512 vm_expm1(__m512 x) { return olc_v512_expm1(x); }
static inline __m512 vm_log(__m512 x) { return olc_v512_log(x); }
static inline __m512 vm_tanh(__m512 x) { return olc_v512_tanh(x); }
static inline __m512 vm_sigmoid(__m512 x) { return olc_v512_sigmoid(x); }
static inline __m512 vm_erf(__m512 x) { return olc_v512_erf(x); }
static inline __m512 vm_sin(__m512 x) { return olc_v512_sin(x); }
static inline __m512 vm_cos(__m512 x) { return olc_v512_cos(x); }
static inline __m512 vm_softplus(__m512 x) { return olc_v512_softplus(x); }
static inline __m512 vm_gelu(__m512 x) { return olc_v512_gelu_erf(x); }
static inline __m512 vm_gelu_tanh(__m512 x) { return olc_v512_gelu_tanh(x); }
static inline __m512 vm_mish(__m512 x) { return olc_v512_mish(x); }
static inline __m512 vm_tan(__m512 x) { return olc_v512_tan(x); }
static inline __m512 vm_asin(__m512 x) { return olc_v512_asin(x); }
static inline __m512 vm_acos(__m512 x) { return olc_v512_acos(x); }
static inline __m512 vm_atan(__m512 x) { return olc_v512_atan(x); }
static inline __m512 vm_sinh(__m512 x) { return olc_v512_sinh(x); }
static inline __m512 vm_cosh(__m512 x) { return olc_v512_cosh(x); }
static inline __m512 vm_asinh(__m512 x) { return olc_v512_asinh(x); }
static inline __m512 vm_acosh(__m512 x) { return olc_v512_acosh(x); }
static inline __m512 vm_atanh(__m512 x) { return olc_v512_atanh(x); }
// two vectors at once, interleaved (same results as two single calls)
static inline void vm_exp2(__m512& a, __m512& b) { olc_v512x2_exp(a, b); }
static inline void vm_tanh2(__m512& a, __m512& b) { olc_v512x2_tanh(a, b); }
static inline void vm_sigmoid2(__m512& a, __m512& b) { olc_v512x2_sigmoid(a, b); }
static inline void vm_erf2(__m512& a, __m512& b) { olc_v512x2_erf(a, b); }

}  // namespace olc_ew_vm

#endif  // OLC_ELEMENTWISE_VMATH_SHIM_AVX512_H_
