// QLinearConv and ConvInteger vtables: the implicit GEMM of the float Conv
// on the integer microkernels, zero points compensated exactly.
#ifndef OLC_MATMUL_QCONV_ADAPTER_H_
#define OLC_MATMUL_QCONV_ADAPTER_H_

#include "olc/kernel_abi.h"

namespace olc_mm {
void set_qconv_api(const olc_core_api* api);
const olc_kernel_vtable* qlinear_conv_vtable();
const olc_kernel_vtable* conv_integer_vtable();
}  // namespace olc_mm

#endif  // OLC_MATMUL_QCONV_ADAPTER_H_
