// Adapters: attribute and type validation, variant choice, tuning handles
// and the shared range scheduler. Compiled without ISA flags.
#include "unary_adapter.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

#include "stream_policy.h"
#include "unary_common.h"

namespace olc_ew {
namespace {

const olc_core_api* g_api = nullptr;

constexpr const char* kLibrary = "olc_elementwise";

// Cheap ops are memory-bound: waking threads only pays off on large
// tensors. Costly ops (transcendentals) pay it off much earlier.
enum class Cost { kCheap, kCostly };

struct AttrSpec {
  const char* name;
  int32_t type;
  double f;         // OLC_ATTR_FLOAT default
  int64_t i;        // OLC_ATTR_INT default
  const char* s;    // OLC_ATTR_STRING default
};

struct OpSpec {
  const char* name;
  Op op;
  Cost cost;
  bool bool_out;
  std::vector<AttrSpec> attrs;
  olc_kernel_vtable vtable;
};

// Defaults are the float32 values ONNX stores in the schema.
const AttrSpec kAlpha001{"alpha", OLC_ATTR_FLOAT, 0.009999999776482582, 0, nullptr};
const AttrSpec kAlpha1{"alpha", OLC_ATTR_FLOAT, 1.0, 0, nullptr};

std::vector<OpSpec>& specs() {
  static std::vector<OpSpec> s = [] {
    std::vector<OpSpec> v = {
        {"Abs", Op::Abs, Cost::kCheap, false, {}, {}},
        {"Neg", Op::Neg, Cost::kCheap, false, {}, {}},
        {"Exp", Op::Exp, Cost::kCostly, false, {}, {}},
        {"Log", Op::Log, Cost::kCostly, false, {}, {}},
        {"Sqrt", Op::Sqrt, Cost::kCheap, false, {}, {}},
        {"Reciprocal", Op::Reciprocal, Cost::kCheap, false, {}, {}},
        {"Sigmoid", Op::Sigmoid, Cost::kCostly, false, {}, {}},
        {"HardSigmoid", Op::HardSigmoid, Cost::kCheap, false,
         {{"alpha", OLC_ATTR_FLOAT, 0.20000000298023224, 0, nullptr},
          {"beta", OLC_ATTR_FLOAT, 0.5, 0, nullptr}}, {}},
        {"Tanh", Op::Tanh, Cost::kCostly, false, {}, {}},
        {"Relu", Op::Relu, Cost::kCheap, false, {}, {}},
        {"LeakyRelu", Op::LeakyRelu, Cost::kCheap, false, {kAlpha001}, {}},
        {"Elu", Op::Elu, Cost::kCostly, false, {kAlpha1}, {}},
        {"Selu", Op::Selu, Cost::kCostly, false,
         {{"alpha", OLC_ATTR_FLOAT, 1.6732631921768188, 0, nullptr},
          {"gamma", OLC_ATTR_FLOAT, 1.0507010221481323, 0, nullptr}}, {}},
        {"Softplus", Op::Softplus, Cost::kCostly, false, {}, {}},
        {"Gelu", Op::Gelu, Cost::kCostly, false, {{"approximate", OLC_ATTR_STRING, 0, 0, "none"}}, {}},
        {"Erf", Op::Erf, Cost::kCostly, false, {}, {}},
        {"Floor", Op::Floor, Cost::kCheap, false, {}, {}},
        {"Ceil", Op::Ceil, Cost::kCheap, false, {}, {}},
        {"Round", Op::Round, Cost::kCheap, false, {}, {}},
        {"Sign", Op::Sign, Cost::kCheap, false, {}, {}},
        {"Sin", Op::Sin, Cost::kCostly, false, {}, {}},
        {"Cos", Op::Cos, Cost::kCostly, false, {}, {}},
        {"IsNaN", Op::IsNaN, Cost::kCheap, true, {}, {}},
        {"IsInf", Op::IsInf, Cost::kCheap, true,
         {{"detect_negative", OLC_ATTR_INT, 0, 1, nullptr},
          {"detect_positive", OLC_ATTR_INT, 0, 1, nullptr}}, {}},
        {"Not", Op::Not, Cost::kCheap, false, {}, {}},
        {"HardSwish", Op::HardSwish, Cost::kCheap, false, {}, {}},
        {"Mish", Op::Mish, Cost::kCostly, false, {}, {}},
        {"Softsign", Op::Softsign, Cost::kCheap, false, {}, {}},
        {"Celu", Op::Celu, Cost::kCostly, false, {kAlpha1}, {}},
        {"ThresholdedRelu", Op::ThresholdedRelu, Cost::kCheap, false, {kAlpha1}, {}},
        {"Shrink", Op::Shrink, Cost::kCheap, false,
         {{"bias", OLC_ATTR_FLOAT, 0.0, 0, nullptr}, {"lambd", OLC_ATTR_FLOAT, 0.5, 0, nullptr}}, {}},
        {"Tan", Op::Tan, Cost::kCostly, false, {}, {}},
        {"Asin", Op::Asin, Cost::kCostly, false, {}, {}},
        {"Acos", Op::Acos, Cost::kCostly, false, {}, {}},
        {"Atan", Op::Atan, Cost::kCostly, false, {}, {}},
        {"Sinh", Op::Sinh, Cost::kCostly, false, {}, {}},
        {"Cosh", Op::Cosh, Cost::kCostly, false, {}, {}},
        {"Asinh", Op::Asinh, Cost::kCostly, false, {}, {}},
        {"Acosh", Op::Acosh, Cost::kCostly, false, {}, {}},
        {"Atanh", Op::Atanh, Cost::kCostly, false, {}, {}},
        {"BitwiseNot", Op::BitwiseNot, Cost::kCheap, false, {}, {}},
    };
    return v;
  }();
  return s;
}

const OpSpec* find_spec(const char* op_type) {
  for (const OpSpec& s : specs())
    if (std::strcmp(s.name, op_type) == 0) return &s;
  return nullptr;
}

struct KernelState {
  Op op;
  int32_t in_dtype;
  int32_t out_dtype;
  size_t in_size;
  size_t out_size;
  UnaryFn fn;
  const char* isa;
  UnaryParams params;
  const olc_tuning_param* parallel_min_bytes;
  const olc_tuning_param* block_bytes;
  const olc_tuning_param* max_participants;
  const olc_tuning_param* stream_min_bytes;
  const olc_tuning_param* stream_parallel_min_footprint;
};

// Portable defaults (bytes of input). Tuned on a 2-core Zen 4 with AVX-512;
// override through the tuning registry.
struct TuningDefaults {
  int64_t parallel_min_bytes, block_bytes, max_participants, stream_min_bytes, stream_parallel_min_footprint;
};

// Non-temporal stores pay off only where the loop is memory-bound: at 4M
// float32 elements on one thread, measured alternately in one process, they
// cut Abs 880 -> 615 us but slow Exp 940 -> 1290 us and Sigmoid 1155 ->
// 1640 us, so only the cheap ops stream. A split run streams from twice the
// host's L3 of input and output (split_stream_footprint): on a 2-core Zen 4
// (32 MiB L3) 4M-element Abs on 2 threads ran 610 us streamed against 420
// cached (32 MiB in all), on a 2-core Zen 1 (8 MiB L3) 1251 against 1868
// (and 1M: 242 against 409, 256K: 64 against 41).
TuningDefaults default_tuning(const olc_core_api* api, Cost cost, bool libm_per_element) {
  if (cost == Cost::kCheap) return {256 << 10, 128 << 10, 0, 16 << 20, split_stream_footprint(api)};
  if (libm_per_element) return {8 << 10, 8 << 10, 0, 0, 0};
  return {32 << 10, 32 << 10, 0, 0, 0};
}

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

// The UnaryParams slot of a float attribute: 0 alpha, 1 beta, 2 gamma
// (Shrink's lambd rides in alpha and its bias in beta).
int float_slot(const char* name) {
  if (!std::strcmp(name, "alpha") || !std::strcmp(name, "lambd")) return 0;
  if (!std::strcmp(name, "beta") || !std::strcmp(name, "bias")) return 1;
  if (!std::strcmp(name, "gamma")) return 2;
  return -1;
}

bool apply_attributes(const OpSpec& spec, const olc_node_info* node, Op* op, UnaryParams* p,
                      char* error, size_t error_size) {
  // Defaults first.
  double slots[3] = {0, 0, 0};  // alpha, beta, gamma
  int64_t det_neg = 1, det_pos = 1;
  std::string approximate = "none";
  for (const AttrSpec& a : spec.attrs) {
    const int k = float_slot(a.name);
    if (a.type == OLC_ATTR_FLOAT && k >= 0) slots[k] = a.f;
  }
  for (int32_t k = 0; k < node->n_attributes; ++k) {
    const olc_attribute& at = node->attributes[k];
    const AttrSpec* as = nullptr;
    for (const AttrSpec& a : spec.attrs)
      if (at.name && !std::strcmp(a.name, at.name)) as = &a;
    if (!as) return fail(error, error_size, "unknown attribute '%s'", at.name ? at.name : "");
    if (at.type != as->type)
      return fail(error, error_size, "attribute '%s' has type code %d, expected %d", as->name, at.type, as->type);
    if (as->type == OLC_ATTR_FLOAT) {
      if (!std::isfinite(at.f))
        return fail(error, error_size, "attribute '%s' must be finite, got %g", as->name, at.f);
      const int slot = float_slot(as->name);
      if (slot >= 0) slots[slot] = at.f;
    } else if (as->type == OLC_ATTR_INT) {
      if (at.i != 0 && at.i != 1)
        return fail(error, error_size, "attribute '%s' must be 0 or 1, got %lld", as->name, (long long)at.i);
      if (!std::strcmp(as->name, "detect_negative")) det_neg = at.i;
      else if (!std::strcmp(as->name, "detect_positive")) det_pos = at.i;
    } else if (as->type == OLC_ATTR_STRING) {
      approximate = at.s ? at.s : "";
    }
  }
  *op = spec.op;
  if (spec.op == Op::Gelu) {
    if (approximate == "tanh") *op = Op::GeluTanh;
    else if (approximate != "none")
      return fail(error, error_size, "attribute 'approximate' must be \"none\" or \"tanh\", got \"%s\"",
                  approximate.c_str());
  }
  // Celu divides by alpha.
  if (spec.op == Op::Celu && static_cast<float>(slots[0]) == 0.0f)
    return fail(error, error_size, "attribute 'alpha' must be non-zero (Celu divides by it)");
  // ONNX float attributes are float32: the f32 value is exact, the double
  // one is the same number widened.
  p->alpha = static_cast<float>(slots[0]);
  p->beta = static_cast<float>(slots[1]);
  p->gamma = static_cast<float>(slots[2]);
  p->alpha_d = static_cast<double>(p->alpha);
  p->beta_d = static_cast<double>(p->beta);
  p->gamma_d = static_cast<double>(p->gamma);
  p->detect_negative = det_neg != 0;
  p->detect_positive = det_pos != 0;
  return true;
}

void* unary_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t error_size) {
  const OpSpec* spec = find_spec(node->op_type);
  if (!spec) { fail(error, error_size, "op %s is not a unary op of olc_elementwise", node->op_type); return nullptr; }
  if (node->n_inputs != 1 || node->n_outputs != 1) {
    fail(error, error_size, "expects 1 input and 1 output, got %d and %d", node->n_inputs, node->n_outputs);
    return nullptr;
  }
  const int32_t in_dtype = node->input_dtypes[0];
  Op op;
  UnaryParams params;
  if (!apply_attributes(*spec, node, &op, &params, error, error_size)) return nullptr;

  // Highest level first; a level without a variant for (op, dtype) falls
  // through. The scalar level defines what is supported at all.
  const int32_t level = api->simd_level();
  UnaryFn fn = nullptr;
  const char* isa = "scalar";
  if (level >= OLC_SIMD_AVX512 && (fn = avx512::select(op, in_dtype))) isa = "avx512";
  else if (level >= OLC_SIMD_AVX2 && (fn = avx2::select(op, in_dtype))) isa = "avx2";
  else fn = scalar::select(op, in_dtype);
  if (!fn) {
    fail(error, error_size, "unsupported input type %s", olc_dtype_name(in_dtype));
    return nullptr;
  }
  const int32_t out_dtype = spec->bool_out ? OLC_DTYPE_BOOL : in_dtype;
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != out_dtype) {
    fail(error, error_size, "output type %s does not match the op's output type %s",
         olc_dtype_name(node->output_dtypes[0]), olc_dtype_name(out_dtype));
    return nullptr;
  }

