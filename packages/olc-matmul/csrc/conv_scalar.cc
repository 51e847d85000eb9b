// The scalar Conv loops (see conv_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "conv_kernels.h"
#include "mm_common.h"

namespace olc_mm {
namespace scalar {

#define OLC_CONV_VB 16
#define OLC_CONV_ISA_NAME "scalar"
#include "conv_kernels.inc"

}  // namespace scalar
}  // namespace olc_mm
