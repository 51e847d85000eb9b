// 2-D transpose tiles: dst[a * dst_ld + b] = src[b * src_ld + a] for
// a < na, b < nb (strides in elements). The AVX2 variants transpose 8x8
// (4-byte) or 4x4 (8-byte) blocks in registers and hand the edges to the
// scalar tile.
#ifndef OLC_TENSOR_TRANSPOSE_KERNELS_H_
#define OLC_TENSOR_TRANSPOSE_KERNELS_H_

#include <cstdint>

namespace olc_tn {

using TransposeFn = void (*)(const void* src, int64_t src_ld, void* dst, int64_t dst_ld, int64_t na, int64_t nb);

namespace scalar {
void transpose_1(const void* src, int64_t src_ld, void* dst, int64_t dst_ld, int64_t na, int64_t nb);
void transpose_2(const void* src, int64_t src_ld, void* dst, int64_t dst_ld, int64_t na, int64_t nb);
void transpose_4(const void* src, int64_t src_ld, void* dst, int64_t dst_ld, int64_t na, int64_t nb);
void transpose_8(const void* src, int64_t src_ld, void* dst, int64_t dst_ld, int64_t na, int64_t nb);
}  // namespace scalar

namespace avx2 {
void transpose_4(const void* src, int64_t src_ld, void* dst, int64_t dst_ld, int64_t na, int64_t nb);
void transpose_8(const void* src, int64_t src_ld, void* dst, int64_t dst_ld, int64_t na, int64_t nb);
}  // namespace avx2

}  // namespace olc_tn

#endif  // OLC_TENSOR_TRANSPOSE_KERNELS_H_
