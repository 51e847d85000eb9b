// The avx2 recurrent gate math (see rnn_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "rnn_kernels.h"
#include "olc/avx2_tail.h"

namespace olc_mm {
namespace avx2 {

#define OLC_RNN_VB 32
#define OLC_RNN_ISA_NAME "avx2"
#include "rnn_kernels.inc"

}  // namespace avx2
}  // namespace olc_mm
