// Scalar level of the fused kernel's tile primitives: one element per
// "vector" (the baseline compiler may still vectorize the loops).
#include <cstdint>
#include <cstring>

#include "fused_common.h"

namespace olc_ew {
namespace scalar {

namespace {
struct V {
  using R = float;
  static constexpr int64_t kWidth = 1;
  static R load(const float* p) { return *p; }
  static void store(float* p, R v) { *p = v; }
  static R set1(float v) { return v; }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R div(R a, R b) { return a / b; }
  static R load_bf16(const uint16_t* p) {
    const uint32_t u = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static void store_bf16(uint16_t* p, R v) {
    uint32_t x;
    std::memcpy(&x, &v, 4);
    *p = (x & 0x7fffffffu) > 0x7f800000u ? static_cast<uint16_t>((x >> 16) | 0x40u)
                                           : static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
};
}  // namespace

#include "fused_tile.inc"

}  // namespace scalar
}  // namespace olc_ew
