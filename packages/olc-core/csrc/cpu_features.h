// CPU feature detection (cpuid + xgetbv) and the OLC_SIMD cap.
#pragma once

#include <cstdint>

#include <string>

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

// Empty, or why the OLC_SIMD value was rejected (it is then ignored).
const std::string& simd_env_error();

// CPU 0's data (or unified) cache of `level` (1-3) from Linux sysfs, read
// once: bytes (0 where unknown) and the logical CPUs sharing it (>= 1).
int64_t data_cache_bytes(int32_t level, int32_t* shared_by);

}  // namespace olc
