// AVX-512 level of ml_kernels.h: 16 float32 lanes, masked tail loads.
#include <immintrin.h>

#include <cstdint>

#include "ml_kernels.h"

namespace olc_ml {
namespace avx512 {

namespace {
constexpr const char* kIsa = "avx512";

struct V {
  using R = __m512;
  static constexpr int64_t W = 16;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load_part(const float* p, int64_t k) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << k) - 1u), p);
  }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static float hsum(R v) { return _mm512_reduce_add_ps(v); }
};
}  // namespace

#include "ml_kernels.inc"

}  // namespace avx512
}  // namespace olc_ml
