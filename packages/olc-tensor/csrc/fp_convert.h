// Bit-exact scalar conversions between float32/float64 and float16 /
// bfloat16 (round to nearest even, NaN kept and made quiet). Everything here
// has internal linkage, so a translation unit built with ISA flags never
// lends its copy to portable code.
#ifndef OLC_TENSOR_FP_CONVERT_H_
#define OLC_TENSOR_FP_CONVERT_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace olc_tn {
namespace {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint64_t f64_bits(double f) {
  uint64_t u;
  std::memcpy(&u, &f, 8);
  return u;
}

// float32 -> float16, the same bits as vcvtps2ph with round-to-nearest-even.
inline uint16_t f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));  // quiet NaN
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to infinity
  if (x >= 0x38800000u) {  // normal float16 (>= 2^-14)
    const uint32_t odd = (x >> 13) & 1u;
    x += 0xc8000fffu + odd;  // exponent rebias (-112 << 23) plus the rounding bias
    return static_cast<uint16_t>(sign | (x >> 13));
  }
  // Subnormal or zero: adding 0.5 leaves 2^-24 as the float's unit in the
  // last place, so the hardware addition rounds to the float16 grid.
  const float r = bits_f32(x) + 0.5f;
  return static_cast<uint16_t>(sign | (f32_bits(r) - 0x3f000000u));
}

// float16 -> float32 (exact; a signalling NaN is made quiet, as vcvtph2ps does).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return bits_f32(sign | f32_bits(v));
  }
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

// float32 -> bfloat16, round to nearest even; NaN keeps its sign and top
// payload bits and is made quiet.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bf16_to_f32(uint16_t b) { return bits_f32(static_cast<uint32_t>(b) << 16); }

// float64 -> float16 in one rounding (no double rounding through float32).
inline uint16_t f64_to_f16(double d) {
  uint64_t x = f64_bits(d);
  const uint16_t sign = static_cast<uint16_t>((x >> 48) & 0x8000u);
  x &= 0x7fffffffffffffffull;
  if (x > 0x7ff0000000000000ull) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 42) & 0x3ffu));
  if (x >= 0x40effe0000000000ull) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520
  if (x >= 0x3f10000000000000ull) {  // >= 2^-14
    uint64_t r = x - (static_cast<uint64_t>(1023 - 15) << 52);
    r = (r + ((1ull << 41) - 1) + ((r >> 42) & 1u)) >> 42;
    return static_cast<uint16_t>(sign | r);
  }
  const double units = std::nearbyint(std::fabs(d) * 16777216.0);  // multiples of 2^-24, ties to even
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(units));
}

// float64 -> bfloat16 in one rounding.
inline uint16_t f64_to_bf16(double d) {
  uint64_t x = f64_bits(d);
  const uint16_t sign = static_cast<uint16_t>((x >> 48) & 0x8000u);
  x &= 0x7fffffffffffffffull;
  if (x > 0x7ff0000000000000ull) return static_cast<uint16_t>(sign | 0x7fc0u | ((x >> 45) & 0x3fu));
  if (x >= 0x47eff00000000000ull) return static_cast<uint16_t>(sign | 0x7f80u);  // >= (2 - 2^-8) * 2^127
  if (x >= 0x3810000000000000ull) {  // >= 2^-126
    uint64_t r = x - (static_cast<uint64_t>(1023 - 127) << 52);
    r = (r + ((1ull << 44) - 1) + ((r >> 45) & 1u)) >> 45;
    return static_cast<uint16_t>(sign | r);
  }
  const double units = std::nearbyint(std::ldexp(std::fabs(d), 133));  // multiples of 2^-133
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(units));
}

// A 64-bit integer magnitude rounded to `bits` significant bits (ties to
// even), as a double (exact: at most 11 significant bits are kept here).
inline double u64_round_bits(uint64_t u, int bits) {
  if (u == 0) return 0.0;
  const int p = 63 - __builtin_clzll(u);
  if (p < bits) return static_cast<double>(u);
  const int shift = p - bits + 1;
  uint64_t q = u >> shift;
  const uint64_t rem = u & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return std::ldexp(static_cast<double>(q), shift);
}

}  // namespace
}  // namespace olc_tn

#endif  // OLC_TENSOR_FP_CONVERT_H_
