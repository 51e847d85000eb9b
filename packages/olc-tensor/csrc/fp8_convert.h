// Bit-exact scalar conversions between float64 and the four ONNX float8
// types (Cast-19+ semantics), and a 256-entry float8 -> float32 decode table.
//
//           exp/mant  bias  max     inf   NaN             -0
// E4M3FN     4/3       7    448     no    S.1111.111      yes
// E4M3FNUZ   4/3       8    240     no    0x80 only       no
// E5M2       5/2      15    57344   yes   S.11111.{01,10,11}  yes
// E5M2FNUZ   5/2      16    57344   no    0x80 only       no
//
// To float8: one rounding to nearest even from the exact source value.
// A rounded magnitude above the maximum (and +-inf) becomes +-max with
// saturate, else +-inf (E5M2) or NaN (the others). NaN stays NaN; E4M3FN
// and E5M2 keep its sign (as ml_dtypes does). FNUZ types give +0 for -0.
// Internal linkage, as fp_convert.h.
#ifndef OLC_TENSOR_FP8_CONVERT_H_
#define OLC_TENSOR_FP8_CONVERT_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "olc/kernel_abi.h"

namespace olc_tn {
namespace {

template <int32_t Code>
struct F8Format;
template <>
struct F8Format<OLC_DTYPE_FLOAT8E4M3FN> {
  static constexpr int kMant = 3, kBias = 7;
  static constexpr uint32_t kMaxCode = 0x7e;
  static constexpr bool kFnuz = false, kInf = false;
};
template <>
struct F8Format<OLC_DTYPE_FLOAT8E4M3FNUZ> {
  static constexpr int kMant = 3, kBias = 8;
  static constexpr uint32_t kMaxCode = 0x7f;
  static constexpr bool kFnuz = true, kInf = false;
};
template <>
struct F8Format<OLC_DTYPE_FLOAT8E5M2> {
  static constexpr int kMant = 2, kBias = 15;
  static constexpr uint32_t kMaxCode = 0x7b;
  static constexpr bool kFnuz = false, kInf = true;
};
template <>
struct F8Format<OLC_DTYPE_FLOAT8E5M2FNUZ> {
  static constexpr int kMant = 2, kBias = 16;
  static constexpr uint32_t kMaxCode = 0x7f;
  static constexpr bool kFnuz = true, kInf = false;
};

template <int32_t Code>
inline uint8_t f8_nan(uint8_t sign) {
  using F = F8Format<Code>;
  if constexpr (F::kFnuz) return 0x80;
  else if constexpr (F::kInf) return static_cast<uint8_t>(sign | 0x7e);  // quiet, as ml_dtypes
  else return static_cast<uint8_t>(sign | 0x7f);
}

// float64 -> float8 (every narrower source widens to float64 exactly).
template <int32_t Code, bool Saturate>
inline uint8_t f64_to_f8(double d) {
  using F = F8Format<Code>;
  uint64_t x;
  std::memcpy(&x, &d, 8);
  const uint8_t sign = static_cast<uint8_t>((x >> 56) & 0x80u);
  x &= 0x7fffffffffffffffull;
  if (x > 0x7ff0000000000000ull) return f8_nan<Code>(sign);
  constexpr uint64_t kMinNormal = static_cast<uint64_t>(1023 + 1 - F::kBias) << 52;
  uint32_t c;
  if (x >= 0x40f0000000000000ull) {  // >= 2^16 (inf too): beyond every format's rounding limit
    c = F::kMaxCode + 1;
  } else if (x >= kMinNormal) {
    // Rebias the exponent, then drop 52 - kMant bits with ties to even; a
    // carry out of the mantissa bumps the exponent, as it should.
    constexpr int kShift = 52 - F::kMant;
    const uint64_t r = x - (static_cast<uint64_t>(1023 - F::kBias) << 52);
    c = static_cast<uint32_t>((r + ((1ull << (kShift - 1)) - 1) + ((r >> kShift) & 1u)) >> kShift);
  } else {
    // Subnormal range: a count of the smallest subnormal, ties to even
    // (exact: scaling by a power of two, nearbyint in the default mode).
    c = static_cast<uint32_t>(std::nearbyint(std::ldexp(std::fabs(d), F::kMant + F::kBias - 1)));
  }
  if (c > F::kMaxCode) {
    if constexpr (Saturate) c = F::kMaxCode;
    else if constexpr (F::kInf) return static_cast<uint8_t>(sign | 0x7c);
    else return f8_nan<Code>(sign);
  }
  if constexpr (F::kFnuz) {
    if (c == 0) return 0;  // no negative zero
  }
  return static_cast<uint8_t>(sign | c);
}

// float8 -> float32, exact; NaN decodes to the quiet NaN of its sign (FNUZ's
// 0x80 to -NaN), as ml_dtypes does.
template <int32_t Code>
inline float f8_to_f32(uint8_t b) {
  using F = F8Format<Code>;
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t mag = b & 0x7fu;
  uint32_t bits;
  if (F::kFnuz && b == 0x80) {
    bits = 0xffc00000u;
  } else if (!F::kFnuz && !F::kInf && mag == 0x7f) {
    bits = sign | 0x7fc00000u;
  } else if (F::kInf && mag >= 0x7c) {
    bits = sign | (mag == 0x7c ? 0x7f800000u : 0x7fc00000u);
  } else {
    const int e = static_cast<int>(mag >> F::kMant);
    const int m = static_cast<int>(mag & ((1u << F::kMant) - 1));
    const float v = e == 0 ? std::ldexp(static_cast<float>(m), 1 - F::kBias - F::kMant)
                           : std::ldexp(static_cast<float>((1 << F::kMant) | m), e - F::kBias - F::kMant);
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The 256 decoded values of a float8 type, built on first use.
template <int32_t Code>
const float* f8_table() {
  struct Table {
    float v[256];
    Table() {
      for (int i = 0; i < 256; ++i) v[i] = f8_to_f32<Code>(static_cast<uint8_t>(i));
    }
  };
  static const Table t;
  return t.v;
}

inline bool is_f8(int32_t dtype) {
  return dtype == OLC_DTYPE_FLOAT8E4M3FN || dtype == OLC_DTYPE_FLOAT8E4M3FNUZ || dtype == OLC_DTYPE_FLOAT8E5M2 ||
         dtype == OLC_DTYPE_FLOAT8E5M2FNUZ;
}

}  // namespace
}  // namespace olc_tn

#endif  // OLC_TENSOR_FP8_CONVERT_H_
