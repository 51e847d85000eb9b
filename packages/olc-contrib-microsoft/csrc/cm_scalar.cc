// Scalar level: the engine with one lane, portable bit-level conversions of
// float16 and bfloat16 (nearest even, NaN kept quiet).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cm_common.h"

namespace olc_cm {
namespace scalar {

namespace {

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return float_of(sign | 0x7f800000u | (m << 13));  // inf, NaN
  if (e != 0) return float_of(sign | ((e + 112u) << 23) | (m << 13));
  // zero or subnormal: m * 2^-24, exact in float32
  const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, quiet
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to or beyond 65520: inf
  if (a < 0x38800000u) {
    // below 2^-14: subnormal result; round a * 2^24 to an integer, nearest even
    const float v = float_of(a) * 16777216.0f;  // exact (power of two)
    const float r = std::nearbyint(v);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));
  }
  // normal: drop 13 mantissa bits with nearest-even rounding (may carry into the exponent)
  const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

inline float bf16_to_f32(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

struct V1 {
  using T = float;
  static constexpr bool kScalef = false;  // exp scaling by scalef (cm_engine.inc)
  using R = float;
  static constexpr int64_t W = 1;
  static constexpr int kRegs = 16;
  static R ld(const float* p) { return *p; }
  static void st(float* p, R v) { *p = v; }
  static R ld_f16(const uint16_t* p) { return f16_to_f32(*p); }
  static void st_f16(uint16_t* p, R v) { *p = f32_to_f16(v); }
  static R ld_bf16(const uint16_t* p) { return bf16_to_f32(*p); }
  static void st_bf16(uint16_t* p, R v) { *p = f32_to_bf16(v); }
  static R ld_u8(const uint8_t* p) { return static_cast<float>(*p); }
  static R ld_u4(const uint8_t* p) { return static_cast<float>(*p & 15); }
  static R ld_i4(const uint8_t* p) { return static_cast<float>(((*p & 15) ^ 8) - 8); }
  static R ld_p4(const uint8_t* p, int64_t e) { return static_cast<float>((p[e >> 1] >> ((e & 1) * 4)) & 15); }
  static R ld_p2(const uint8_t* p, int64_t e) { return static_cast<float>((p[e >> 2] >> ((e & 3) * 2)) & 3); }
  static R set1(float v) { return v; }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R div(R a, R b) { return a / b; }
  static R fmadd(R a, R b, R c) { return a * b + c; }  // two roundings: no FMA at this level
  static R sqrt(R a) { return std::sqrt(a); }
  // As the vector instructions: a NaN first operand gives the second.
  static R min(R a, R b) { return a < b ? a : b; }
  static R max(R a, R b) { return a > b ? a : b; }
  static R abs(R a) { return std::fabs(a); }
  static float hsum(R v) { return v; }
  static R round(R a) { return std::nearbyint(a); }
  static R exp2_biased(R b) { return float_of(bits_of(b) << 23); }
  static bool less(R a, R b) { return a < b; }
  static R select(bool m, R a, R b) { return m ? a : b; }
  static unsigned bits(bool m) { return m ? 1u : 0u; }
};

// float64 lanes (one).
struct VD1 {
  using T = double;
  using R = double;
  static constexpr int64_t W = 1;
  static constexpr int kRegs = 16;
  static R ld(const double* p) { return *p; }
  static void st(double* p, R v) { *p = v; }
  static R set1(double v) { return v; }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R div(R a, R b) { return a / b; }
  static R fmadd(R a, R b, R c) { return a * b + c; }
  static R sqrt(R a) { return std::sqrt(a); }
  static R min(R a, R b) { return a < b ? a : b; }
  static R max(R a, R b) { return a > b ? a : b; }
  static R abs(R a) { return std::fabs(a); }
  static double hsum(R v) { return v; }
  static R round(R a) { return std::nearbyint(a); }
  static R exp2i(R n) {
    const uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(n) + 1023) << 52;
    double d;
    std::memcpy(&d, &u, 8);
    return d;
  }
  static bool less(R a, R b) { return a < b; }
  static R select(bool m, R a, R b) { return m ? a : b; }
  static unsigned bits(bool m) { return m ? 1u : 0u; }
};

#include "cm_engine.inc"
#include "cm_cdist.inc"
#include "cm_dequant.inc"
#include "cm_moe.inc"

}  // namespace

const IsaKernels* kernels() {
  static const IsaKernels k = [] {
    IsaKernels t = make_kernels_rows<V1, VD1>("scalar");
    add_cdist_kernels<V1, VD1>(&t);
    add_dequant_kernels<V1>(&t);
    add_moe_kernels<V1>(&t);
    return t;
  }();
  return &k;
}

}  // namespace scalar
}  // namespace olc_cm
