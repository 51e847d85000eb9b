// The tuning registry: (library, kernel, implementation, dtype) -> named,
// typed parameters with portable defaults. Handles are stable for the life of
// the process; reading one is a single atomic load.
#pragma once

#include <cstdint>

#include "olc/kernel_abi.h"

// Declared, not included: the pybind11 headers cost ~10 s of compile time
// in every translation unit that reads them.
namespace pybind11 { class module_; }

namespace olc {

olc_tuning_param* tuning_declare_int(const char* library, const char* kernel,
                                     const char* implementation, int32_t dtype,
                                     const char* name, int64_t default_value);
int64_t tuning_read_int(const olc_tuning_param* param);
olc_tuning_param* tuning_declare_float(const char* library, const char* kernel,
                                       const char* implementation, int32_t dtype,
                                       const char* name, double default_value);
double tuning_read_float(const olc_tuning_param* param);

// Python bindings on olc_core._native.
void bind_tuning(pybind11::module_& m);

}  // namespace olc
