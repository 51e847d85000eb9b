// The avx2 Conv loops (see conv_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "conv_kernels.h"
#include "mm_common.h"
#include "olc/avx2_tail.h"

namespace olc_mm {
namespace avx2 {

#define OLC_CONV_VB 32
#define OLC_CONV_ISA_NAME "avx2"
#include "conv_kernels.inc"

}  // namespace avx2
}  // namespace olc_mm
