// Scalar float math for the unary kernels: the per-element twin of the
// vector math (bit-identical to a vector lane), from csrc/vmath. Every
// function is static inline (internal linkage), so TUs compiled with
// different ISA flags never share a definition.
#ifndef OLC_ELEMENTWISE_VMATH_SHIM_SCALAR_H_
#define OLC_ELEMENTWISE_VMATH_SHIM_SCALAR_H_

#include "vmath/vmath_scalar.h"

namespace olc_ew_vm {

static inline float vm_exp(float x) { return olc_s_exp(x); }
static inline float vm_expm1(float x) { return olc_s_expm1(x); }
static inline float vm_log(float x) { return olc_s_log(x); }
static inline float vm_tanh(float x) { return olc_s_tanh(x); }
static inline float vm_sigmoid(float x) { return olc_s_sigmoid(x); }
static inline float vm_erf(float x) { return olc_s_erf(x); }
static inline float vm_sin(float x) { return olc_s_sin(x); }
static inline float vm_cos(float x) { return olc_s_cos(x); }
static inline float vm_softplus(float x) { return olc_s_softplus(x); }
static inline float vm_gelu(float x) { return olc_s_gelu_erf(x); }
static inline float vm_gelu_tanh(float x) { return olc_s_gelu_tanh(x); }
static inline float vm_mish(float x) { return olc_s_mish(x); }
static inline float vm_tan(float x) { return olc_s_tan(x); }
static inline float vm_asin(float x) { return olc_s_asin(x); }
static inline float vm_acos(float x) { return olc_s_acos(x); }
static inline float vm_atan(float x) { return olc_s_atan(x); }
static inline float vm_sinh(float x) { return olc_s_sinh(x); }
static inline float vm_cosh(float x) { return olc_s_cosh(x); }
static inline float vm_asinh(float x) { return olc_s_asinh(x); }
static inline float vm_acosh(float x) { return olc_s_acosh(x); }
static inline float vm_atanh(float x) { return olc_s_atanh(x); }

}  // namespace olc_ew_vm

#endif  // OLC_ELEMENTWISE_VMATH_SHIM_SCALAR_H_
