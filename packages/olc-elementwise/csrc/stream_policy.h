// When a large output is written with non-temporal stores: one rule for the
// binary ops, Where, Sum/Mean/Min/Max and the fused scale-and-mask loop.
// Adapter TUs only (compiled without ISA flags); the stores themselves are
// in the per-ISA loops.
//
// Non-temporal stores send an output's lines to memory without first
// reading them for ownership, a third less traffic for two full inputs,
// but leave nothing of the output in the caches. Measured on a 2-core
// Zen 4 whose 32 MiB L3 is shared with other tenants, float32 Mul and Less
// repeated over the same buffers (plain -> streamed, µs):
//
// * One thread: what decides is whether the inputs would stay in the L3
//   with the output beside them. A scalar operand reading 8 MiB 224 -> 328,
//   10 MiB 301 -> 372 (and 356 -> 380), 12 MiB 539 -> 489, 16 MiB 839 ->
//   684; two full inputs reading 8 MiB 155 -> 159, 12 MiB 283 -> 250, 16 MiB
//   559 -> 347; Less (a quarter-size bool output) with a scalar operand
//   reading 12 MiB 228 -> 203, 16 MiB 442 -> 291. So a serial run streams
//   once it reads `stream_min_bytes` (12 MiB).
// * Split over two threads, plain stores reach far more bandwidth than
//   non-temporal ones (about 27 GB/s here whatever the thread count), so the
//   inputs must be larger still: a split run streams once it reads
//   `stream_parallel_min_bytes` (24 MiB). A scalar operand reading 16, 20,
//   24 and 32 MiB 491 -> 611, 639 -> 784, 841 -> 921, 1412 -> 1273; two
//   full inputs reading 20, 24, 32 and 64 MiB 400 -> 384, 501 -> 472,
//   950 -> 730 (Add), 2491 -> 1760.
// * Those thresholds are a 32 MiB L3's. With a smaller one the plain
//   stores' advantage goes sooner: on a 2-core Zen 1 (8 MiB L3), Mul with
//   a scalar operand at 4M elements (16 MiB read, 32 MiB with the output)
//   on two threads went 1942 -> 1461 us streamed, and at 1M (8 MiB in all)
//   223 -> 244 (worse). So a split run also streams once its input and
//   output bytes reach `stream_parallel_min_footprint`, by default twice the
//   L3 that the host reports (consistent with every figure above: 64 MiB
//   there, 16 MiB here).
#ifndef OLC_ELEMENTWISE_STREAM_POLICY_H_
#define OLC_ELEMENTWISE_STREAM_POLICY_H_

#include <cstdint>
#include <cstring>

#include "olc/kernel_abi.h"

namespace olc_ew {

// The usage detail of a run that streams at level `isa` ("avx512", "avx2");
// nullptr where the level has no non-temporal stores.
inline const char* stream_detail(const char* isa) {
  if (!std::strcmp(isa, "avx512")) return "avx512,stream";
  if (!std::strcmp(isa, "avx2")) return "avx2,stream";
  return nullptr;
}

// The bytes a run reads: every input once.
inline int64_t bytes_read(int n_inputs, const olc_tensor* inputs) {
  int64_t read = 0;
  for (int i = 0; i < n_inputs; ++i)
    read += olc_element_count(&inputs[i]) * static_cast<int64_t>(olc_dtype_size(inputs[i].dtype));
  return read;
}

// Twice the host's L3 (0 where the OS does not report it): input plus
// output bytes from which a split run no longer keeps its data in the
// cache, so non-temporal stores pay (see above and unary_adapter.cc).
inline int64_t split_stream_footprint(const olc_core_api* api) {
  if (!OLC_API_HAS(api, data_cache_bytes)) return 0;
  return 2 * api->data_cache_bytes(3, nullptr);
}

struct StreamPolicy {
  static constexpr int64_t kSerialMinBytes = int64_t(12) << 20;
  static constexpr int64_t kParallelMinBytes = int64_t(24) << 20;

  const olc_tuning_param* min_bytes = nullptr;
  const olc_tuning_param* parallel_min_bytes = nullptr;
  const olc_tuning_param* parallel_min_footprint = nullptr;

  // The two tuning parameters of one kernel. Ops bound by their arithmetic
  // (streams = false) default to 0: never, unless tuned to.
  void declare(const olc_core_api* api, const char* library, const char* kernel, const char* isa, int32_t dtype,
               bool streams) {
    min_bytes = api->tuning_declare_int(library, kernel, isa, dtype, "stream_min_bytes", streams ? kSerialMinBytes : 0);
    parallel_min_bytes =
        api->tuning_declare_int(library, kernel, isa, dtype, "stream_parallel_min_bytes", kParallelMinBytes);
    parallel_min_footprint = api->tuning_declare_int(library, kernel, isa, dtype, "stream_parallel_min_footprint",
                                                     streams ? split_stream_footprint(api) : 0);
  }

  // read: bytes_read() of the run; written: its output bytes; serial:
  // whether it stays on the calling thread.
  bool wants(const olc_core_api* api, int64_t read, int64_t written, bool serial) const {
    const int64_t min = api->tuning_read_int(min_bytes);
    if (min <= 0) return false;
    if (serial) return read >= min;
    const int64_t par_min = api->tuning_read_int(parallel_min_bytes);
    const int64_t footprint_min = api->tuning_read_int(parallel_min_footprint);
    return (par_min > 0 && read >= par_min) || (footprint_min > 0 && read + written >= footprint_min);
  }
};

}  // namespace olc_ew

#endif  // OLC_ELEMENTWISE_STREAM_POLICY_H_
