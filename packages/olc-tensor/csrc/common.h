// Shared pieces of the tensor family's adapters: the core API pointer, the
// kernel base class behind every vtable, error formatting, attribute
// lookup, shape-tensor reading and the range scheduler.
// Compiled only into portable (no ISA flag) translation units.
#ifndef OLC_TENSOR_COMMON_H_
#define OLC_TENSOR_COMMON_H_

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "olc/kernel_abi.h"

namespace olc_tn {

extern const olc_core_api* g_api;

constexpr const char* kLibrary = "olc_tensor";
constexpr int kMaxRank = 64;

// Every kernel: immutable after create(); run() may be called concurrently.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual int32_t run(olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs,
                      int32_t n_outputs) const = 0;
};

// Factory signature: returns nullptr and fills `error` on refusal.
using Factory = Kernel* (*)(const olc_node_info* node, std::string* error);

std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// set_error with printf formatting; returns OLC_ERROR.
int32_t fail(olc_context* ctx, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

const olc_attribute* find_attr(const olc_node_info* node, const char* name);
// Rejects attributes not in `allowed` (NULL-terminated list).
bool check_attr_names(const olc_node_info* node, const char* const* allowed, std::string* error);
bool attr_int(const olc_node_info* node, const char* name, int64_t def, int64_t* out, std::string* error);
bool attr_ints(const olc_node_info* node, const char* name, std::vector<int64_t>* out, bool* present,
               std::string* error);

// Whether dtype is one a native kernel can move (fixed width, size > 0).
inline bool movable(int32_t dtype) { return olc_dtype_size(dtype) != 0; }

// Reads a 1-D int32/int64 tensor (a shape-valued input) into out.
bool read_int_tensor(const olc_tensor& t, const char* what, std::vector<int64_t>* out, std::string* error);

// The element count of a view; -1 when invalid. Also rejects missing data.
int64_t checked_count(const olc_tensor& t);

std::string shape_str(const int64_t* shape, int ndim);

// Runs fn(begin, end) over [0, n) on the session executor when the work is
// worth it: `work_bytes` is the total bytes the call moves and
// `min_parallel_bytes` the threshold below which it stays serial.
template <class F>
void par_for(olc_context* ctx, int64_t n, int64_t grain, int64_t work_bytes, int64_t min_parallel_bytes,
             F&& fn) {
  if (n <= 0) return;
  if (ctx == nullptr || work_bytes < min_parallel_bytes || n <= grain || g_api->concurrency(ctx) <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  using Fn = typename std::remove_reference<F>::type;
  g_api->parallel_for(
      ctx, n, grain, 0,
      [](void* user, int64_t b, int64_t e) { (*static_cast<Fn*>(user))(b, e); }, &fn);
}

// Bytes under which copies stay on one thread (tuning: parallel_min_bytes).
int64_t parallel_min_bytes(const char* kernel);

// Input bytes of one pooling task (whole planes; tuning: Pool task_bytes).
int64_t pool_task_bytes();

// Copies n bytes; a plain memcpy (the destination never aliases the source).
inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n) std::memcpy(dst, src, n);
}

// Parallel bulk copy of n bytes split into 64-byte aligned chunks.
void parallel_copy(olc_context* ctx, void* dst, const void* src, int64_t n, int64_t min_parallel_bytes);

// Writes the elem_size-byte pattern `value` into n elements at dst (elem_size
// 1, 2, 4 or 8), split across the executor above min_parallel_bytes.
void parallel_fill(olc_context* ctx, void* dst, int64_t n, size_t elem_size, const void* value,
                   int64_t min_parallel_bytes);

}  // namespace olc_tn

#endif  // OLC_TENSOR_COMMON_H_
