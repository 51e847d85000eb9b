#include "scratch.h"

#include <cstdlib>

namespace olc_mm {

Scratch::~Scratch() { std::free(p); }

void* Scratch::get(size_t bytes) {
  if (bytes > cap) {
    std::free(p);
    cap = (bytes + 4095) & ~size_t(4095);
    p = std::aligned_alloc(64, cap);
    if (!p) cap = 0;
  }
  return p;
}

}  // namespace olc_mm
