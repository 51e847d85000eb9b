// The avx512 Conv loops (see conv_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "conv_kernels.h"
#include "mm_common.h"

namespace olc_mm {
namespace avx512 {

#define OLC_CONV_VB 64
#define OLC_CONV_ISA_NAME "avx512"
#include "conv_kernels.inc"

}  // namespace avx512
}  // namespace olc_mm