  KernelState* st = new (std::nothrow) KernelState();
  if (!st) { fail(error, error_size, "out of memory"); return nullptr; }
  st->op = op;
  st->in_dtype = in_dtype;
  st->out_dtype = out_dtype;
  st->in_size = olc_dtype_size(in_dtype);
  st->out_size = olc_dtype_size(out_dtype);
  st->fn = fn;
  st->isa = isa;
  st->params = params;
  // Costly float64 ops call libm per element at every level.
  const bool libm = spec->cost == Cost::kCostly && (in_dtype == OLC_DTYPE_DOUBLE || !std::strcmp(isa, "scalar"));
  const TuningDefaults d = default_tuning(api, spec->cost, libm);
  const char* kname = (op == Op::GeluTanh) ? "Gelu_tanh" : spec->name;
  st->parallel_min_bytes = api->tuning_declare_int(kLibrary, kname, isa, in_dtype, "parallel_min_bytes", d.parallel_min_bytes);
  st->block_bytes = api->tuning_declare_int(kLibrary, kname, isa, in_dtype, "block_bytes", d.block_bytes);
  st->max_participants = api->tuning_declare_int(kLibrary, kname, isa, in_dtype, "max_participants", d.max_participants);
  st->stream_min_bytes = api->tuning_declare_int(kLibrary, kname, isa, in_dtype, "stream_min_bytes", d.stream_min_bytes);
  st->stream_parallel_min_footprint = api->tuning_declare_int(kLibrary, kname, isa, in_dtype,
                                                              "stream_parallel_min_footprint",
                                                              d.stream_parallel_min_footprint);
  return st;
}

