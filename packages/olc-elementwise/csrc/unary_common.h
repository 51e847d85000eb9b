// Shared declarations of the unary family: op list, parameters, compute
// function type and the per-ISA selectors. Plain data only, so this header
// is safe to include from TUs compiled with different ISA flags.
#ifndef OLC_ELEMENTWISE_UNARY_COMMON_H_
#define OLC_ELEMENTWISE_UNARY_COMMON_H_

#include <cstdint>

namespace olc_ew {

// GeluTanh is Gelu with approximate="tanh": a separate compute function.
#define OLC_EW_UNARY_OPS(X)                                                    \
  X(Abs) X(Neg) X(Exp) X(Log) X(Sqrt) X(Reciprocal) X(Sigmoid) X(HardSigmoid) \
  X(Tanh) X(Relu) X(LeakyRelu) X(Elu) X(Selu) X(Softplus) X(Gelu) X(GeluTanh) \
  X(Erf) X(Floor) X(Ceil) X(Round) X(Sign) X(Sin) X(Cos) X(IsNaN) X(IsInf)    \
  X(Not) X(HardSwish) X(Mish) X(Softsign) X(Celu) X(ThresholdedRelu) X(Shrink) \
  X(Tan) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) X(Asinh) X(Acosh) X(Atanh)   \
  X(BitwiseNot)

enum class Op : int {
#define OLC_EW_ENUM(name) name,
  OLC_EW_UNARY_OPS(OLC_EW_ENUM)
#undef OLC_EW_ENUM
  kCount
};

// Attribute values resolved by the adapter. Float attributes are kept both
// as float (float/float16/bfloat16 compute in f32) and as double (float64).
// Shrink's lambd and bias travel in alpha and beta.
struct UnaryParams {
  float alpha = 0.f, beta = 0.f, gamma = 0.f;
  double alpha_d = 0.0, beta_d = 0.0, gamma_d = 0.0;
  bool detect_positive = true, detect_negative = true;
  // Use non-temporal stores (only honoured when the output is 64-byte aligned).
  bool stream = false;
};

// y[i] = op(x[i]) for i in [0, n). x and y are either the same pointer or
// do not overlap. Compute functions only assert; the adapter validates.
using UnaryFn = void (*)(const void* x, void* y, int64_t n, const UnaryParams* p);

// Each returns nullptr when that ISA level has no variant for (op, dtype);
// the adapter then tries the next lower level. The scalar level covers
// every supported (op, dtype) pair, so it also defines what is supported.
namespace scalar { UnaryFn select(Op op, int32_t dtype); }
namespace avx2 { UnaryFn select(Op op, int32_t dtype); }
namespace avx512 { UnaryFn select(Op op, int32_t dtype); }

}  // namespace olc_ew

#endif  // OLC_ELEMENTWISE_UNARY_COMMON_H_
