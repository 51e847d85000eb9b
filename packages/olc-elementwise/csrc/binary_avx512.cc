// AVX-512 F/BW/VL/DQ level: the typed loops of binary_elem.inc compiled with this TU's flags.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "olc/kernel_abi.h"
#include "binary_common.h"

namespace olc_ew {
namespace nary_avx512 {

#include "binary_elem.inc"

}  // namespace nary_avx512
}  // namespace olc_ew
