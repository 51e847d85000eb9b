// The fused elementwise kernel (olc.fused::ElementwisePlan) as seen by
// olc-core: one vtable, created from a small serialized program.
#ifndef OLC_ELEMENTWISE_FUSED_ADAPTER_H_
#define OLC_ELEMENTWISE_FUSED_ADAPTER_H_

#include <string>
#include <vector>

#include "olc/kernel_abi.h"

namespace olc_ew {

// Set once at module init, before the vtable is handed out.
void set_fused_core_api(const olc_core_api* api);

const olc_kernel_vtable* fused_vtable();

// The step op names a program may use (unary float ops of the family,
// GeluTanh for Gelu with approximate="tanh", and Add/Sub/Mul/Div).
std::vector<std::string> fused_op_names();

}  // namespace olc_ew

#endif  // OLC_ELEMENTWISE_FUSED_ADAPTER_H_
