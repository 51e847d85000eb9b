// Scalar level: the generic per-element loops for every supported pair.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "olc/kernel_abi.h"
#include "unary_common.h"
#include "vmath_shim_scalar.h"

namespace olc_ew {
namespace scalar {

#include "unary_elem.inc"

UnaryFn select(Op op, int32_t dtype) { return select_generic(op, dtype); }

}  // namespace scalar
}  // namespace olc_ew