struct RangeJob {
  UnaryFn fn;
  const char* x;
  char* y;
  size_t in_size, out_size;
  int64_t n, block;
  const UnaryParams* params;
};

void run_blocks(void* user, int64_t begin, int64_t end) {
  const RangeJob* j = static_cast<const RangeJob*>(user);
  const int64_t lo = begin * j->block;
  const int64_t hi = std::min(end * j->block, j->n);
  if (lo < hi) j->fn(j->x + lo * j->in_size, j->y + lo * j->out_size, hi - lo, j->params);
}

// The one scheduler of the family: serial under the byte threshold (or when
// it is 0), else blocks of block_bytes (a multiple of 64 elements, so each
// block starts 64-byte aligned in a 64-byte aligned output) over the
// session executor.
void schedule(olc_context* ctx, const KernelState* st, const void* x, void* y, int64_t n, UnaryParams* params) {
  const olc_core_api* api = g_api;
  const int64_t in_bytes = n * static_cast<int64_t>(st->in_size);
  const int64_t par_min = api->tuning_read_int(st->parallel_min_bytes);
  if (par_min <= 0 || in_bytes < par_min || api->concurrency(ctx) <= 1) {
    // One core alone cannot drive the write-allocate traffic of a large
    // output (4M-element Abs on one Zen 4 core: 630 us streaming, 860 us
    // cached); a split run streams only past the L3 (default_tuning).
    const int64_t stream_min = api->tuning_read_int(st->stream_min_bytes);
    params->stream = stream_min > 0 && n * static_cast<int64_t>(st->out_size) >= stream_min;
    st->fn(x, y, n, params);
    return;
  }
  const int64_t footprint_min = api->tuning_read_int(st->stream_parallel_min_footprint);
  params->stream = footprint_min > 0 && n * static_cast<int64_t>(st->in_size + st->out_size) >= footprint_min;
  int64_t block = api->tuning_read_int(st->block_bytes) / static_cast<int64_t>(st->in_size);
  block = std::max<int64_t>(64, (block + 63) / 64 * 64);
  const int64_t nblocks = (n + block - 1) / block;
  if (nblocks <= 1) {
    st->fn(x, y, n, params);
    return;
  }
  RangeJob job{st->fn, static_cast<const char*>(x), static_cast<char*>(y), st->in_size, st->out_size, n, block, params};
  const int64_t maxp = api->tuning_read_int(st->max_participants);
  api->parallel_for(ctx, nblocks, 1, static_cast<int32_t>(std::max<int64_t>(0, maxp)), &run_blocks, &job);
}

