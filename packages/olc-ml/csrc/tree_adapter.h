// The tree ensemble kernels as seen by olc-core: one vtable per operator.
#ifndef OLC_ML_TREE_ADAPTER_H_
#define OLC_ML_TREE_ADAPTER_H_

#include <string>
#include <vector>

#include "olc/kernel_abi.h"

namespace olc_ml {

// Set once at module init, before any vtable is handed out.
void set_core_api(const olc_core_api* api);

// nullptr when op_type is not an operator of this family.
const olc_kernel_vtable* vtable(const std::string& op_type);

std::vector<std::string> op_names();

// Checks the attributes of a restated node (what create() would do) without
// a session: "" or the reason. Used by the graph pass to report a bad model
// at session creation.
std::string check_attributes(const std::string& op_type, const olc_attribute* attrs, int n_attrs);

}  // namespace olc_ml

#endif  // OLC_ML_TREE_ADAPTER_H_
