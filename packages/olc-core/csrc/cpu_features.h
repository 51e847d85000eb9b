// CPU feature detection (cpuid + xgetbv) and the OLC_SIMD cap.
#pragma once

#include <cstdint>

#include <pybind11/pybind11.h>

#include "olc/kernel_abi.h"

namespace olc {

// Detected once (thread-safe), never changes.
uint64_t detected_cpu_features();
int32_t detected_simd_level();

// The level kernels may use: detected level capped by OLC_SIMD (read at first
// use) or by set_simd_cap(). Lock-free reads.
int32_t simd_level();
uint64_t cpu_features();  // features above the cap reported absent

// level < 0 removes the cap. Throws std::invalid_argument on a bad level.
void set_simd_cap(int32_t level);
int32_t simd_cap();  // -1 when uncapped

// Python bindings on olc_core._native.
void bind_cpu_features(pybind11::module_& m);

}  // namespace olc
