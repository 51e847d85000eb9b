// The avx2 float kernels (see mm_kernels.inc). Compiled with this level's
// flags only; entered after the runtime check for the level has passed.
#include <immintrin.h>

#include <algorithm>

#include "mm_common.h"

namespace olc_mm {
namespace avx2 {

#define OLC_VB 32
#define OLC_MR_F32 6
#define OLC_NV_F32 2
#define OLC_MR_F64 6
#define OLC_NV_F64 2
#define OLC_ISA_NAME "avx2"
#include "mm_kernels.inc"

const IsaKernels* kernels() {
  static const IsaKernels table = [] {
    IsaKernels t = make_table();
    t.nbits_dequant = &nbits_dequant_fast;  // nbits_avx2.cc
    return t;
  }();
  return &table;
}

}  // namespace avx2
}  // namespace olc_mm
