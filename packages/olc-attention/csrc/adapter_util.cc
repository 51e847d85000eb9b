#include "adapter_util.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "attn_naive.h"

namespace olc_attn {

const olc_core_api* g_api = nullptr;

int storage_of(int32_t dtype) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: return kF32;
    case OLC_DTYPE_FLOAT16: return kF16;
    case OLC_DTYPE_BFLOAT16: return kBF16;
    default: return -1;
  }
}

size_t storage_size(int dt) { return dt == kF32 ? 4 : 2; }

std::string shape_str(int32_t ndim, const int64_t* shape) {
  std::string s = "[";
  for (int32_t i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}
std::string shape_str(const olc_tensor& t) { return shape_str(t.ndim, t.shape); }
std::string shape_str(const std::vector<int64_t>& s) {
  return shape_str(static_cast<int32_t>(s.size()), s.data());
}

bool fail(char* error, size_t size, const char* fmt, ...) {
  if (error && size) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(error, size, fmt, ap);
    va_end(ap);
  }
  return false;
}

const olc_attribute* Attrs::find(const char* name) const {
  for (int32_t i = 0; i < node_->n_attributes; ++i)
    if (node_->attributes[i].name && std::strcmp(node_->attributes[i].name, name) == 0) return &node_->attributes[i];
  return nullptr;
}

bool Attrs::only(const std::vector<const char*>& known) {
  for (int32_t i = 0; i < node_->n_attributes; ++i) {
    const char* nm = node_->attributes[i].name ? node_->attributes[i].name : "";
    bool ok = false;
    for (const char* k : known) ok = ok || std::strcmp(k, nm) == 0;
    if (!ok) return fail(error_, es_, "unknown attribute '%s'", nm);
  }
  return true;
}

bool Attrs::get_int(const char* name, int64_t* v, bool* present) {
  const olc_attribute* a = find(name);
  if (present) *present = a != nullptr;
  if (!a) return true;
  if (a->type != OLC_ATTR_INT) return fail(error_, es_, "attribute '%s' must be an int, got type code %d", name, a->type);
  *v = a->i;
  return true;
}

bool Attrs::get_float(const char* name, float* v, bool* present) {
  const olc_attribute* a = find(name);
  if (present) *present = a != nullptr;
  if (!a) return true;
  if (a->type != OLC_ATTR_FLOAT)
    return fail(error_, es_, "attribute '%s' must be a float, got type code %d", name, a->type);
  *v = static_cast<float>(a->f);
  return true;
}

bool Attrs::get_string(const char* name, std::string* v, bool* present) {
  const olc_attribute* a = find(name);
  if (present) *present = a != nullptr;
  if (!a) return true;
  if (a->type != OLC_ATTR_STRING || !a->s)
    return fail(error_, es_, "attribute '%s' must be a string, got type code %d", name, a->type);
  *v = a->s;
  return true;
}

int32_t RunCtx::err(const char* fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return g_api->set_error(ctx, msg);
}

EngineTuning Kernel::tuning() const {
  EngineTuning t;
  if (rows_param) t.rows = std::max<int64_t>(1, g_api->tuning_read_int(rows_param));
  if (split_param) t.split_min_keys = std::max<int64_t>(1, g_api->tuning_read_int(split_param));
  return t;
}

void init_common(Kernel* k, const olc_node_info* node, bool naive, const char* kernel) {
  k->naive = naive;
  k->n_inputs = node->n_inputs;
  k->n_outputs = node->n_outputs;
  k->in_dtypes.assign(node->input_dtypes, node->input_dtypes + node->n_inputs);
  k->out_dtypes.assign(node->output_dtypes, node->output_dtypes + node->n_outputs);
  if (naive) return;
  const int32_t level = g_api->simd_level();
  k->isa = level >= OLC_SIMD_AVX512 ? avx512::kernels() : level >= OLC_SIMD_AVX2 ? avx2::kernels() : scalar::kernels();
  k->isa_name = k->isa->isa;
  // Query rows per work item (every query head of a kv group together) and
  // the fewest keys of one split-KV part.
  k->rows_param = g_api->tuning_declare_int(kLibrary, kernel, k->isa_name, OLC_DTYPE_FLOAT, "rows_per_item", 64);
  k->split_param = g_api->tuning_declare_int(kLibrary, kernel, k->isa_name, OLC_DTYPE_FLOAT, "split_min_keys", 256);
}

