// The scalar LSTM gate math (see lstm_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <emmintrin.h>

#include <algorithm>
#include <cstdint>

#include "lstm_kernels.h"

namespace olc_mm {
namespace scalar {

#define OLC_LSTM_VB 16
#define OLC_LSTM_ISA_NAME "scalar"
#include "lstm_kernels.inc"

}  // namespace scalar
}  // namespace olc_mm
