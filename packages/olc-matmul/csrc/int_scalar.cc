// Portable integer microkernel (int16 pairs). Wrapping int32 sums through
// uint32 arithmetic: no signed overflow.
#include "mm_common.h"

namespace olc_mm {
namespace scalar {
namespace {

constexpr int kMR = 4, kNR = 8;

void ukernel(int64_t ng, const uint32_t* Ap, const uint32_t* Bp, int32_t* C, int64_t ldc, int mr, int nr,
             int first) {
  uint32_t acc[kMR][kNR] = {};
  for (int64_t q = 0; q < ng; ++q) {
    for (int i = 0; i < kMR; ++i) {
      const int32_t a0 = static_cast<int16_t>(Ap[i] & 0xffffu), a1 = static_cast<int16_t>(Ap[i] >> 16);
      for (int j = 0; j < kNR; ++j) {
        const int32_t b0 = static_cast<int16_t>(Bp[j] & 0xffffu), b1 = static_cast<int16_t>(Bp[j] >> 16);
        acc[i][j] += static_cast<uint32_t>(a0 * b0 + a1 * b1);
      }
    }
    Ap += kMR;
    Bp += kNR;
  }
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      uint32_t v = acc[i][j];
      if (!first) v += static_cast<uint32_t>(C[i * ldc + j]);
      C[i * ldc + j] = static_cast<int32_t>(v);
    }
}

}  // namespace

IntKernel int_kernel() { return {"scalar", kMR, kNR, 2, &ukernel, nullptr, nullptr, nullptr, nullptr, nullptr}; }

}  // namespace scalar
}  // namespace olc_mm
