// The avx512 Einsum loop nests (see einsum_loops.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <algorithm>
#include <cstring>

#include "einsum_loops.h"
#include "mm_common.h"

namespace olc_mm {
namespace avx512 {

#define OLC_EINSUM_ISA_NAME "avx512"
#include "einsum_loops.inc"

}  // namespace avx512
}  // namespace olc_mm
