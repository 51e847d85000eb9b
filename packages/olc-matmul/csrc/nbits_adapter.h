// com.microsoft MatMulNBits vtable.
#ifndef OLC_MATMUL_NBITS_ADAPTER_H_
#define OLC_MATMUL_NBITS_ADAPTER_H_

#include "olc/kernel_abi.h"

namespace olc_mm {
void set_nbits_api(const olc_core_api* api);
const olc_kernel_vtable* matmul_nbits_vtable();
}  // namespace olc_mm

#endif  // OLC_MATMUL_NBITS_ADAPTER_H_
