// The scalar sampling loops (see sample_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <cstddef>
#include <cstdint>

#include "sample_kernels.h"

namespace olc_tn {
namespace scalar {

#define OLC_SAMPLE_VB 16
#define OLC_SAMPLE_ISA "scalar"
#include "sample_kernels.inc"

}  // namespace scalar
}  // namespace olc_tn
