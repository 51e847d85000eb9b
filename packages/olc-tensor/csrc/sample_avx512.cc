// The avx512 sampling loops (see sample_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "sample_kernels.h"

namespace olc_tn {
namespace avx512 {

#define OLC_SAMPLE_VB 64
#define OLC_SAMPLE_ISA "avx512"
#include "sample_kernels.inc"

}  // namespace avx512
}  // namespace olc_tn
