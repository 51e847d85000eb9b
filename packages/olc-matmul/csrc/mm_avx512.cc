// The avx512 float kernels (see mm_kernels.inc). Compiled with this level's
// flags only; entered after the runtime check for the level has passed.
#include <immintrin.h>

#include <algorithm>

#include "mm_common.h"

namespace olc_mm {
namespace avx512 {

#define OLC_VB 64
#define OLC_MR_F32 12
#define OLC_NV_F32 2
#define OLC_MR_F64 12
#define OLC_NV_F64 2
#define OLC_ISA_NAME "avx512"
#include "mm_kernels.inc"

void nbits_gemv_generic(const NbGemv* p, int64_t n0, int64_t n1) { nbits_gemv(p, n0, n1); }

const IsaKernels* kernels() {
  static const IsaKernels table = [] {
    IsaKernels t = make_table();
    t.nbits_gemv = &nbits_gemv_fast;        // nbits_avx512.cc
    t.nbits_dequant = &nbits_dequant_fast;  // nbits_avx512.cc
    return t;
  }();
  return &table;
}

}  // namespace avx512
}  // namespace olc_mm