void* alloc_out(RunCtx& c, const Kernel& k, int32_t o, int32_t dtype, const std::vector<int64_t>& shape, bool* ok) {
  *ok = true;
  if (o >= k.n_outputs) return nullptr;
  if (o > 0 && !k.wants_out(o)) {
    const int64_t zero = 0;
    g_api->allocate_output(c.ctx, o, dtype, 1, &zero);
    return nullptr;
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  void* p = g_api->allocate_output(c.ctx, o, dtype, static_cast<int32_t>(shape.size()), shape.data());
  if (!p && n > 0) *ok = false;
  return p;
}

std::vector<int64_t> read_int64(const olc_tensor& t) {
  const int64_t n = olc_element_count(&t);
  const int64_t* p = static_cast<const int64_t*>(t.data);
  return std::vector<int64_t>(p, p + n);
}

std::vector<int64_t> read_int32(const olc_tensor& t) {
  const int64_t n = olc_element_count(&t);
  const int32_t* p = static_cast<const int32_t*>(t.data);
  return std::vector<int64_t>(p, p + n);
}

std::vector<float> read_floats(const Kernel& k, int dt, const olc_tensor& t) {
  const int64_t n = olc_element_count(&t);
  std::vector<float> out(static_cast<size_t>(n));
  if (n == 0) return out;
  if (k.isa) {
    k.isa->to_f32(dt, t.data, out.data(), n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<float>(naive::load(dt, t.data, i));
  }
  return out;
}

// ---------------------------------------------------------------- vtables

namespace {

struct Entry {
  OpEntry op;
  std::string names[2];
  olc_kernel_vtable vt[2];
};

std::vector<Entry>& entries() {
  static std::vector<Entry> e;
  return e;
}

void* create_impl(const olc_core_api* api, const olc_node_info* node, char* error, size_t es, bool naive) {
  for (const Entry& e : entries()) {
    const char* dom = node->domain ? node->domain : "ai.onnx";
    if (std::strcmp(e.op.domain, dom) == 0 && node->op_type && std::strcmp(e.op.op, node->op_type) == 0) {
      try {
        return e.op.factory(node, naive, error, es);
      } catch (const std::bad_alloc&) {
        fail(error, es, "out of memory");
        return nullptr;
      }
    }
  }
  fail(error, es, "op %s is not an operator of olc_attention", node->op_type ? node->op_type : "?");
  return nullptr;
}

void* create_opt(const olc_core_api* api, const olc_node_info* node, char* error, size_t es) {
  return create_impl(api, node, error, es, false);
}
void* create_naive(const olc_core_api* api, const olc_node_info* node, char* error, size_t es) {
  return create_impl(api, node, error, es, true);
}

int32_t run_fn(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const Kernel* k = static_cast<const Kernel*>(state);
  RunCtx c{ctx};
  if (n_inputs != k->n_inputs) return c.err("expects %d inputs, got %d", k->n_inputs, n_inputs);
  if (n_outputs != k->n_outputs) return c.err("expects %d outputs, got %d", k->n_outputs, n_outputs);
  for (int32_t i = 0; i < n_inputs; ++i) {
    const olc_tensor& t = inputs[i];
    if (!k->has_in(i)) {
      if (t.dtype != OLC_DTYPE_UNDEFINED) return c.err("input %d was absent when the kernel was created", i);
      continue;
    }
    if (t.dtype != k->in_dtypes[static_cast<size_t>(i)])
      return c.err("input %d has type %s, the kernel was created for %s", i, olc_dtype_name(t.dtype),
                   olc_dtype_name(k->in_dtypes[static_cast<size_t>(i)]));
    const int64_t cnt = olc_element_count(&t);
    if (cnt < 0) return c.err("input %d has a negative dimension or too many elements", i);
    if (cnt > 0 && t.data == nullptr) return c.err("input %d has no data", i);
  }
  try {
    const int32_t rc = k->run(c, n_inputs, inputs, n_outputs);
    if (rc == OLC_OK) g_api->record_usage_detail(ctx, k->isa_name);
    return rc;
  } catch (const std::bad_alloc&) {
    return g_api->set_error(ctx, "out of memory");
  } catch (...) {
    return g_api->set_error(ctx, "internal error");
  }
}

void destroy_fn(void* state) { delete static_cast<Kernel*>(state); }

}  // namespace

void set_core_api(const olc_core_api* api) {
  g_api = api;
  std::vector<Entry>& e = entries();
  if (!e.empty()) return;
  std::vector<OpEntry> ops;
  onnx_ops(&ops);
  ms_ops(&ops);
  ms_encoder_ops(&ops);
  linear_ops(&ops);
  e.resize(ops.size());  // never resized again: the vtables point into it
  for (size_t i = 0; i < ops.size(); ++i) {
    e[i].op = ops[i];
    for (int v = 0; v < 2; ++v) {
      e[i].names[v] = std::string(kLibrary) + (v ? "::Naive" : "::") + ops[i].name;
      olc_kernel_vtable& vt = e[i].vt[v];
      vt.abi_version = OLC_ABI_VERSION;
      vt.flags = ops[i].flags;
      vt.name = e[i].names[v].c_str();
      vt.create = v ? &create_naive : &create_opt;
      vt.run = &run_fn;
      vt.destroy = &destroy_fn;
    }
  }
}

const olc_kernel_vtable* vtable(const std::string& domain, const std::string& op, bool naive) {
  for (Entry& e : entries())
    if (domain == e.op.domain && op == e.op.op) return &e.vt[naive ? 1 : 0];
  return nullptr;
}

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const Entry& e : entries()) out.push_back(std::string(e.op.domain) + "::" + e.op.op);
  return out;
}

}  // namespace olc_attn
