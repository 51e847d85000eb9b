// Scalar level: the engine with one lane and portable bit-level float16 /
// bfloat16 conversions (nearest even, NaN kept quiet).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "attn_common.h"

namespace olc_attn {
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
  const float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // subnormal: m * 2^-24, exact
  return sign ? -v : v;
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, quiet
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to 65520 or more: inf
  if (a < 0x38800000u) {
    // below 2^-14: a subnormal result, a * 2^24 rounded to an integer (nearest even)
    const float r = std::nearbyint(float_of(a) * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));
  }
  const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);  // drop 13 bits, nearest even (may carry)
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

inline float bf16_to_f32(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

struct V1 {
  using R = float;
  static constexpr int64_t W = 1;
  static constexpr int kMR = 4;
  static constexpr int kNV = 4;
  static constexpr bool kScalef = false;  // scalef(p, n) = p * 2^n (vscalefps)
  static R ld(const float* p) { return *p; }
  static void st(float* p, R v) { *p = v; }
  static R ld_f16(const uint16_t* p) { return f16_to_f32(*p); }
  static void st_f16(uint16_t* p, R v) { *p = f32_to_f16(v); }
  static R ld_bf16(const uint16_t* p) { return bf16_to_f32(*p); }
  static void st_bf16(uint16_t* p, R v) { *p = f32_to_bf16(v); }
  static R zero() { return 0.0f; }
  static R set1(float v) { return v; }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R div(R a, R b) { return a / b; }
  static R fmadd(R a, R b, R c) { return a * b + c; }  // two roundings: no FMA at this level
  // As the vector instructions: a NaN in either operand gives the second.
  static R min(R a, R b) { return a < b ? a : b; }
  static R max(R a, R b) { return a > b ? a : b; }
  static float hsum(R v) { return v; }
  static float hmax(R v) { return v; }
  static void hsum4(R a, R b, R c, R d, float* out) {
    out[0] = a, out[1] = b, out[2] = c, out[3] = d;
  }
  static R round(R a) { return std::nearbyint(a); }
  static R exp2i(R n) {
    if (!(n >= -126.0f && n <= 127.0f)) return 1.0f;  // NaN (the caller's result is NaN already)
    return float_of(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  }
  static bool less(R a, R b) { return a < b; }
  static R select(bool m, R a, R b) { return m ? a : b; }
  static void tr8(const float* const* rows, int64_t d0, float* out, int64_t ld) {
    for (int64_t d = 0; d < 8; ++d)
      for (int64_t j = 0; j < 8; ++j) out[d * ld + j] = rows[j][d0 + d];
  }
};

#include "attn_engine.inc"

}  // namespace

const IsaKernels* kernels() {
  static const IsaKernels k = make_kernels<V1>("scalar");
  return &k;
}

}  // namespace scalar
}  // namespace olc_attn
