// The com.microsoft kernels as seen by olc-core: two vtables per operator,
// the optimized kernel and its plain reference.
#ifndef OLC_CONTRIB_MICROSOFT_CM_ADAPTER_H_
#define OLC_CONTRIB_MICROSOFT_CM_ADAPTER_H_

#include <string>
#include <vector>

#include "olc/kernel_abi.h"

namespace olc_cm {

// Set once at module init, before any vtable is handed out.
void set_core_api(const olc_core_api* api);

// nullptr when op_type is not an operator of this family.
const olc_kernel_vtable* vtable(const std::string& op_type, bool naive);

std::vector<std::string> op_names();

}  // namespace olc_cm

#endif  // OLC_CONTRIB_MICROSOFT_CM_ADAPTER_H_
