// Scalar level of ml_kernels.h: one lane, multiply then add (no FMA).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ml_kernels.h"

namespace olc_ml {
namespace scalar {

namespace {
constexpr const char* kIsa = "scalar";

struct V {
  using R = float;
  static constexpr int64_t W = 1;
  static R zero() { return 0.0f; }
  static R load(const float* p) { return *p; }
  static R load_part(const float* p, int64_t k) { return k > 0 ? *p : 0.0f; }
  static void store(float* p, R v) { *p = v; }
  static void store_part(float* p, R v, int64_t k) {
    if (k > 0) *p = v;
  }
  static R set1(float v) { return v; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R fmadd(R a, R b, R c) { return a * b + c; }
  static float hsum(R a) { return a; }
  static R exp(R x) { return x < -87.33654f ? 0.0f : std::exp(x); }
};
}  // namespace

#include "ml_kernels.inc"

}  // namespace scalar

const MlKernels* best_kernels(int32_t simd_level) {
  // OLC_SIMD_AVX512 = 2, OLC_SIMD_AVX2 = 1 (olc/kernel_abi.h)
  if (simd_level >= 2) return avx512::kernels();
  if (simd_level >= 1) return avx2::kernels();
  return scalar::kernels();
}

}  // namespace olc_ml
