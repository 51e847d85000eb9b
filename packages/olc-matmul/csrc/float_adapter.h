// Gemm, MatMul, com.microsoft FusedMatMul and olc.fused MatMulAdd vtables
// (float32, float64, float16, bfloat16).
#ifndef OLC_MATMUL_FLOAT_ADAPTER_H_
#define OLC_MATMUL_FLOAT_ADAPTER_H_

#include "olc/kernel_abi.h"

namespace olc_mm {
void set_float_api(const olc_core_api* api);
const olc_kernel_vtable* gemm_vtable();
const olc_kernel_vtable* matmul_vtable();
const olc_kernel_vtable* fused_matmul_vtable();
const olc_kernel_vtable* matmul_add_vtable();
}  // namespace olc_mm

#endif  // OLC_MATMUL_FLOAT_ADAPTER_H_
