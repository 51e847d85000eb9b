// AVX2 float math for the unary kernels, on __m256, from csrc/vmath.
// static inline only (internal linkage): included solely by the AVX2 TU.
#ifndef OLC_ELEMENTWISE_VMATH_SHIM_AVX2_H_
#define OLC_ELEMENTWISE_VMATH_SHIM_AVX2_H_

#include "vmath/vmath_avx2.h"
#include "vmath_shim_scalar.h"

namespace olc_ew_vm {

static inline __m256 vm_exp(__m256 x) { return olc_v256_exp(x); }
static inline __m256 vm_expm1(__m256 x) { return olc_v256_expm1(x); }
static inline __m256 vm_log(__m256 x) { return olc_v256_log(x); }
static inline __m256 vm_tanh(__m256 x) { return olc_v256_tanh(x); }
static inline __m256 vm_sigmoid(__m256 x) { return olc_v256_sigmoid(x); }
static inline __m256 vm_erf(__m256 x) { return olc_v256_erf(x); }
static inline __m256 vm_sin(__m256 x) { return olc_v256_sin(x); }
static inline __m256 vm_cos(__m256 x) { return olc_v256_cos(x); }
static inline __m256 vm_softplus(__m256 x) { return olc_v256_softplus(x); }
static inline __m256 vm_gelu(__m256 x) { return olc_v256_gelu_erf(x); }
static inline __m256 vm_gelu_tanh(__m256 x) { return olc_v256_gelu_tanh(x); }
static inline __m256 vm_mish(__m256 x) { return olc_v256_mish(x); }
static inline __m256 vm_tan(__m256 x) { return olc_v256_tan(x); }
static inline __m256 vm_asin(__m256 x) { return olc_v256_asin(x); }
static inline __m256 vm_acos(__m256 x) { return olc_v256_acos(x); }
static inline __m256 vm_atan(__m256 x) { return olc_v256_atan(x); }
static inline __m256 vm_sinh(__m256 x) { return olc_v256_sinh(x); }
static inline __m256 vm_cosh(__m256 x) { return olc_v256_cosh(x); }
static inline __m256 vm_asinh(__m256 x) { return olc_v256_asinh(x); }
static inline __m256 vm_acosh(__m256 x) { return olc_v256_acosh(x); }
static inline __m256 vm_atanh(__m256 x) { return olc_v256_atanh(x); }

// Two vectors per call, interleaved (olc_v256x2_*): same bits as two calls.
static inline void vm_exp_x2(__m256* a, __m256* b) { olc_v256x2_exp(a, b); }
static inline void vm_log_x2(__m256* a, __m256* b) { olc_v256x2_log(a, b); }
static inline void vm_tanh_x2(__m256* a, __m256* b) { olc_v256x2_tanh(a, b); }
static inline void vm_sigmoid_x2(__m256* a, __m256* b) { olc_v256x2_sigmoid(a, b); }
static inline void vm_erf_x2(__m256* a, __m256* b) { olc_v256x2_erf(a, b); }
static inline void vm_asin_x2(__m256* a, __m256* b) { olc_v256x2_asin(a, b); }
static inline void vm_acos_x2(__m256* a, __m256* b) { olc_v256x2_acos(a, b); }
static inline void vm_atan_x2(__m256* a, __m256* b) { olc_v256x2_atan(a, b); }

}  // namespace olc_ew_vm

#endif  // OLC_ELEMENTWISE_VMATH_SHIM_AVX2_H_
