// The family's vtables (one per operator, all sharing create/run/destroy
// trampolines into the Kernel classes) and the helpers of common.h.
#include "registry.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "common.h"

namespace olc_tn {

const olc_core_api* g_api = nullptr;

std::string strf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

int32_t fail(olc_context* ctx, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return g_api->set_error(ctx, buf);
}

const olc_attribute* find_attr(const olc_node_info* node, const char* name) {
  for (int32_t k = 0; k < node->n_attributes; ++k)
    if (node->attributes[k].name && !std::strcmp(node->attributes[k].name, name)) return &node->attributes[k];
  return nullptr;
}

bool check_attr_names(const olc_node_info* node, const char* const* allowed, std::string* error) {
  for (int32_t k = 0; k < node->n_attributes; ++k) {
    const char* n = node->attributes[k].name ? node->attributes[k].name : "";
    bool ok = false;
    for (const char* const* a = allowed; *a; ++a) ok = ok || !std::strcmp(*a, n);
    if (!ok) {
      *error = strf("unknown attribute '%s'", n);
      return false;
    }
  }
  return true;
}

bool attr_int(const olc_node_info* node, const char* name, int64_t def, int64_t* out, std::string* error) {
  const olc_attribute* a = find_attr(node, name);
  if (!a) {
    *out = def;
    return true;
  }
  if (a->type != OLC_ATTR_INT) {
    *error = strf("attribute '%s' must be an int", name);
    return false;
  }
  *out = a->i;
  return true;
}

bool attr_ints(const olc_node_info* node, const char* name, std::vector<int64_t>* out, bool* present,
               std::string* error) {
  const olc_attribute* a = find_attr(node, name);
  *present = a != nullptr;
  out->clear();
  if (!a) return true;
  if (a->type != OLC_ATTR_INTS) {
    *error = strf("attribute '%s' must be a list of ints", name);
    return false;
  }
  out->assign(a->ints, a->ints + a->count);
  return true;
}

int64_t checked_count(const olc_tensor& t) {
  const int64_t n = olc_element_count(&t);
  if (n > 0 && t.data == nullptr) return -1;
  return n;
}

bool read_int_tensor(const olc_tensor& t, const char* what, std::vector<int64_t>* out, std::string* error) {
  out->clear();
  if (t.dtype != OLC_DTYPE_INT64 && t.dtype != OLC_DTYPE_INT32) {
    *error = strf("%s must be int32 or int64, got %s", what, olc_dtype_name(t.dtype));
    return false;
  }
  if (t.ndim > 1) {
    *error = strf("%s must be 1-D, got rank %d", what, t.ndim);
    return false;
  }
  const int64_t n = checked_count(t);
  if (n < 0) {
    *error = strf("%s has an invalid shape or no data", what);
    return false;
  }
  out->resize(static_cast<size_t>(n));
  if (t.dtype == OLC_DTYPE_INT64) {
    if (n) std::memcpy(out->data(), t.data, static_cast<size_t>(n) * 8);
  } else {
    const int32_t* p = static_cast<const int32_t*>(t.data);
    for (int64_t i = 0; i < n; ++i) (*out)[i] = p[i];
  }
  return true;
}

std::string shape_str(const int64_t* shape, int ndim) {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {
// Tuning handles of the kernels' parallel thresholds, declared once at
// module init (declaring takes the registry's lock; reading is one load).
struct ParParam {
  const char* kernel;
  const olc_tuning_param* handle;
  int64_t fallback = 256 << 10;  // the default threshold
};
ParParam g_par[] = {{"Transpose", nullptr}, {"Gather", nullptr},    {"GatherElements", nullptr},
                    {"Concat", nullptr},    {"Split", nullptr},     {"Slice", nullptr},
                    {"Expand", nullptr},    {"Tile", nullptr},      {"Reduce", nullptr},
                    {"ArgReduce", nullptr}, {"ScatterND", nullptr}, {"TopK", nullptr},
                    {"Pad", nullptr},       {"CumSum", nullptr},    {"GatherND", nullptr},
                    {"ScatterElements", nullptr}, {"OneHot", nullptr}, {"ConstantOfShape", nullptr},
                    {"EyeLike", nullptr},   {"Trilu", nullptr},     {"DepthToSpace", nullptr},
                    {"SpaceToDepth", nullptr}, {"Pool", nullptr, 24 << 10}, {"Resize", nullptr},
                    {"RoiAlign", nullptr},  {"MaxRoiPool", nullptr}, {"GridSample", nullptr},
                    {"Col2Im", nullptr},    {"MaxUnpool", nullptr}, {"GlobalPool", nullptr}};
const olc_tuning_param* g_pool_task = nullptr;
void declare_parallel_params() {
  for (ParParam& p : g_par)
    p.handle = g_api->tuning_declare_int(kLibrary, p.kernel, "any", OLC_DTYPE_UNDEFINED, "parallel_min_bytes", p.fallback);
  g_pool_task = g_api->tuning_declare_int(kLibrary, "Pool", "any", OLC_DTYPE_UNDEFINED, "task_bytes", 64 << 10);
}
}  // namespace

int64_t parallel_min_bytes(const char* kernel) {
  for (const ParParam& p : g_par)
    if (!std::strcmp(p.kernel, kernel)) return p.handle ? g_api->tuning_read_int(p.handle) : p.fallback;
  return 256 << 10;
}

int64_t pool_task_bytes() { return g_pool_task ? g_api->tuning_read_int(g_pool_task) : 64 << 10; }

void parallel_copy(olc_context* ctx, void* dst, const void* src, int64_t n, int64_t min_parallel_bytes) {
  constexpr int64_t kChunk = 64 << 10;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  par_for(ctx, chunks, 1, n, min_parallel_bytes, [&](int64_t b, int64_t e) {
    const int64_t lo = b * kChunk, hi = std::min(n, e * kChunk);
    if (hi > lo) std::memcpy(d + lo, s + lo, static_cast<size_t>(hi - lo));
  });
}

namespace {
template <class U>
void fill_typed(void* dst, int64_t lo, int64_t hi, const void* value) {
  U v;
  std::memcpy(&v, value, sizeof v);
  U* d = static_cast<U*>(dst);
  for (int64_t i = lo; i < hi; ++i) d[i] = v;
}
}  // namespace

void parallel_fill(olc_context* ctx, void* dst, int64_t n, size_t es, const void* value, int64_t min_parallel_bytes) {
  constexpr int64_t kChunk = 64 << 10;  // bytes per range
  const int64_t per = std::max<int64_t>(1, kChunk / static_cast<int64_t>(es));
  const int64_t chunks = (n + per - 1) / per;
  par_for(ctx, chunks, 1, n * static_cast<int64_t>(es), min_parallel_bytes, [&](int64_t b, int64_t e) {
    const int64_t lo = b * per, hi = std::min(n, e * per);
    switch (es) {
      case 1: std::memset(static_cast<char*>(dst) + lo, *static_cast<const uint8_t*>(value), static_cast<size_t>(hi - lo)); break;
      case 2: fill_typed<uint16_t>(dst, lo, hi, value); break;
      case 4: fill_typed<uint32_t>(dst, lo, hi, value); break;
      default: fill_typed<uint64_t>(dst, lo, hi, value); break;
    }
  });
}

// ---------------------------------------------------------------- vtables

namespace {

struct Entry {
  std::string op;
  Factory factory;
  std::string name;
  olc_kernel_vtable vt;
};

std::vector<Entry>& entries() {
  static std::vector<Entry> e;
  return e;
}

void* k_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t error_size) {
  std::string err;
  for (const Entry& e : entries()) {
    if (e.op == node->op_type) {
      Kernel* k = nullptr;
      try {
        k = e.factory(node, &err);
      } catch (const std::bad_alloc&) {
        err = "out of memory";
      }
      if (!k && error && error_size) std::snprintf(error, error_size, "%s", err.empty() ? "refused" : err.c_str());
      return k;
    }
  }
  if (error && error_size) std::snprintf(error, error_size, "op %s is not in olc_tensor", node->op_type);
  return nullptr;
}

int32_t k_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  try {
    return static_cast<const Kernel*>(state)->run(ctx, n_inputs, inputs, n_outputs);
  } catch (const std::bad_alloc&) {
    return g_api->set_error(ctx, "out of memory");
  }
}

void k_destroy(void* state) { delete static_cast<Kernel*>(state); }

}  // namespace

