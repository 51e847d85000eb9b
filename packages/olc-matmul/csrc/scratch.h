// Per-thread scratch buffers of the matmul family's drivers and adapters.
#pragma once

#include <cstddef>

namespace olc_mm {

// A buffer for thread_local instances: 64-byte aligned, grown on demand
// (in whole pages) and kept for the thread's next call; get() returns
// nullptr when the allocation fails. Defined out of line (scratch.cc) so
// that no ISA-specific translation unit carries a copy of it.
struct Scratch {
  void* p = nullptr;
  size_t cap = 0;
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();
  void* get(size_t bytes);
};

// The same, sized in floats.
struct FloatScratch : Scratch {
  float* get(size_t n) { return static_cast<float*>(Scratch::get(n * sizeof(float))); }
};

}  // namespace olc_mm
