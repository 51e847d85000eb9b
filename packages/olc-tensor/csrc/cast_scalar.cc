// Scalar bulk conversions float32 <-> float16/bfloat16 (the reference the
// SIMD levels match bit for bit).
#include "cast_kernels.h"
#include "fp_convert.h"

namespace olc_tn {
namespace scalar {

void f32_to_f16(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = olc_tn::f32_to_f16(s[i]);
}

void f16_to_f32(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = olc_tn::f16_to_f32(s[i]);
}

void f32_to_bf16(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = olc_tn::f32_to_bf16(s[i]);
}

void bf16_to_f32(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = olc_tn::bf16_to_f32(s[i]);
}

}  // namespace scalar
}  // namespace olc_tn
