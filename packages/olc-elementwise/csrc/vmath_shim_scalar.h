// Scalar float math for the unary kernels (the per-element reference of the
// vector math). Every function is static inline: internal linkage, so TUs
// compiled with different ISA flags never share a definition.
//
// Forwards to csrc/vmath/vmath_scalar.h; the libm fallback below is used
// only when that header is absent.
#ifndef OLC_ELEMENTWISE_VMATH_SHIM_SCALAR_H_
#define OLC_ELEMENTWISE_VMATH_SHIM_SCALAR_H_

#include <cmath>

namespace olc_ew_vm {

static inline float vm_exp(float x) { return std::exp(x); }
static inline float vm_expm1(float x) { return std::expm1(x); }
static inline float vm_log(float x) { return std::log(x); }
static inline float vm_log1p(float x) { return std::log1p(x); }
static inline float vm_tanh(float x) { return std::tanh(x); }
static inline float vm_sigmoid(float x) {
  return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
}
static inline float vm_erf(float x) { return std::erf(x); }
static inline float vm_sin(float x) { return std::sin(x); }
static inline float vm_cos(float x) { return std::cos(x); }

}  // namespace olc_ew_vm

#endif  // OLC_ELEMENTWISE_VMATH_SHIM_SCALAR_H_
