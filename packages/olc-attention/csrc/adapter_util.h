// What every adapter of the family shares: the kernel object behind the
// vtables, attribute reading, error text, output allocation and the
// operator table module.cc hands out. Compiled without ISA flags.
#ifndef OLC_ATTENTION_ADAPTER_UTIL_H_
#define OLC_ATTENTION_ADAPTER_UTIL_H_

#include <cstdarg>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attn_common.h"
#include "attn_driver.h"
#include "olc/kernel_abi.h"

namespace olc_attn {

extern const olc_core_api* g_api;
constexpr const char* kLibrary = "olc_attention";

// -1 when dtype is not a float type of the family.
int storage_of(int32_t dtype);
size_t storage_size(int dt);
std::string shape_str(int32_t ndim, const int64_t* shape);
std::string shape_str(const olc_tensor& t);
std::string shape_str(const std::vector<int64_t>& s);

bool fail(char* error, size_t size, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// The attributes of a node, read with type checks; unknown names refused.
class Attrs {
 public:
  Attrs(const olc_node_info* node, char* error, size_t es) : node_(node), error_(error), es_(es) {}
  // false (error written) when the node has an attribute outside `known`.
  bool only(const std::vector<const char*>& known);
  bool get_int(const char* name, int64_t* v, bool* present = nullptr);
  bool get_float(const char* name, float* v, bool* present = nullptr);
  bool get_string(const char* name, std::string* v, bool* present = nullptr);

 private:
  const olc_attribute* find(const char* name) const;
  const olc_node_info* node_;
  char* error_;
  size_t es_;
};

// Per-run error reporting (the runtime prefixes the node name and op).
struct RunCtx {
  olc_context* ctx;
  int32_t err(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
};

// The kernel behind both vtables of an operator. create() has validated the
// attributes and types; run() validates shapes and values before it
// allocates any output.
struct Kernel {
  virtual ~Kernel() = default;
  virtual int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const = 0;
  bool naive = false;
  const IsaKernels* isa = nullptr;  // null for the naive kernels
  const char* isa_name = "naive";
  int32_t n_inputs = 0, n_outputs = 0;
  std::vector<int32_t> in_dtypes, out_dtypes;  // UNDEFINED: absent
  bool has_in(int i) const { return i < n_inputs && in_dtypes[static_cast<size_t>(i)] != OLC_DTYPE_UNDEFINED; }
  bool wants_out(int o) const { return o < n_outputs && out_dtypes[static_cast<size_t>(o)] != OLC_DTYPE_UNDEFINED; }
  // The engine's tuning for this kernel (declared by init_common).
  const olc_tuning_param* rows_param = nullptr;
  const olc_tuning_param* split_param = nullptr;
  EngineTuning tuning() const;
};

// Fills the common fields; picks the ISA level (optimized) and declares the
// engine's tuning parameters under `kernel`.
void init_common(Kernel* k, const olc_node_info* node, bool naive, const char* kernel);

// Output `o`: allocated with shape when the node names it, else a
// 0-element tensor (an absent optional output the runtime drops) and null
// returned. Output 0, every operator's primary output, is always allocated
// in full (a node may leave even it unnamed). *ok false: the error is set.
void* alloc_out(RunCtx& c, const Kernel& k, int32_t o, int32_t dtype, const std::vector<int64_t>& shape, bool* ok);

// An input's int64 / int32 values, copied as int64 (shape already checked).
std::vector<int64_t> read_int64(const olc_tensor& t);
std::vector<int64_t> read_int32(const olc_tensor& t);

// An input of storage type dt as float32 values.
std::vector<float> read_floats(const Kernel& k, int dt, const olc_tensor& t);

// Rotates every head row of x (rank 4 (B, H, S, hd) or rank 3 (B, S, H * hd))
// into y on the executor, row (b, s) at position rope.pos[b * pos_sb + s].
int32_t run_rope_rows(RunCtx& c, const IsaKernels* k, int dt, int rank, int64_t B, int64_t H, int64_t S, int64_t hd,
                      const void* x, void* y, const Rope& rope);

// One operator: its domain and type, the kernel name (without library and
// Naive prefix), its factory and its vtable flags (OLC_KERNEL_*).
using Factory = Kernel* (*)(const olc_node_info* node, bool naive, char* error, size_t es);
struct OpEntry {
  const char* domain;
  const char* op;
  const char* name;
  Factory factory;
  uint32_t flags;
};
void onnx_ops(std::vector<OpEntry>* out);
void ms_ops(std::vector<OpEntry>* out);
void ms_encoder_ops(std::vector<OpEntry>* out);
void linear_ops(std::vector<OpEntry>* out);  // linear_adapter.cc

void set_core_api(const olc_core_api* api);
// nullptr when (domain, op) is not an operator of the family.
const olc_kernel_vtable* vtable(const std::string& domain, const std::string& op, bool naive);
std::vector<std::string> op_names();

}  // namespace olc_attn

#endif  // OLC_ATTENTION_ADAPTER_UTIL_H_
