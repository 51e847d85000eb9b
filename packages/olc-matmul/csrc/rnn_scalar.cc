// The scalar recurrent gate math (see rnn_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "rnn_kernels.h"

namespace olc_mm {
namespace scalar {

#define OLC_RNN_VB 16
#define OLC_RNN_ISA_NAME "scalar"
#include "rnn_kernels.inc"

}  // namespace scalar
}  // namespace olc_mm
