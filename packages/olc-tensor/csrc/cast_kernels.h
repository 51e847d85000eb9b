// The per-ISA bulk conversions between float32 and float16/bfloat16 (the
// hot Cast pairs). Each namespace lives in its own translation unit built
// with that level's flags; callers enter a level only after the runtime
// check for it. All variants produce the same bits.
#ifndef OLC_TENSOR_CAST_KERNELS_H_
#define OLC_TENSOR_CAST_KERNELS_H_

#include <cstdint>
#include <string>

namespace olc_tn {

// dst[i] = convert(src[i]) for i < n; dst never overlaps src.
using ConvertFn = void (*)(const void* src, void* dst, int64_t n);

#define OLC_TENSOR_DECLARE_CASTS                                \
  void f32_to_f16(const void* src, void* dst, int64_t n);       \
  void f16_to_f32(const void* src, void* dst, int64_t n);       \
  void f32_to_bf16(const void* src, void* dst, int64_t n);      \
  void bf16_to_f32(const void* src, void* dst, int64_t n);

namespace scalar { OLC_TENSOR_DECLARE_CASTS }
namespace avx2 {
OLC_TENSOR_DECLARE_CASTS
// float32 -> int32, truncating and saturating, NaN -> 0.
void f32_to_i32(const void* src, void* dst, int64_t n);
}  // namespace avx2
namespace avx512 {
OLC_TENSOR_DECLARE_CASTS
void f32_to_i32(const void* src, void* dst, int64_t n);
void f32_to_i64(const void* src, void* dst, int64_t n);
// float32 -> int8/uint8/int16/uint16: NaN -> 0, clamp, truncate, narrow.
void f32_to_i8(const void* src, void* dst, int64_t n);
void f32_to_u8(const void* src, void* dst, int64_t n);
void f32_to_i16(const void* src, void* dst, int64_t n);
void f32_to_u16(const void* src, void* dst, int64_t n);
void f32_to_u32(const void* src, void* dst, int64_t n);
void f64_to_i32(const void* src, void* dst, int64_t n);
// float32 -> bool: value != 0 (NaN true), one byte each.
void f32_to_bool(const void* src, void* dst, int64_t n);
// f32_to_f16 with non-temporal stores (dst 64-byte aligned): for outputs
// far larger than the caches, written by one thread.
void f32_to_f16_stream(const void* src, void* dst, int64_t n);
void f32_to_bf16_stream(const void* src, void* dst, int64_t n);
}  // namespace avx512
namespace avx512bf16 {
// vcvtneps2bf16 with the subnormal lanes (which it flushes) redone exactly.
void f32_to_bf16(const void* src, void* dst, int64_t n);
void f32_to_bf16_stream(const void* src, void* dst, int64_t n);
}  // namespace avx512bf16

#undef OLC_TENSOR_DECLARE_CASTS

// The ISA variant Cast chooses now for (src, dst), "generic" when the pair
// has no SIMD variant.
std::string cast_isa_name(int32_t src, int32_t dst);

}  // namespace olc_tn

#endif  // OLC_TENSOR_CAST_KERNELS_H_
