// The scalar Einsum loop nests (see einsum_loops.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <algorithm>
#include <cstring>

#include "einsum_loops.h"
#include "mm_common.h"

namespace olc_mm {
namespace scalar {

#define OLC_EINSUM_ISA_NAME "scalar"
#include "einsum_loops.inc"

}  // namespace scalar
}  // namespace olc_mm