int32_t unary_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const olc_core_api* api = g_api;
  const KernelState* st = static_cast<const KernelState*>(state);
  char msg[160];
  if (n_inputs != 1 || n_outputs != 1) {
    std::snprintf(msg, sizeof msg, "expects 1 input and 1 output, got %d and %d", n_inputs, n_outputs);
    return api->set_error(ctx, msg);
  }
  const olc_tensor& in = inputs[0];
  if (in.dtype != st->in_dtype) {
    std::snprintf(msg, sizeof msg, "input 0 has type %s, the kernel was created for %s",
                  olc_dtype_name(in.dtype), olc_dtype_name(st->in_dtype));
    return api->set_error(ctx, msg);
  }
  const int64_t n = olc_element_count(&in);
  if (n < 0) return api->set_error(ctx, "input 0 has a negative dimension or too many elements");
  if (n > 0 && in.data == nullptr) return api->set_error(ctx, "input 0 has no data");
  void* y = api->allocate_output(ctx, 0, st->out_dtype, in.ndim, in.shape);
  if (!y && n > 0) return OLC_ERROR;
  api->record_usage_detail(ctx, st->isa);
  if (n == 0) return OLC_OK;
  UnaryParams params = st->params;
  schedule(ctx, st, in.data, y, n, &params);
  return OLC_OK;
}

