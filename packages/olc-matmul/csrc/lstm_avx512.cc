// The avx512 LSTM gate math (see lstm_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "lstm_kernels.h"

namespace olc_mm {
namespace avx512 {

#define OLC_LSTM_VB 64
#define OLC_LSTM_ISA_NAME "avx512"
#include "lstm_kernels.inc"

}  // namespace avx512
}  // namespace olc_mm
