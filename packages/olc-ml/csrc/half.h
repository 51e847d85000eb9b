// IEEE binary16 <-> float32, exact widening and round-to-nearest-even
// narrowing (NaN stays NaN, overflow goes to infinity), portable C++: the
// family's float16 paths convert whole tensors once, off the hot loops.
#ifndef OLC_ML_HALF_H_
#define OLC_ML_HALF_H_

#include <cstdint>
#include <cstring>

namespace olc_ml {

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    exp = 113;
    while (!(man & 0x400u)) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (ax < 0x38800000u) {                                              // subnormal half or zero
    if (ax < 0x33000000u) return sign;                                 // below half the smallest subnormal
    const uint32_t exp = ax >> 23, man = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((ax >> 13) - (112u << 10));
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline void half_to_float(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = half_bits_to_float(x[i]);
}

inline void float_to_half(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_half_bits(x[i]);
}

}  // namespace olc_ml

#endif  // OLC_ML_HALF_H_
