// The normalization kernels as seen by olc-core: one vtable per operator.
#ifndef OLC_NORMALIZATION_NORM_ADAPTER_H_
#define OLC_NORMALIZATION_NORM_ADAPTER_H_

#include <string>
#include <vector>

#include "olc/kernel_abi.h"

namespace olc_norm {

// Set once at module init, before any vtable is handed out.
void set_core_api(const olc_core_api* api);

// nullptr when op_type is not an operator of this family.
const olc_kernel_vtable* vtable(const std::string& op_type);

std::vector<std::string> op_names();

// The float32 row engine of one ISA level, called directly (tests of the
// engine itself against a float64 oracle, without a session).
// fn: "softmax", "logsoftmax", "moments", "sum_squares", "sum_abs", and
// "softmax_f16", "logsoftmax_f16", "softmax_bf16", "logsoftmax_bf16" (x
// holds float16 / bfloat16 values widened to float32; y is left in float32,
// before its final rounding to the type).
// Returns false when the level is unknown or not available on this CPU.
bool engine_f32(const std::string& isa, const std::string& fn, const float* x, float* y, int64_t n,
                float* out2);

// The element conversions of one ISA level (tests): "f16_to_f32" and
// "bf16_to_f32" read h and write f; "f32_to_f16" and "f32_to_bf16" read f
// and write h. Returns false when the level or the name is unknown or not
// available.
bool engine_convert(const std::string& isa, const std::string& fn, uint16_t* h, float* f, int64_t n);

}  // namespace olc_norm

#endif  // OLC_NORMALIZATION_NORM_ADAPTER_H_
