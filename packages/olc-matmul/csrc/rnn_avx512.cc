// The avx512 recurrent gate math (see rnn_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "rnn_kernels.h"

namespace olc_mm {
namespace avx512 {

#define OLC_RNN_VB 64
#define OLC_RNN_ISA_NAME "avx512"
#include "rnn_kernels.inc"

}  // namespace avx512
}  // namespace olc_mm
