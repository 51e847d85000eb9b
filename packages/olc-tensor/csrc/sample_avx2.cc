// The avx2 sampling loops (see sample_kernels.inc). Compiled with this
// level's flags only; entered after the runtime check for the level.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "sample_kernels.h"

namespace olc_tn {
namespace avx2 {

#define OLC_SAMPLE_VB 32
#define OLC_SAMPLE_ISA "avx2"
#include "sample_kernels.inc"

}  // namespace avx2
}  // namespace olc_tn
