// Conv and ConvTranspose vtables. Conv: attributes validated and constant weights packed at
// create(), the geometry resolved and one of the three algorithms (pointwise
// GEMM, implicit GEMM over im2col tiles, direct depthwise) run per call.
// ConvTranspose: the GEMM of W^T and X, scattered back (col2im).
#ifndef OLC_MATMUL_CONV_ADAPTER_H_
#define OLC_MATMUL_CONV_ADAPTER_H_

#include <cstdint>

#include "olc/kernel_abi.h"

namespace olc_mm {
void set_conv_api(const olc_core_api* api);
const olc_kernel_vtable* conv_vtable();
// olc.fused FusedConv: Conv with BatchNormalization folded in and an activation.
const olc_kernel_vtable* fused_conv_vtable();
const olc_kernel_vtable* conv_transpose_vtable();
struct CacheInfo;
// The Conv tuning key stream_min_bytes' default for these caches.
int64_t conv_stream_min_bytes(const CacheInfo& caches);
// The Conv tuning key gemv_split_min_bytes' default for these caches.
int64_t conv_gemv_split_min_bytes(const CacheInfo& caches);
}  // namespace olc_mm

#endif  // OLC_MATMUL_CONV_ADAPTER_H_
