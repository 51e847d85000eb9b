// The avx2 LSTM gate math (see lstm_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "lstm_kernels.h"
#include "olc/avx2_tail.h"

namespace olc_mm {
namespace avx2 {

#define OLC_LSTM_VB 32
#define OLC_LSTM_ISA_NAME "avx2"
#include "lstm_kernels.inc"

}  // namespace avx2
}  // namespace olc_mm
