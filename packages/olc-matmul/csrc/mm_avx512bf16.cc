// bfloat16 pair microkernel with AVX512_BF16 (vdpbf16ps).
#include <immintrin.h>

#include "mm_common.h"

namespace olc_mm {
namespace avx512bf16 {

UKernelBf16 uk_bf16(int* mr, int* nr) {
  *mr = 0;
  *nr = 0;
  return nullptr;
}

}  // namespace avx512bf16
}  // namespace olc_mm
