// Adapters: attribute, type and shape validation, parameter conversion and
// the row / span scheduler over the session executor. Compiled without ISA
// flags; the per-ISA engines (cm_*.cc) and the reference (cm_naive.cc) do
// the arithmetic.
#include "cm_adapter.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cm_common.h"

namespace olc_cm {
namespace {

const olc_core_api* g_api = nullptr;
constexpr const char* kLibrary = "olc_contrib_microsoft";

enum class Op { SkipLN, SkipSLN, BiasGelu, FastGelu, QuickGelu, Gelu, BiasAdd };

struct OpSpec {
  const char* name;
  Op op;
  int min_inputs, max_inputs, max_outputs;
  std::vector<const char*> attrs;
  olc_kernel_vtable vtables[2];  // optimized, naive
};

std::vector<OpSpec>& specs() {
  static std::vector<OpSpec> s = {
      {"SkipLayerNormalization", Op::SkipLN, 3, 5, 4, {"epsilon"}, {}},
      {"SkipSimplifiedLayerNormalization", Op::SkipSLN, 3, 4, 4, {"epsilon"}, {}},
      {"BiasGelu", Op::BiasGelu, 2, 2, 1, {}, {}},
      {"FastGelu", Op::FastGelu, 1, 2, 1, {}, {}},
      {"QuickGelu", Op::QuickGelu, 1, 1, 1, {"alpha"}, {}},
      {"Gelu", Op::Gelu, 1, 1, 1, {}, {}},
      {"BiasAdd", Op::BiasAdd, 3, 3, 1, {}, {}},
  };
  return s;
}

const OpSpec* find_spec(const char* op_type) {
  for (const OpSpec& s : specs())
    if (op_type && std::strcmp(s.name, op_type) == 0) return &s;
  return nullptr;
}

int storage_of(int32_t dtype) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: return kF32;
    case OLC_DTYPE_FLOAT16: return kF16;
    case OLC_DTYPE_BFLOAT16: return kBF16;
    default: return -1;
  }
}

struct KernelState {
  Op op;
  const char* name;
  bool naive = false;
  int32_t dtype = OLC_DTYPE_UNDEFINED;
  int dt = kF32;
  int32_t n_inputs = 0;
  bool present[5] = {false, false, false, false, false};  // inputs
  bool want[4] = {false, false, false, false};            // outputs to produce
  float epsilon = 1e-12f;
  float alpha = 1.702f;
  const IsaKernels* k = nullptr;
  const char* isa = "naive";
  const olc_tuning_param* parallel_min_elements = nullptr;
  const olc_tuning_param* grain_elements = nullptr;
};

bool fail(char* error, size_t size, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
bool fail(char* error, size_t size, const char* fmt, ...) {
  if (error && size) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(error, size, fmt, ap);
    va_end(ap);
  }
  return false;
}

