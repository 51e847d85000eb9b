// MatMulInteger, QLinearMatMul, com.microsoft MatMulIntegerToFloat and
// DynamicQuantizeMatMul vtables.
#ifndef OLC_MATMUL_INT_ADAPTER_H_
#define OLC_MATMUL_INT_ADAPTER_H_

#include "olc/kernel_abi.h"

namespace olc_mm {
void set_int_api(const olc_core_api* api);
const olc_kernel_vtable* matmul_integer_vtable();
const olc_kernel_vtable* qlinear_matmul_vtable();
const olc_kernel_vtable* matmul_integer_to_float_vtable();
const olc_kernel_vtable* dynamic_quantize_matmul_vtable();
}  // namespace olc_mm

#endif  // OLC_MATMUL_INT_ADAPTER_H_
