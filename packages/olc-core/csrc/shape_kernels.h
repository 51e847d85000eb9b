// The kernels olc-core registers itself (see shape_kernels.cc).
#pragma once

#include <string>

#include "olc/kernel_abi.h"

namespace olc {

// The vtable of olc_core::<op> (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, Dropout, Shape, Size), or nullptr.
const olc_kernel_vtable* shape_kernel_vtable(const std::string& op);

}  // namespace olc
