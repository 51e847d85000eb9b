// The multi-input elementwise kernels as seen by olc-core: binary ops,
// variadic Sum/Mean/Min/Max, Where, Clip and SwiGLU, one vtable per ONNX
// operator.
#ifndef OLC_ELEMENTWISE_BINARY_ADAPTER_H_
#define OLC_ELEMENTWISE_BINARY_ADAPTER_H_

#include <string>
#include <vector>

#include "olc/kernel_abi.h"

namespace olc_ew {

// Set once at module init, before any vtable is handed out.
void set_nary_core_api(const olc_core_api* api);

// nullptr when op_type is not one of these kernels.
const olc_kernel_vtable* nary_vtable(const std::string& op_type);

std::vector<std::string> nary_op_names();

}  // namespace olc_ew

#endif  // OLC_ELEMENTWISE_BINARY_ADAPTER_H_
