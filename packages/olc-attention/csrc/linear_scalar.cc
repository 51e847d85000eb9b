// Scalar level of the recurrent-state kernels (linear_kernels.inc): one
// lane, four state columns per slab.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "linear_common.h"

namespace olc_attn {
namespace scalar {

namespace {

struct L1 {
  using R = float;
  static constexpr int64_t W = 1;
  static constexpr int kNV = 4;
  static constexpr int kNVWide = 4;
  static constexpr int kMaxQ = 4;
  static R ld(const float* p) { return *p; }
  static void st(float* p, R v) { *p = v; }
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
  static R round(R a) { return std::nearbyint(a); }
  static R exp2i(R n) {
    if (!(n >= -126.0f && n <= 127.0f)) return 1.0f;  // NaN (the caller's result is NaN already)
    const uint32_t u = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static bool lt(R a, R b) { return a < b; }
  static bool gt(R a, R b) { return a > b; }
  static R select(bool m, R a, R b) { return m ? a : b; }
};

#include "linear_kernels.inc"

}  // namespace

const LinearKernels* linear_kernels() {
  static const LinearKernels k = make_linear_kernels<L1>("scalar");
  return &k;
}

}  // namespace scalar
}  // namespace olc_attn
