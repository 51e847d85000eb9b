// The compute side of QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear: plain functions over counts and pointers, one set
// per ISA level (quantize_scalar.cc, quantize_avx2.cc, quantize_avx512.cc),
// each built with that level's flags and entered only after the runtime
// check for it. The adapter (quantize_adapter.cc) validates shapes, types
// and attributes and turns scales and zero points into float32 first.
//
// Quantize to an integer type (every level, the same bits):
//   q = x / s                      (IEEE float32 division)
//   v = nearbyint(q) + zp          (round half to even, in float32)
//   y = clamp(v, qmin, qmax)       (NaN -> qmin, +-inf saturate)
// nearbyint(q) is an integer; adding |zp| <= 65535 is exact wherever the
// sum is in range, so the float32 sum clamps exactly as the integer would.
// Dequantize: y = (float32(x) - zp) * s, exact subtraction for 4/8/16-bit x.
//
// uint4 / int4 are held one element per byte, the value in the low nibble
// (two's complement for int4) and the high nibble zero: kernels store
// v & 0xF and read the nibble back (sign-extended for int4), ignoring the
// high nibble.
#ifndef OLC_TENSOR_QUANTIZE_KERNELS_H_
#define OLC_TENSOR_QUANTIZE_KERNELS_H_

#include <cstdint>

namespace olc_tn {

// Quantize n float32 values with one scale and zero point (uniform) or one
// per element (vector: s[i], zp[i]). dst never overlaps src.
// x and y are arrays of the kernel's input and output element types.
using QuantUniformFn = void (*)(const void* x, int64_t n, float s, float zp, void* y);
using QuantVectorFn = void (*)(const void* x, int64_t n, const float* s, const float* zp, void* y);
// Dequantize has the same two forms (y = (x - zp) * s).
using DequantUniformFn = QuantUniformFn;
using DequantVectorFn = QuantVectorFn;

// Element tags of the 4-bit types (storage: one uint8_t per element).
struct UInt4 {
  static constexpr int lo = 0, hi = 15;
};
struct Int4 {
  static constexpr int lo = -8, hi = 7;
};
// The value of one stored 4-bit element.
inline int nibble_value(UInt4, uint8_t b) { return b & 0xF; }
inline int nibble_value(Int4, uint8_t b) { return ((b & 0xF) ^ 8) - 8; }

// The integer output types with a SIMD quantize kernel, in this order.
enum QuantInt { kQU8 = 0, kQI8 = 1, kQU16 = 2, kQI16 = 3, kQU4 = 4, kQI4 = 5, kQIntCount = 6 };
// Dequantize inputs with a SIMD kernel.
enum DequantInt { kDU8 = 0, kDI8 = 1, kDU16 = 2, kDI16 = 3, kDI32 = 4, kDU4 = 5, kDI4 = 6, kDIntCount = 7 };

#define OLC_TENSOR_DECLARE_QUANT                                                 \
  QuantUniformFn quant_uniform(int which);                                       \
  QuantVectorFn quant_vector(int which);                                         \
  DequantUniformFn dequant_uniform(int which);                                   \
  DequantVectorFn dequant_vector(int which);                                     \
  /* Folds x[0..n) into *mn / *mx; NaN elements are skipped. */                  \
  void min_max(const float* x, int64_t n, float* mn, float* mx);

namespace scalar {
OLC_TENSOR_DECLARE_QUANT
// Every other combination, portable: x float32/float16/bfloat16/int32,
// division precision p (float32/float16/bfloat16: x and the quotient are
// rounded to it), y int8/uint8/int16/uint16/int4/uint4 or a float8 type (saturate
// applies to float8 only). nullptr when the combination is not handled.
QuantUniformFn quant_any_uniform(int32_t x_type, int32_t p_type, int32_t y_type, bool saturate);
QuantVectorFn quant_any_vector(int32_t x_type, int32_t p_type, int32_t y_type, bool saturate);
// x any integer or float8 type, y float32/float16/bfloat16 (computed in
// float32 and rounded once to y).
DequantUniformFn dequant_any_uniform(int32_t x_type, int32_t y_type);
DequantVectorFn dequant_any_vector(int32_t x_type, int32_t y_type);
}  // namespace scalar
namespace avx2 { OLC_TENSOR_DECLARE_QUANT }
namespace avx512 { OLC_TENSOR_DECLARE_QUANT }

#undef OLC_TENSOR_DECLARE_QUANT

}  // namespace olc_tn

#endif  // OLC_TENSOR_QUANTIZE_KERNELS_H_