void register_all() {
  auto& es = entries();
  if (!es.empty()) return;
  declare_parallel_params();
  for (const auto& [op, f] : factories()) es.push_back({op, f, std::string("olc_tensor::") + op, {}});
  for (Entry& e : es) {
    e.vt.abi_version = OLC_ABI_VERSION;
    e.vt.flags = 0;  // outputs never alias inputs
    e.vt.name = e.name.c_str();
    e.vt.create = &k_create;
    e.vt.run = &k_run;
    e.vt.destroy = &k_destroy;
  }
}

const olc_kernel_vtable* vtable_of(const std::string& op) {
  for (const Entry& e : entries())
    if (e.op == op) return &e.vt;
  return nullptr;
}

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const Entry& e : entries()) out.push_back(e.op);
  return out;
}

std::vector<std::pair<std::string, Factory>> factories() {
  return {
      {"Transpose", &make_transpose},
      {"Gather", &make_gather},
      {"GatherElements", &make_gather_elements},
      {"Concat", &make_concat},
      {"Split", &make_split},
      {"Slice", &make_slice},
      {"Expand", &make_expand},
      {"Tile", &make_tile},
      {"Cast", &make_cast},
      {"CastLike", &make_cast_like},
      {"ReduceSum", &make_reduce_sum},
      {"ReduceMean", &make_reduce_mean},
      {"ReduceMax", &make_reduce_max},
      {"ReduceMin", &make_reduce_min},
      {"ArgMax", &make_argmax},
      {"ArgMin", &make_argmin},
      {"ScatterND", &make_scatter_nd},
      {"NonZero", &make_nonzero},
      {"TopK", &make_topk},
      {"Pad", &make_pad},
      {"ReduceProd", &make_reduce_prod},
      {"ReduceL1", &make_reduce_l1},
      {"ReduceL2", &make_reduce_l2},
      {"ReduceLogSumExp", &make_reduce_log_sum_exp},
      {"ReduceSumSquare", &make_reduce_sum_square},
      {"CumSum", &make_cumsum},
      {"GatherND", &make_gather_nd},
      {"ScatterElements", &make_scatter_elements},
      {"OneHot", &make_one_hot},
      {"ConstantOfShape", &make_constant_of_shape},
      {"Range", &make_range},
      {"EyeLike", &make_eye_like},
      {"Trilu", &make_trilu},
      {"DepthToSpace", &make_depth_to_space},
      {"SpaceToDepth", &make_space_to_depth},
      {"QuantizeLinear", &make_quantize_linear},
      {"DequantizeLinear", &make_dequantize_linear},
      {"DynamicQuantizeLinear", &make_dynamic_quantize_linear},
      {"MaxPool", &make_max_pool},
      {"AveragePool", &make_average_pool},
      {"LpPool", &make_lp_pool},
      {"GlobalMaxPool", &make_global_max_pool},
      {"GlobalAveragePool", &make_global_average_pool},
      {"GlobalLpPool", &make_global_lp_pool},
      {"Resize", &make_resize},
      {"Upsample", &make_upsample},
      {"RoiAlign", &make_roi_align},
      {"MaxRoiPool", &make_max_roi_pool},
      {"GridSample", &make_grid_sample},
      {"Col2Im", &make_col2im},
      {"MaxUnpool", &make_max_unpool},
  };
}

}  // namespace olc_tn
