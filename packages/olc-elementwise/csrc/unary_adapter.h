// The unary kernels as seen by olc-core: one vtable per ONNX operator.
#ifndef OLC_ELEMENTWISE_UNARY_ADAPTER_H_
#define OLC_ELEMENTWISE_UNARY_ADAPTER_H_

#include <string>
#include <vector>

#include "olc/kernel_abi.h"

namespace olc_ew {

// Set once at module init, before any vtable is handed out.
void set_core_api(const olc_core_api* api);

// nullptr when op_type is not a unary op of this family.
const olc_kernel_vtable* unary_vtable(const std::string& op_type);

std::vector<std::string> unary_op_names();

// Attribute name -> default, as the kernels apply them (kept in step with
// manifest.py by a test).
struct AttributeDefault {
  std::string name;
  int32_t type;  // olc_attribute_type
  double f;
  int64_t i;
  std::string s;
};
std::vector<AttributeDefault> unary_attribute_defaults(const std::string& op_type);

}  // namespace olc_ew

#endif  // OLC_ELEMENTWISE_UNARY_ADAPTER_H_