std::string shape_str(int32_t ndim, const int64_t* shape) {
  std::string s = "[";
  for (int32_t i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

const char* input_name(Op op, int i) {
  switch (op) {
    case Op::SkipLN: {
      static const char* n[] = {"input", "skip", "gamma", "beta", "bias"};
      return n[i];
    }
    case Op::SkipSLN: {
      static const char* n[] = {"input", "skip", "gamma", "bias"};
      return n[i];
    }
    case Op::BiasGelu: return i == 0 ? "A" : "B";
    case Op::BiasAdd: {
      static const char* n[] = {"X", "bias", "skip"};
      return n[i];
    }
    default: return i == 0 ? "X" : "bias";
  }
}

// ---------------------------------------------------------------- create

void* cm_create_impl(const olc_core_api* api, const olc_node_info* node, char* error, size_t es, bool naive) {
  const OpSpec* spec = find_spec(node->op_type);
  if (!spec) {
    fail(error, es, "op %s is not an operator of olc_contrib_microsoft", node->op_type);
    return nullptr;
  }
  if (node->n_inputs < spec->min_inputs || node->n_inputs > spec->max_inputs) {
    fail(error, es, "expects %d to %d inputs, got %d", spec->min_inputs, spec->max_inputs, node->n_inputs);
    return nullptr;
  }
  if (node->n_outputs < 1 || node->n_outputs > spec->max_outputs) {
    fail(error, es, "expects 1 to %d outputs, got %d", spec->max_outputs, node->n_outputs);
    return nullptr;
  }
  std::unique_ptr<KernelState> st(new (std::nothrow) KernelState());
  if (!st) {
    fail(error, es, "out of memory");
    return nullptr;
  }
  st->op = spec->op;
  st->name = spec->name;
  st->naive = naive;
  st->n_inputs = node->n_inputs;
  for (int32_t k = 0; k < node->n_attributes; ++k) {
    const olc_attribute& a = node->attributes[k];
    const char* nm = a.name ? a.name : "";
    bool known = false;
    for (const char* s : spec->attrs) known = known || std::strcmp(s, nm) == 0;
    if (!known) {
      fail(error, es, "unknown attribute '%s'", nm);
      return nullptr;
    }
    if (a.type != OLC_ATTR_FLOAT) {
      fail(error, es, "attribute '%s' must be a float (type code %d), got type code %d", nm, OLC_ATTR_FLOAT, a.type);
      return nullptr;
    }
    if (!std::isfinite(a.f)) {
      fail(error, es, "attribute '%s' must be finite, got %g", nm, a.f);
      return nullptr;
    }
    if (!std::strcmp(nm, "epsilon")) {
      if (a.f < 0) {
        fail(error, es, "attribute 'epsilon' must be >= 0, got %g", a.f);
        return nullptr;
      }
      st->epsilon = static_cast<float>(a.f);
    } else if (!std::strcmp(nm, "alpha")) {
      st->alpha = static_cast<float>(a.f);
    }
  }
  // Types: every present input has one float type T; outputs 0 and 3 are
  // T, the statistics outputs (1, 2) float32.
  for (int32_t i = 0; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    const bool required = i < spec->min_inputs;
    if (t == OLC_DTYPE_UNDEFINED) {
      if (required) {
        fail(error, es, "input %d (%s) is required", i, input_name(st->op, i));
        return nullptr;
      }
      continue;
    }
    if (storage_of(t) < 0) {
      fail(error, es, "input %d (%s) has unsupported type %s (expected float32, float16 or bfloat16)", i,
           input_name(st->op, i), olc_dtype_name(t));
      return nullptr;
    }
    if (st->dtype == OLC_DTYPE_UNDEFINED) st->dtype = t;
    if (t != st->dtype) {
      fail(error, es, "input %d (%s) has type %s but input 0 has type %s (the schema requires one type T)", i,
           input_name(st->op, i), olc_dtype_name(t), olc_dtype_name(st->dtype));
      return nullptr;
    }
    st->present[i] = true;
  }
  st->dt = storage_of(st->dtype);
  for (int32_t o = 0; o < node->n_outputs; ++o) {
    const int32_t t = node->output_dtypes[o];
    // The runtime expects every output slot up to n_outputs filled, an
    // absent optional one ("" in the node) included: it is computed and dropped.
    st->want[o] = true;
    if (t == OLC_DTYPE_UNDEFINED) continue;
    const int32_t expect = (o == 1 || o == 2) ? OLC_DTYPE_FLOAT : st->dtype;
    if (t != expect) {
      fail(error, es, "output %d has type %s, expected %s", o, olc_dtype_name(t), olc_dtype_name(expect));
      return nullptr;
    }
  }
  if (naive) {
    st->isa = "naive";
  } else {
    const int32_t level = api->simd_level();
    st->k = level >= OLC_SIMD_AVX512 ? avx512::kernels() : level >= OLC_SIMD_AVX2 ? avx2::kernels() : scalar::kernels();
    st->isa = st->k->isa;
    const bool norm = st->op == Op::SkipLN || st->op == Op::SkipSLN;
    const bool cheap = st->op == Op::BiasAdd || norm;
    // Work below parallel_min_elements runs on the calling thread; above,
    // it is split in ranges of at least grain_elements.
    st->parallel_min_elements = api->tuning_declare_int(kLibrary, spec->name, st->isa, OLC_DTYPE_FLOAT,
                                                        "parallel_min_elements", cheap ? 32768 : 8192);
    st->grain_elements =
        api->tuning_declare_int(kLibrary, spec->name, st->isa, OLC_DTYPE_FLOAT, "grain_elements", cheap ? 16384 : 4096);
  }
  return st.release();
}

void* cm_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t es) {
  return cm_create_impl(api, node, error, es, false);
}
void* cm_create_naive(const olc_core_api* api, const olc_node_info* node, char* error, size_t es) {
  return cm_create_impl(api, node, error, es, true);
}

void cm_destroy(void* state) { delete static_cast<KernelState*>(state); }

// ---------------------------------------------------------------- run

struct Ctx {
  const KernelState* st;
  olc_context* ctx;
  char msg[512];
  int32_t err(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return g_api->set_error(ctx, msg);
  }
};

// A parameter as float32: its own data for float32, else a converted copy.
const float* param_f32(const KernelState* st, const olc_tensor& p, std::vector<float>* buf) {
  const int64_t n = olc_element_count(&p);
  if (st->dt == kF32) return static_cast<const float*>(p.data);
  buf->resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
  if (n > 0) st->k->to_f32[st->dt](p.data, buf->data(), n);
  return buf->data();
}

struct NormJob {
  const KernelState* st;
  SkipRow row;
  const char* x;
  const char* skip;
  int64_t skip_rows;
  char* y;
  char* sum;
  float* mean;
  float* inv;
  size_t es;
  std::atomic<bool>* oom;
};

void norm_rows(void* user, int64_t begin, int64_t end) {
  const NormJob& j = *static_cast<const NormJob*>(user);
  const int64_t H = j.row.H;
  const size_t rb = static_cast<size_t>(H) * j.es;
  std::unique_ptr<float[]> scratch;
  if (!(j.st->dt == kF32 && j.sum)) {
    scratch.reset(new (std::nothrow) float[static_cast<size_t>(H)]);
    if (!scratch) {
      j.oom->store(true);
      return;
    }
  }
  auto fn = j.st->k->skip_norm_row[j.st->dt];
  for (int64_t r = begin; r < end; ++r) {
    float m, iv;
    fn(&j.row, j.x + r * rb, j.skip + (r % j.skip_rows) * rb, j.y + r * rb, j.sum ? j.sum + r * rb : nullptr,
       scratch.get(), &m, &iv);
    if (j.mean) j.mean[r] = m;
    if (j.inv) j.inv[r] = iv;
  }
}

int32_t run_norm(Ctx& c, const olc_tensor* in, int32_t n_inputs) {
  const KernelState* st = c.st;
  const olc_core_api* api = g_api;
  const olc_tensor& x = in[0];
  const olc_tensor& skip = in[1];
  if (x.ndim != 2 && x.ndim != 3)
    return c.err("input must have rank 3 [batch, sequence, hidden] or 2 [tokens, hidden], got shape %s",
                 shape_str(x.ndim, x.shape).c_str());
  const int64_t H = x.shape[x.ndim - 1];
  const int64_t n = olc_element_count(&x);
  const int64_t rows = H > 0 ? n / H : 0;
  int64_t skip_rows = rows;
  bool same = skip.ndim == x.ndim;
  for (int32_t i = 0; same && i < x.ndim; ++i) same = skip.shape[i] == x.shape[i];
  if (!same) {
    bool ok = false;
    if (x.ndim == 3) {
      const bool s3 = skip.ndim == 3 && skip.shape[0] == 1 && skip.shape[1] == x.shape[1] && skip.shape[2] == H;
      const bool s2 = skip.ndim == 2 && skip.shape[0] == x.shape[1] && skip.shape[1] == H;
      ok = s3 || s2;
      skip_rows = x.shape[1];
    }
    if (!ok) {
      const std::string xs = shape_str(x.ndim, x.shape);
      if (x.ndim == 3)
        return c.err("skip has shape %s; for input %s it must be [%lld, %lld, %lld], [1, %lld, %lld] or [%lld, %lld]",
                     shape_str(skip.ndim, skip.shape).c_str(), xs.c_str(), (long long)x.shape[0],
                     (long long)x.shape[1], (long long)H, (long long)x.shape[1], (long long)H, (long long)x.shape[1],
                     (long long)H);
      return c.err("skip has shape %s; for input %s it must have the same shape", shape_str(skip.ndim, skip.shape).c_str(),
                   xs.c_str());
    }
  }
  for (int32_t i = 2; i < n_inputs; ++i) {
    if (!st->present[i]) continue;
    const olc_tensor& p = in[i];
    if (p.ndim != 1 || p.shape[0] != H)
      return c.err("%s has shape %s, expected [%lld] (the hidden size, the last dimension of input %s)",
                   input_name(st->op, i), shape_str(p.ndim, p.shape).c_str(), (long long)H,
                   shape_str(x.ndim, x.shape).c_str());
  }
  if (skip_rows == 0 && rows > 0) return c.err("skip is empty");
  // Validation done: outputs.
  std::vector<int64_t> sshape(x.shape, x.shape + x.ndim);
  sshape.back() = 1;
  void* y = api->allocate_output(c.ctx, 0, st->dtype, x.ndim, x.shape);
  if (!y && n > 0) return OLC_ERROR;
  float* mean = nullptr;
  float* inv = nullptr;
  void* sum = nullptr;
  if (st->want[1]) {
    mean = static_cast<float*>(api->allocate_output(c.ctx, 1, OLC_DTYPE_FLOAT, x.ndim, sshape.data()));
    if (!mean && rows > 0) return OLC_ERROR;
  }
  if (st->want[2]) {
    inv = static_cast<float*>(api->allocate_output(c.ctx, 2, OLC_DTYPE_FLOAT, x.ndim, sshape.data()));
    if (!inv && rows > 0) return OLC_ERROR;
  }
  if (st->want[3]) {
    sum = api->allocate_output(c.ctx, 3, st->dtype, x.ndim, x.shape);
    if (!sum && n > 0) return OLC_ERROR;
  }
  api->record_usage_detail(c.ctx, st->isa);
  if (rows == 0) return OLC_OK;
  if (H == 0) {
    // Empty rows: the statistics of nothing (0 / 0).
    for (int64_t r = 0; r < rows; ++r) {
      if (mean) mean[r] = st->op == Op::SkipSLN ? 0.0f : NAN;
      if (inv) inv[r] = NAN;
    }
    return OLC_OK;
  }
  const int bias_i = st->op == Op::SkipLN ? 4 : 3;
  const bool has_beta = st->op == Op::SkipLN && n_inputs > 3 && st->present[3];
  const bool has_bias = n_inputs > bias_i && st->present[bias_i];
  if (st->naive) {
    naive::skip_norm(st->dt, st->op == Op::SkipSLN, st->epsilon, x.data, skip.data, skip_rows, in[2].data,
                     has_beta ? in[3].data : nullptr, has_bias ? in[bias_i].data : nullptr, rows, H, y, mean, inv, sum);
    return OLC_OK;
  }
  std::vector<float> gb, bb, sb;
  NormJob j{};
  j.st = st;
  j.row.gamma = param_f32(st, in[2], &gb);
  j.row.beta = has_beta ? param_f32(st, in[3], &bb) : nullptr;
  j.row.bias = has_bias ? param_f32(st, in[bias_i], &sb) : nullptr;
  j.row.H = H;
  j.row.eps = st->epsilon;
  j.row.simplified = st->op == Op::SkipSLN;
  j.x = static_cast<const char*>(x.data);
  j.skip = static_cast<const char*>(skip.data);
  j.skip_rows = skip_rows;
  j.y = static_cast<char*>(y);
  j.sum = static_cast<char*>(sum);
  j.mean = mean;
  j.inv = inv;
  j.es = olc_dtype_size(st->dtype);
  std::atomic<bool> oom{false};
  j.oom = &oom;
  const int64_t par_min = api->tuning_read_int(st->parallel_min_elements);
  const int64_t grain_el = std::max<int64_t>(1, api->tuning_read_int(st->grain_elements));
  if (par_min <= 0 || n < par_min || rows < 2 || api->concurrency(c.ctx) <= 1) {
    norm_rows(&j, 0, rows);
  } else {
    api->parallel_for(c.ctx, rows, std::max<int64_t>(1, grain_el / H), 0, &norm_rows, &j);
  }
  if (oom.load()) return c.err("out of memory (row buffers)");
  return OLC_OK;
}

struct ActJob {
  const KernelState* st;
  int act;
  const char* x;
  const char* skip;
  const float* bias;
  int64_t H;
  char* y;
  size_t es;
};

// Work item w: elements [w * kBlock, min(n, (w + 1) * kBlock)).
constexpr int64_t kBlock = 1024;

struct ActRange {
  const ActJob* j;
  int64_t n;
};

void act_range(void* user, int64_t begin, int64_t end) {
  const ActRange& r = *static_cast<const ActRange*>(user);
  const ActJob& j = *r.j;
  const int64_t i0 = begin * kBlock, i1 = std::min(r.n, end * kBlock);
  if (i1 <= i0) return;
  const size_t off = static_cast<size_t>(i0) * j.es;
  j.st->k->act_span[j.st->dt](j.act, j.st->alpha, j.x + off, j.skip ? j.skip + off : nullptr, j.bias, j.H,
                              j.bias ? i0 % j.H : 0, j.y + off, i1 - i0);
}

int32_t run_act(Ctx& c, const olc_tensor* in, int32_t n_inputs) {
  const KernelState* st = c.st;
  const olc_core_api* api = g_api;
  const olc_tensor& x = in[0];
  const int64_t n = olc_element_count(&x);
  int act = kActNone;
  int bias_i = -1, skip_i = -1;
  switch (st->op) {
    case Op::BiasGelu: act = kActGeluErf; bias_i = 1; break;
    case Op::Gelu: act = kActGeluErf; break;
    case Op::FastGelu: act = kActGeluTanh; bias_i = (n_inputs > 1 && st->present[1]) ? 1 : -1; break;
    case Op::QuickGelu: act = kActQuick; break;
    case Op::BiasAdd: act = kActNone; bias_i = 1; skip_i = 2; break;
    default: break;
  }
  if (st->op == Op::BiasAdd && x.ndim != 3)
    return c.err("X must have rank 3 [batch, sequence, channels], got shape %s", shape_str(x.ndim, x.shape).c_str());
  int64_t H = 1;
  if (bias_i >= 0) {
    if (x.ndim < 1) return c.err("%s must have rank >= 1 when a bias is given", input_name(st->op, 0));
    H = x.shape[x.ndim - 1];
    const olc_tensor& b = in[bias_i];
    if (b.ndim != 1 || b.shape[0] != H)
      return c.err("%s has shape %s, expected [%lld] (the last dimension of %s %s)", input_name(st->op, bias_i),
                   shape_str(b.ndim, b.shape).c_str(), (long long)H, input_name(st->op, 0),
                   shape_str(x.ndim, x.shape).c_str());
  }
  if (skip_i >= 0) {
    const olc_tensor& s = in[skip_i];
    bool same = s.ndim == x.ndim;
    for (int32_t i = 0; same && i < x.ndim; ++i) same = s.shape[i] == x.shape[i];
    if (!same)
      return c.err("skip has shape %s, expected the shape of X %s", shape_str(s.ndim, s.shape).c_str(),
                   shape_str(x.ndim, x.shape).c_str());
  }
  void* y = api->allocate_output(c.ctx, 0, st->dtype, x.ndim, x.shape);
  if (!y && n > 0) return OLC_ERROR;
  api->record_usage_detail(c.ctx, st->isa);
  if (n == 0) return OLC_OK;
  if (st->naive) {
    naive::act(st->dt, act, st->alpha, x.data, bias_i >= 0 ? in[bias_i].data : nullptr, H,
               skip_i >= 0 ? in[skip_i].data : nullptr, y, n);
    return OLC_OK;
  }
  std::vector<float> bb;
  ActJob j{};
  j.st = st;
  j.act = act;
  j.x = static_cast<const char*>(x.data);
  j.skip = skip_i >= 0 ? static_cast<const char*>(in[skip_i].data) : nullptr;
  j.bias = bias_i >= 0 ? param_f32(st, in[bias_i], &bb) : nullptr;
  j.H = H;
  j.y = static_cast<char*>(y);
  j.es = olc_dtype_size(st->dtype);
  ActRange r{&j, n};
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int64_t par_min = api->tuning_read_int(st->parallel_min_elements);
  const int64_t grain_el = std::max<int64_t>(kBlock, api->tuning_read_int(st->grain_elements));
  if (par_min <= 0 || n < par_min || blocks < 2 || api->concurrency(c.ctx) <= 1) act_range(&r, 0, blocks);
  else api->parallel_for(c.ctx, blocks, grain_el / kBlock, 0, &act_range, &r);
  return OLC_OK;
}

int32_t cm_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const KernelState* st = static_cast<const KernelState*>(state);
  Ctx c{st, ctx, {}};
  if (n_inputs != st->n_inputs) return c.err("expects %d inputs, got %d", st->n_inputs, n_inputs);
  for (int32_t i = 0; i < n_inputs; ++i) {
    const olc_tensor& t = inputs[i];
    if (!st->present[i]) {
      if (t.dtype != OLC_DTYPE_UNDEFINED) return c.err("input %d was absent when the kernel was created", i);
      continue;
    }
    if (t.dtype != st->dtype)
      return c.err("input %d (%s) has type %s, the kernel was created for %s", i, input_name(st->op, i),
                   olc_dtype_name(t.dtype), olc_dtype_name(st->dtype));
    const int64_t cnt = olc_element_count(&t);
    if (cnt < 0) return c.err("input %d has a negative dimension or too many elements", i);
    if (cnt > 0 && t.data == nullptr) return c.err("input %d has no data", i);
  }
  try {
    return (st->op == Op::SkipLN || st->op == Op::SkipSLN) ? run_norm(c, inputs, n_inputs)
                                                           : run_act(c, inputs, n_inputs);
  } catch (const std::bad_alloc&) {
    return g_api->set_error(ctx, "out of memory");
  } catch (...) {
    return g_api->set_error(ctx, "internal error");
  }
}

struct VtableInit {
  VtableInit() {
    static std::vector<std::string> names;
    names.reserve(2 * specs().size());
    for (OpSpec& s : specs()) {
      for (int v = 0; v < 2; ++v) {
        names.push_back(std::string(kLibrary) + (v ? "::Naive" : "::") + s.name);
        olc_kernel_vtable& vt = s.vtables[v];
        vt.abi_version = OLC_ABI_VERSION;
        vt.flags = 0;
        vt.name = names.back().c_str();
        vt.create = v ? &cm_create_naive : &cm_create;
        vt.run = &cm_run;
        vt.destroy = &cm_destroy;
      }
    }
  }
};

}  // namespace

void set_core_api(const olc_core_api* api) {
  g_api = api;
  static VtableInit init;
  (void)init;
}

const olc_kernel_vtable* vtable(const std::string& op_type, bool naive) {
  OpSpec* s = const_cast<OpSpec*>(find_spec(op_type.c_str()));
  return s ? &s->vtables[naive ? 1 : 0] : nullptr;
}

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const OpSpec& s : specs()) out.emplace_back(s.name);
  return out;
}

}  // namespace olc_cm
