// Helpers shared by the multi-input adapters (binary, variadic, Where /
// Clip / SwiGLU): the core API pointer, error formatting, the per-node plan
// cache and the work splitter. Adapter TUs only (compiled without ISA
// flags).
#ifndef OLC_ELEMENTWISE_BINARY_SHARED_H_
#define OLC_ELEMENTWISE_BINARY_SHARED_H_

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <vector>

#include "binary_common.h"
#include "broadcast.h"
#include "stream_policy.h"
#include "olc/kernel_abi.h"

namespace olc_ew {
namespace nary {

constexpr const char* kLibrary = "olc_elementwise";

const olc_core_api* api();

bool fail(char* error, size_t size, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
int32_t run_error(olc_context* ctx, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// The attribute named `name` on the node, or nullptr.
const olc_attribute* find_attribute(const olc_node_info* node, const char* name);
// Fails on attributes outside `known` (a nullptr-terminated list).
bool check_known_attributes(const olc_node_info* node, const char* const* known, char* error, size_t size);

// The ISA level chosen at create(): "avx512", "avx2" or "scalar".
int32_t level();
const char* level_name(int32_t level);

// A bounded LRU cache of broadcast plans keyed by the input shapes (values
// only, no pointers). Thread-safe: run() may be called concurrently.
class PlanCache {
 public:
  static constexpr int kEntries = 8;
  // The plan for these inputs; nullptr with `error` filled when the shapes
  // do not broadcast.
  std::shared_ptr<const BroadcastPlan> get(int n, const olc_tensor* inputs, char* error, size_t size);

 private:
  struct Entry {
    std::vector<int64_t> key;
    std::shared_ptr<const BroadcastPlan> plan;
    uint64_t used = 0;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
  uint64_t tick_ = 0;
};

// What a level offers for writing large outputs with non-temporal stores
// (the *_stream compute variants; stream_policy.h says when): the store
// fence and the usage detail of such a run. All nullptr at the scalar level.
struct StreamLevel {
  void (*fence)() = nullptr;
  const char* detail = nullptr;  // "avx512,stream" or "avx2,stream"
  bool avx512 = false;           // which level's selectors to ask
};
StreamLevel stream_level(const char* isa);

// Validates that each present input has a sane element count and data.
bool check_inputs(olc_context* ctx, int n, const olc_tensor* inputs);

// Splits a plan's traversal over the executor. fn(b0, b1, e0, e1) handles
// blocks [b0, b1) and, inside each, elements [e0, e1) of the inner block:
// with a single-block plan (contiguous and scalar families) the items are
// element ranges of that block; otherwise they are whole inner blocks, so a
// broadcast pattern is only ever split at inner-block boundaries.
struct SplitParams {
  int64_t bytes_per_element;  // bytes read and written per output element
  int64_t parallel_min_bytes; // serial below this (<= 0: always serial)
  int64_t chunk_bytes;        // work per item
  int32_t max_participants;   // <= 0: as many as the session admits
};

using RangeFn = void (*)(void* user, int64_t b0, int64_t b1, int64_t e0, int64_t e1);
// True when run_split would run everything on the calling thread.
bool runs_serial(olc_context* ctx, const BroadcastPlan& plan, const SplitParams& sp);

// Whether a run over this plan writes its output (out_elem_size bytes per
// element) with the level's non-temporal variant: inner blocks of at least
// 1 KiB, so that their plain-stored unaligned ends do not dominate, or of
// whole streaming pieces, which have no such ends ([N,H,W,64] op [64] in
// float32: 256-byte blocks), then the shared rule of stream_policy.h.
bool run_streams(olc_context* ctx, const StreamPolicy& policy, const BroadcastPlan& plan, const SplitParams& sp,
                 int n_inputs, const olc_tensor* inputs, int64_t out_elem_size);
void run_split(olc_context* ctx, const BroadcastPlan& plan, const SplitParams& sp, RangeFn fn, void* user);

// Loop family names, for tuning parameter names.
inline const char* family_param_name(LoopFamily f) {
  switch (f) {
    case LoopFamily::kContiguous: return "parallel_min_bytes_contiguous";
    case LoopFamily::kLeftScalar: return "parallel_min_bytes_left_scalar";
    case LoopFamily::kRightScalar: return "parallel_min_bytes_right_scalar";
    case LoopFamily::kRepeatedBlock: return "parallel_min_bytes_repeated_block";
    case LoopFamily::kInnerVector: return "parallel_min_bytes_inner_vector";
    case LoopFamily::kOuterBroadcast: return "parallel_min_bytes_outer_broadcast";
    default: return "parallel_min_bytes_general";
  }
}

// Per-kernel tuning handles: one byte threshold per loop family, the chunk
// size of a work item and the participant limit.
struct Tuning {
  const olc_tuning_param* par_min[static_cast<int>(LoopFamily::kCount)] = {};
  const olc_tuning_param* chunk_bytes = nullptr;
  const olc_tuning_param* max_participants = nullptr;
  // costly: per-element libm calls or integer division (threads pay off early)
  void declare(const char* kernel, const char* isa, int32_t dtype, bool costly);
  SplitParams params(LoopFamily f, int64_t bytes_per_element) const;
};

// Kernel entry points of the other adapters (registered in binary_adapter.cc).
#define OLC_EW_NARY_ENTRY(prefix)                                                                 \
  void* prefix##_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t size); \
  int32_t prefix##_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, \
                       int32_t n_outputs);                                                        \
  void prefix##_destroy(void* state);
OLC_EW_NARY_ENTRY(variadic)
OLC_EW_NARY_ENTRY(where)
OLC_EW_NARY_ENTRY(clip)
OLC_EW_NARY_ENTRY(swiglu)
#undef OLC_EW_NARY_ENTRY

}  // namespace nary
}  // namespace olc_ew

#endif  // OLC_ELEMENTWISE_BINARY_SHARED_H_
