// The scalar float kernels (see mm_kernels.inc). Compiled with this level's
// flags only; entered after the runtime check for the level has passed.
#include <immintrin.h>

#include <algorithm>

#include "mm_common.h"

namespace olc_mm {
namespace scalar {

#define OLC_VB 16
#define OLC_MR_F32 4
#define OLC_NV_F32 2
#define OLC_MR_F64 4
#define OLC_NV_F64 2
#define OLC_ISA_NAME "scalar"
#include "mm_kernels.inc"

const IsaKernels* kernels() {
  static const IsaKernels table = make_table();
  return &table;
}

}  // namespace scalar
}  // namespace olc_mm
