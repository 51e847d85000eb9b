// Einsum vtable: the equation parsed at create(), a plan per input-shape
// signature (pairwise contractions on the family's GEMM), run per call.
#ifndef OLC_MATMUL_EINSUM_ADAPTER_H_
#define OLC_MATMUL_EINSUM_ADAPTER_H_

#include "olc/kernel_abi.h"

namespace olc_mm {
void set_einsum_api(const olc_core_api* api);
const olc_kernel_vtable* einsum_vtable();
}  // namespace olc_mm

#endif  // OLC_MATMUL_EINSUM_ADAPTER_H_
