// Portable quantize / dequantize loops: the scalar level of the fast
// float32 <-> 4/8/16-bit kernels (the reference the SIMD levels match bit for
// bit) and every other type combination (float16/bfloat16/int32 inputs,
// float16/bfloat16 division precision, float8 outputs, float16/bfloat16
// dequantize outputs).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "fp8_convert.h"
#include "fp_convert.h"
#include "olc/kernel_abi.h"
#include "quantize_kernels.h"

namespace olc_tn {
namespace scalar {
namespace {

// Element tags for the 2-byte float types (they are stored as uint16_t).
struct F16 {};
struct BF16 {};
template <int32_t Code>
struct F8 {};

template <class T>
struct Storage {
  using type = T;
};
template <>
struct Storage<F16> {
  using type = uint16_t;
};
template <>
struct Storage<BF16> {
  using type = uint16_t;
};
template <int32_t Code>
struct Storage<F8<Code>> {
  using type = uint8_t;
};
template <>
struct Storage<UInt4> {
  using type = uint8_t;
};
template <>
struct Storage<Int4> {
  using type = uint8_t;
};

template <class T>
struct IsNibble : std::false_type {};
template <>
struct IsNibble<UInt4> : std::true_type {};
template <>
struct IsNibble<Int4> : std::true_type {};

template <class T>
struct IsF8 : std::false_type {};
template <int32_t Code>
struct IsF8<F8<Code>> : std::true_type {
  static constexpr int32_t code = Code;
};

// The float32 value of one stored element.
template <class T>
inline float to_f32(typename Storage<T>::type v) {
  if constexpr (std::is_same<T, F16>::value) return olc_tn::f16_to_f32(v);
  else if constexpr (std::is_same<T, BF16>::value) return olc_tn::bf16_to_f32(v);
  else if constexpr (IsF8<T>::value) return f8_table<IsF8<T>::code>()[v];
  else if constexpr (IsNibble<T>::value) return static_cast<float>(nibble_value(T{}, v));
  else return static_cast<float>(v);
}

// v rounded to precision P (float32: unchanged), back as float32.
template <class P>
inline float round_to(float v) {
  if constexpr (std::is_same<P, F16>::value) return olc_tn::f16_to_f32(olc_tn::f32_to_f16(v));
  else if constexpr (std::is_same<P, BF16>::value) return olc_tn::bf16_to_f32(olc_tn::f32_to_bf16(v));
  else return v;
}

// The integer rule of quantize_kernels.h. Every comparison is false for
// NaN, which therefore ends at qmin; no conversion sees an out-of-range value.
template <class Y>
inline Y quant_int_std(float q, float zp) {
  constexpr float lo = static_cast<float>(std::numeric_limits<Y>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<Y>::max());
  const float v = std::nearbyint(q) + zp;
  if (!(v > lo)) return std::numeric_limits<Y>::min();
  if (v > hi) return std::numeric_limits<Y>::max();
  return static_cast<Y>(static_cast<int32_t>(v));
}

// 4-bit outputs: the same rule against [-8, 7] / [0, 15], stored v & 0xF.
template <class Y>
inline typename Storage<Y>::type quant_int(float q, float zp) {
  if constexpr (IsNibble<Y>::value) {
    const float v = std::nearbyint(q) + zp;
    const int r = !(v > static_cast<float>(Y::lo)) ? Y::lo : v > static_cast<float>(Y::hi) ? Y::hi : static_cast<int>(v);
    return static_cast<uint8_t>(r & 0xF);
  } else {
    return quant_int_std<Y>(q, zp);
  }
}

template <class Y, bool Saturate>
inline typename Storage<Y>::type quant_one(float q, float zp) {
  if constexpr (IsF8<Y>::value) {
    // A zero zero point is not added: it would turn -0 into +0.
    const float v = zp != 0.0f ? q + zp : q;
    return f64_to_f8<IsF8<Y>::code, Saturate>(static_cast<double>(v));
  } else {
    return quant_int<Y>(q, zp);
  }
}

template <class X, class P, class Y, bool Saturate>
void quant_u(const void* xv, int64_t n, float s, float zp, void* yv) {
  const auto* x = static_cast<const typename Storage<X>::type*>(xv);
  auto* y = static_cast<typename Storage<Y>::type*>(yv);
  for (int64_t i = 0; i < n; ++i)
    y[i] = quant_one<Y, Saturate>(round_to<P>(round_to<P>(to_f32<X>(x[i])) / s), zp);
}

template <class X, class P, class Y, bool Saturate>
void quant_v(const void* xv, int64_t n, const float* s, const float* zp, void* yv) {
  const auto* x = static_cast<const typename Storage<X>::type*>(xv);
  auto* y = static_cast<typename Storage<Y>::type*>(yv);
  for (int64_t i = 0; i < n; ++i)
    y[i] = quant_one<Y, Saturate>(round_to<P>(round_to<P>(to_f32<X>(x[i])) / s[i]), zp[i]);
}

template <class Y>
inline typename Storage<Y>::type from_f32(float v) {
  if constexpr (std::is_same<Y, F16>::value) return olc_tn::f32_to_f16(v);
  else if constexpr (std::is_same<Y, BF16>::value) return olc_tn::f32_to_bf16(v);
  else return v;
}

// (x - zp) is exact in float32 for 8/16-bit x; int32 x is rounded first.
template <class X, class Y>
void dequant_u(const void* xv, int64_t n, float s, float zp, void* yv) {
  const auto* x = static_cast<const typename Storage<X>::type*>(xv);
  auto* y = static_cast<typename Storage<Y>::type*>(yv);
  for (int64_t i = 0; i < n; ++i) y[i] = from_f32<Y>((to_f32<X>(x[i]) - zp) * s);
}

template <class X, class Y>
void dequant_v(const void* xv, int64_t n, const float* s, const float* zp, void* yv) {
  const auto* x = static_cast<const typename Storage<X>::type*>(xv);
  auto* y = static_cast<typename Storage<Y>::type*>(yv);
  for (int64_t i = 0; i < n; ++i) y[i] = from_f32<Y>((to_f32<X>(x[i]) - zp[i]) * s[i]);
}

// Type dispatch, resolved once when a kernel is created.
template <class X, class P, class Y>
struct QPick {
  static QuantUniformFn u(bool sat) { return sat ? &quant_u<X, P, Y, true> : &quant_u<X, P, Y, false>; }
  static QuantVectorFn v(bool sat) { return sat ? &quant_v<X, P, Y, true> : &quant_v<X, P, Y, false>; }
};

template <class X, class P, bool Vec>
auto pick_y(int32_t y, bool sat) {
  using R = typename std::conditional<Vec, QuantVectorFn, QuantUniformFn>::type;
  auto get = [sat](auto tag) -> R {
    using Y = decltype(tag);
    if constexpr (Vec) return QPick<X, P, Y>::v(sat);
    else return QPick<X, P, Y>::u(sat);
  };
  switch (y) {
    case OLC_DTYPE_UINT8: return get(uint8_t{});
    case OLC_DTYPE_INT8: return get(int8_t{});
    case OLC_DTYPE_UINT16: return get(uint16_t{});
    case OLC_DTYPE_INT16: return get(int16_t{});
    case OLC_DTYPE_UINT4: return get(UInt4{});
    case OLC_DTYPE_INT4: return get(Int4{});
    case OLC_DTYPE_FLOAT8E4M3FN: return get(F8<OLC_DTYPE_FLOAT8E4M3FN>{});
    case OLC_DTYPE_FLOAT8E4M3FNUZ: return get(F8<OLC_DTYPE_FLOAT8E4M3FNUZ>{});
    case OLC_DTYPE_FLOAT8E5M2: return get(F8<OLC_DTYPE_FLOAT8E5M2>{});
    case OLC_DTYPE_FLOAT8E5M2FNUZ: return get(F8<OLC_DTYPE_FLOAT8E5M2FNUZ>{});
    default: return R{nullptr};
  }
}

template <class X, bool Vec>
auto pick_p(int32_t p, int32_t y, bool sat) {
  using R = typename std::conditional<Vec, QuantVectorFn, QuantUniformFn>::type;
  switch (p) {
    case OLC_DTYPE_FLOAT: return pick_y<X, float, Vec>(y, sat);
    case OLC_DTYPE_FLOAT16: return pick_y<X, F16, Vec>(y, sat);
    case OLC_DTYPE_BFLOAT16: return pick_y<X, BF16, Vec>(y, sat);
    default: return R{nullptr};
  }
}

template <bool Vec>
auto pick_x(int32_t x, int32_t p, int32_t y, bool sat) {
  using R = typename std::conditional<Vec, QuantVectorFn, QuantUniformFn>::type;
  switch (x) {
    case OLC_DTYPE_FLOAT: return pick_p<float, Vec>(p, y, sat);
    case OLC_DTYPE_FLOAT16: return pick_p<F16, Vec>(p, y, sat);
    case OLC_DTYPE_BFLOAT16: return pick_p<BF16, Vec>(p, y, sat);
    case OLC_DTYPE_INT32: return pick_p<int32_t, Vec>(p, y, sat);
    default: return R{nullptr};
  }
}

template <class X, bool Vec>
auto dq_pick_y(int32_t y) {
  using R = typename std::conditional<Vec, DequantVectorFn, DequantUniformFn>::type;
  switch (y) {
    case OLC_DTYPE_FLOAT: if constexpr (Vec) return R{&dequant_v<X, float>}; else return R{&dequant_u<X, float>};
    case OLC_DTYPE_FLOAT16: if constexpr (Vec) return R{&dequant_v<X, F16>}; else return R{&dequant_u<X, F16>};
    case OLC_DTYPE_BFLOAT16: if constexpr (Vec) return R{&dequant_v<X, BF16>}; else return R{&dequant_u<X, BF16>};
    default: return R{nullptr};
  }
}

template <bool Vec>
auto dq_pick_x(int32_t x, int32_t y) {
  using R = typename std::conditional<Vec, DequantVectorFn, DequantUniformFn>::type;
  switch (x) {
    case OLC_DTYPE_UINT8: return dq_pick_y<uint8_t, Vec>(y);
    case OLC_DTYPE_INT8: return dq_pick_y<int8_t, Vec>(y);
    case OLC_DTYPE_UINT16: return dq_pick_y<uint16_t, Vec>(y);
    case OLC_DTYPE_INT16: return dq_pick_y<int16_t, Vec>(y);
    case OLC_DTYPE_INT32: return dq_pick_y<int32_t, Vec>(y);
    case OLC_DTYPE_UINT4: return dq_pick_y<UInt4, Vec>(y);
    case OLC_DTYPE_INT4: return dq_pick_y<Int4, Vec>(y);
    case OLC_DTYPE_FLOAT8E4M3FN: return dq_pick_y<F8<OLC_DTYPE_FLOAT8E4M3FN>, Vec>(y);
    case OLC_DTYPE_FLOAT8E4M3FNUZ: return dq_pick_y<F8<OLC_DTYPE_FLOAT8E4M3FNUZ>, Vec>(y);
    case OLC_DTYPE_FLOAT8E5M2: return dq_pick_y<F8<OLC_DTYPE_FLOAT8E5M2>, Vec>(y);
    case OLC_DTYPE_FLOAT8E5M2FNUZ: return dq_pick_y<F8<OLC_DTYPE_FLOAT8E5M2FNUZ>, Vec>(y);
    default: return R{nullptr};
  }
}

}  // namespace

QuantUniformFn quant_uniform(int which) {
  switch (which) {
    case kQU8: return &quant_u<float, float, uint8_t, true>;
    case kQI8: return &quant_u<float, float, int8_t, true>;
    case kQU16: return &quant_u<float, float, uint16_t, true>;
    case kQI16: return &quant_u<float, float, int16_t, true>;
    case kQU4: return &quant_u<float, float, UInt4, true>;
    case kQI4: return &quant_u<float, float, Int4, true>;
    default: return nullptr;
  }
}

QuantVectorFn quant_vector(int which) {
  switch (which) {
    case kQU8: return &quant_v<float, float, uint8_t, true>;
    case kQI8: return &quant_v<float, float, int8_t, true>;
    case kQU16: return &quant_v<float, float, uint16_t, true>;
    case kQI16: return &quant_v<float, float, int16_t, true>;
    case kQU4: return &quant_v<float, float, UInt4, true>;
    case kQI4: return &quant_v<float, float, Int4, true>;
    default: return nullptr;
  }
}

DequantUniformFn dequant_uniform(int which) {
  switch (which) {
    case kDU8: return &dequant_u<uint8_t, float>;
    case kDI8: return &dequant_u<int8_t, float>;
    case kDU16: return &dequant_u<uint16_t, float>;
    case kDI16: return &dequant_u<int16_t, float>;
    case kDI32: return &dequant_u<int32_t, float>;
    case kDU4: return &dequant_u<UInt4, float>;
    case kDI4: return &dequant_u<Int4, float>;
    default: return nullptr;
  }
}

DequantVectorFn dequant_vector(int which) {
  switch (which) {
    case kDU8: return &dequant_v<uint8_t, float>;
    case kDI8: return &dequant_v<int8_t, float>;
    case kDU16: return &dequant_v<uint16_t, float>;
    case kDI16: return &dequant_v<int16_t, float>;
    case kDI32: return &dequant_v<int32_t, float>;
    case kDU4: return &dequant_v<UInt4, float>;
    case kDI4: return &dequant_v<Int4, float>;
    default: return nullptr;
  }
}

void min_max(const float* x, int64_t n, float* mn, float* mx) {
  float a = *mn, b = *mx;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (v < a) a = v;  // false for NaN: skipped
    if (v > b) b = v;
  }
  *mn = a;
  *mx = b;
}

QuantUniformFn quant_any_uniform(int32_t x, int32_t p, int32_t y, bool saturate) {
  return pick_x<false>(x, p, y, saturate);
}
QuantVectorFn quant_any_vector(int32_t x, int32_t p, int32_t y, bool saturate) {
  return pick_x<true>(x, p, y, saturate);
}
DequantUniformFn dequant_any_uniform(int32_t x, int32_t y) { return dq_pick_x<false>(x, y); }
DequantVectorFn dequant_any_vector(int32_t x, int32_t y) { return dq_pick_x<true>(x, y); }

}  // namespace scalar
}  // namespace olc_tn
