// When a large output is written with non-temporal stores: one rule for the
// binary ops, Where and the fused scale-and-mask loop. Adapter TUs only
// (compiled without ISA flags); the stores themselves are in the per-ISA
// loops.
//
// Non-temporal stores send an output's lines to memory without first
// reading them for ownership, a third less traffic for two full inputs,
// but leave nothing of the output in the caches. Measured on a 2-core
// Zen 4 with a 32 MiB L3, float32 Add at 4M elements, alternating with
// onnxruntime in one process (plain -> streamed): two full inputs 1.48 ->
// 1.0 ms on one thread and 0.95 -> 0.73 ms on two; a scalar operand 0.86
// -> 0.64 ms on one thread but 0.54 -> 0.65 ms on two. One core cannot
// drive the write-allocate traffic of a large output, so a serial run
// streams from `stream_min_bytes` of output; several cores keep a working
// set of the L3's size in it, so a split run streams only once the bytes
// it reads and writes reach `stream_parallel_min_bytes`.
#ifndef OLC_ELEMENTWISE_STREAM_POLICY_H_
#define OLC_ELEMENTWISE_STREAM_POLICY_H_

#include <cstdint>

#include "olc/kernel_abi.h"

namespace olc_ew {

// What a run reads and writes: every input once, and its output.
inline int64_t bytes_moved(int n_inputs, const olc_tensor* inputs, int64_t out_bytes) {
  int64_t moved = out_bytes;
  for (int i = 0; i < n_inputs; ++i)
    moved += olc_element_count(&inputs[i]) * static_cast<int64_t>(olc_dtype_size(inputs[i].dtype));
  return moved;
}

struct StreamPolicy {
  const olc_tuning_param* min_bytes = nullptr;
  const olc_tuning_param* parallel_min_bytes = nullptr;

  // The two tuning parameters of one kernel; min_default 0 never streams
  // (ops bound by their arithmetic) unless tuned to.
  void declare(const olc_core_api* api, const char* library, const char* kernel, const char* isa, int32_t dtype,
               int64_t min_default) {
    min_bytes = api->tuning_declare_int(library, kernel, isa, dtype, "stream_min_bytes", min_default);
    parallel_min_bytes = api->tuning_declare_int(library, kernel, isa, dtype, "stream_parallel_min_bytes", 40 << 20);
  }

  // out_bytes: the output's size; moved_bytes: what the run reads and
  // writes; serial: whether it runs on the calling thread alone.
  bool wants(const olc_core_api* api, int64_t out_bytes, int64_t moved_bytes, bool serial) const {
    const int64_t min = api->tuning_read_int(min_bytes);
    if (min <= 0 || out_bytes < min) return false;
    if (serial) return true;
    const int64_t par_min = api->tuning_read_int(parallel_min_bytes);
    return par_min > 0 && moved_bytes >= par_min;
  }
};

}  // namespace olc_ew

#endif  // OLC_ELEMENTWISE_STREAM_POLICY_H_