void unary_destroy(void* state) { delete static_cast<KernelState*>(state); }

struct VtableInit {
  VtableInit() {
    static std::vector<std::string> names;
    names.reserve(specs().size());
    for (OpSpec& s : specs()) {
      names.push_back(std::string("olc_elementwise::") + s.name);
      s.vtable.abi_version = OLC_ABI_VERSION;
      // Element i is read before it is written: safe to run in place when
      // the element types match (not for the BOOL-output predicates).
      s.vtable.flags = s.bool_out ? 0u : OLC_KERNEL_INPLACE_INPUT0;
      s.vtable.name = names.back().c_str();
      s.vtable.create = &unary_create;
      s.vtable.run = &unary_run;
      s.vtable.destroy = &unary_destroy;
    }
  }
};

}  // namespace

void set_core_api(const olc_core_api* api) {
  g_api = api;
  static VtableInit init;
  (void)init;
}

const olc_kernel_vtable* unary_vtable(const std::string& op_type) {
  const OpSpec* s = find_spec(op_type.c_str());
  return s ? &s->vtable : nullptr;
}

std::vector<std::string> unary_op_names() {
  std::vector<std::string> out;
  for (const OpSpec& s : specs()) out.emplace_back(s.name);
  return out;
}

std::vector<AttributeDefault> unary_attribute_defaults(const std::string& op_type) {
  std::vector<AttributeDefault> out;
  const OpSpec* s = find_spec(op_type.c_str());
  if (!s) return out;
  for (const AttrSpec& a : s->attrs) out.push_back({a.name, a.type, a.f, a.i, a.s ? a.s : ""});
  return out;
}

}  // namespace olc_ew
