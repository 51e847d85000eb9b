// Binary adapter: the immutable BinaryKernelDescriptor per node (operator,
// opset, validated attributes, the bound typed functions of the chosen ISA
// level, tuning handles), the per-node broadcast plan cache, input checks
// that run before any output is written, and the work split. Also holds the
// helpers shared by the variadic and Where/Clip/SwiGLU adapters and the
// vtable table of all of them. Compiled without ISA flags.
#include "binary_adapter.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "binary_shared.h"

namespace olc_ew {
namespace nary {

namespace {
const olc_core_api* g_api = nullptr;
}

const olc_core_api* api() { return g_api; }

StreamLevel stream_level(const char* isa) {
  StreamLevel l;
  if (!std::strcmp(isa, "avx512")) l = {&nary_avx512::stream_fence, stream_detail(isa), true};
  else if (!std::strcmp(isa, "avx2")) l = {&nary_avx2::stream_fence, stream_detail(isa), false};
  return l;
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

int32_t run_error(olc_context* ctx, const char* fmt, ...) {
  char msg[320];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return g_api->set_error(ctx, msg);
}

const olc_attribute* find_attribute(const olc_node_info* node, const char* name) {
  for (int32_t k = 0; k < node->n_attributes; ++k)
    if (node->attributes[k].name && !std::strcmp(node->attributes[k].name, name)) return &node->attributes[k];
  return nullptr;
}

bool check_known_attributes(const olc_node_info* node, const char* const* known, char* error, size_t size) {
  for (int32_t k = 0; k < node->n_attributes; ++k) {
    const char* name = node->attributes[k].name ? node->attributes[k].name : "";
    bool ok = false;
    for (const char* const* p = known; p && *p; ++p) ok = ok || !std::strcmp(*p, name);
    if (!ok) return fail(error, size, "unknown attribute '%s'", name);
  }
  return true;
}

int32_t level() { return g_api->simd_level(); }

const char* level_name(int32_t lv) {
  return lv >= OLC_SIMD_AVX512 ? "avx512" : lv >= OLC_SIMD_AVX2 ? "avx2" : "scalar";
}

std::shared_ptr<const BroadcastPlan> PlanCache::get(int n, const olc_tensor* inputs, char* error, size_t size) {
  std::vector<int64_t> key;
  key.reserve(static_cast<size_t>(n) * 5);
  key.push_back(n);
  for (int i = 0; i < n; ++i) {
    key.push_back(inputs[i].ndim);
    for (int32_t d = 0; d < inputs[i].ndim; ++d) key.push_back(inputs[i].shape[d]);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Entry& e : entries_)
      if (e.key == key) {
        e.used = ++tick_;
        return e.plan;
      }
  }
  int32_t ranks[kMaxBroadcastInputs];
  const int64_t* shapes[kMaxBroadcastInputs];
  if (n > kMaxBroadcastInputs) {
    fail(error, size, "at most %d inputs are supported, got %d", kMaxBroadcastInputs, n);
    return nullptr;
  }
  for (int i = 0; i < n; ++i) {
    ranks[i] = inputs[i].ndim;
    shapes[i] = inputs[i].shape;
  }
  auto plan = std::make_shared<BroadcastPlan>();
  if (!build_broadcast_plan(n, ranks, shapes, plan.get(), error, size)) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() < static_cast<size_t>(kEntries)) {
    entries_.push_back({std::move(key), plan, ++tick_});
  } else {
    auto lru = std::min_element(entries_.begin(), entries_.end(),
                                [](const Entry& a, const Entry& b) { return a.used < b.used; });
    *lru = Entry{std::move(key), plan, ++tick_};
  }
  return plan;
}

bool check_inputs(olc_context* ctx, int n, const olc_tensor* inputs) {
  for (int i = 0; i < n; ++i) {
    const olc_tensor& t = inputs[i];
    if (t.dtype == OLC_DTYPE_UNDEFINED) continue;
    const int64_t c = olc_element_count(&t);
    if (c < 0) {
      run_error(ctx, "input %d has a negative dimension or too many elements", i);
      return false;
    }
    if (c > 0 && t.data == nullptr) {
      run_error(ctx, "input %d has no data", i);
      return false;
    }
  }
  return true;
}

namespace {
struct SplitJob {
  const BroadcastPlan* plan;
  RangeFn fn;
  void* user;
  int64_t per_item;  // elements (single block) or blocks per item
  bool single;
};

void split_trampoline(void* user, int64_t begin, int64_t end) {
  const SplitJob* j = static_cast<const SplitJob*>(user);
  if (j->single) {
    const int64_t e0 = begin * j->per_item;
    const int64_t e1 = std::min(end * j->per_item, j->plan->inner);
    if (e0 < e1) j->fn(j->user, 0, 1, e0, e1);
  } else {
    const int64_t b0 = begin * j->per_item;
    const int64_t b1 = std::min(end * j->per_item, j->plan->blocks);
    if (b0 < b1) j->fn(j->user, b0, b1, 0, j->plan->inner);
  }
}
}  // namespace

bool runs_serial(olc_context* ctx, const BroadcastPlan& plan, const SplitParams& sp) {
  const int64_t bytes = plan.count * sp.bytes_per_element;
  return sp.parallel_min_bytes <= 0 || bytes < sp.parallel_min_bytes || g_api->concurrency(ctx) <= 1;
}

bool run_streams(olc_context* ctx, const StreamPolicy& policy, const BroadcastPlan& plan, const SplitParams& sp,
                 int n_inputs, const olc_tensor* inputs, int64_t out_elem_size) {
  const int64_t block_bytes = plan.inner * out_elem_size;
  if (block_bytes < 1024 && block_bytes % kStreamPieceBytes != 0) return false;
  return policy.wants(g_api, bytes_read(n_inputs, inputs), plan.count * out_elem_size, runs_serial(ctx, plan, sp));
}

void run_split(olc_context* ctx, const BroadcastPlan& plan, const SplitParams& sp, RangeFn fn, void* user) {
  if (plan.count == 0) return;
  if (runs_serial(ctx, plan, sp)) {
    fn(user, 0, plan.blocks, 0, plan.inner);
    return;
  }
  const int64_t chunk_elems = std::max<int64_t>(64, sp.chunk_bytes / std::max<int64_t>(1, sp.bytes_per_element));
  SplitJob job{&plan, fn, user, 0, plan.blocks == 1};
  int64_t items;
  if (job.single) {
    job.per_item = (chunk_elems + 63) / 64 * 64;  // 64-element multiples keep stores aligned
    items = (plan.inner + job.per_item - 1) / job.per_item;
  } else {
    job.per_item = std::max<int64_t>(1, chunk_elems / plan.inner);
    items = (plan.blocks + job.per_item - 1) / job.per_item;
  }
  if (items <= 1) {
    fn(user, 0, plan.blocks, 0, plan.inner);
    return;
  }
  g_api->parallel_for(ctx, items, 1, sp.max_participants, &split_trampoline, &job);
}

void Tuning::declare(const char* kernel, const char* isa, int32_t dtype, bool costly) {
  // Portable defaults, in bytes read and written. Measured on a 2-core
  // Zen 4: memory-bound ops gain from a second thread only on large tensors;
  // ops with a libm call or an integer division per element much earlier.
  for (int f = 0; f < static_cast<int>(LoopFamily::kCount); ++f) {
    const LoopFamily fam = static_cast<LoopFamily>(f);
    int64_t d = costly ? (32 << 10) : (1 << 20);
    if (!costly && fam == LoopFamily::kGeneral) d = 512 << 10;
    par_min[f] = g_api->tuning_declare_int(kLibrary, kernel, isa, dtype, family_param_name(fam), d);
  }
  chunk_bytes = g_api->tuning_declare_int(kLibrary, kernel, isa, dtype, "chunk_bytes", costly ? (32 << 10) : (256 << 10));
  max_participants = g_api->tuning_declare_int(kLibrary, kernel, isa, dtype, "max_participants", 0);
}

SplitParams Tuning::params(LoopFamily f, int64_t bytes_per_element) const {
  SplitParams sp;
  sp.bytes_per_element = bytes_per_element;
  sp.parallel_min_bytes = g_api->tuning_read_int(par_min[static_cast<int>(f)]);
  sp.chunk_bytes = g_api->tuning_read_int(chunk_bytes);
  sp.max_participants = static_cast<int32_t>(std::max<int64_t>(0, g_api->tuning_read_int(max_participants)));
  return sp;
}

// ---------------------------------------------------------------- binary ops

namespace {

struct BinSpec {
  const char* name;
  BinOp op;
  bool bool_out;
};

const BinSpec kBinSpecs[] = {
    {"Add", BinOp::Add, false},         {"Sub", BinOp::Sub, false},
    {"Mul", BinOp::Mul, false},         {"Div", BinOp::Div, false},
    {"Mod", BinOp::Mod, false},         {"Pow", BinOp::Pow, false},
    {"Equal", BinOp::Equal, true},      {"Greater", BinOp::Greater, true},
    {"GreaterOrEqual", BinOp::GreaterOrEqual, true}, {"Less", BinOp::Less, true},
    {"LessOrEqual", BinOp::LessOrEqual, true},       {"And", BinOp::And, true},
    {"Or", BinOp::Or, true},            {"Xor", BinOp::Xor, true},
    {"BitwiseAnd", BinOp::BitwiseAnd, false}, {"BitwiseOr", BinOp::BitwiseOr, false},
    {"BitwiseXor", BinOp::BitwiseXor, false}, {"BitShift", BinOp::BitShift, false},
    {"PRelu", BinOp::PRelu, false},
};

const BinSpec* find_bin(const char* op) {
  for (const BinSpec& s : kBinSpecs)
    if (!std::strcmp(s.name, op)) return &s;
  return nullptr;
}

bool is_int(int32_t t) {
  switch (t) {
    case OLC_DTYPE_INT8: case OLC_DTYPE_INT16: case OLC_DTYPE_INT32: case OLC_DTYPE_INT64:
    case OLC_DTYPE_UINT8: case OLC_DTYPE_UINT16: case OLC_DTYPE_UINT32: case OLC_DTYPE_UINT64: return true;
    default: return false;
  }
}
bool is_signed_int(int32_t t) {
  return t == OLC_DTYPE_INT8 || t == OLC_DTYPE_INT16 || t == OLC_DTYPE_INT32 || t == OLC_DTYPE_INT64;
}

// ---- float32 Pow with one exponent for every element

// Element i of a numeric tensor as double (NaN for a type without one here).
double value_at(const olc_tensor& t, int64_t i) {
  switch (t.dtype) {
    case OLC_DTYPE_FLOAT: return static_cast<const float*>(t.data)[i];
    case OLC_DTYPE_DOUBLE: return static_cast<const double*>(t.data)[i];
    case OLC_DTYPE_INT8: return static_cast<const int8_t*>(t.data)[i];
    case OLC_DTYPE_INT16: return static_cast<const int16_t*>(t.data)[i];
    case OLC_DTYPE_INT32: return static_cast<const int32_t*>(t.data)[i];
    case OLC_DTYPE_INT64: return static_cast<double>(static_cast<const int64_t*>(t.data)[i]);
    case OLC_DTYPE_UINT8: return static_cast<const uint8_t*>(t.data)[i];
    case OLC_DTYPE_UINT16: return static_cast<const uint16_t*>(t.data)[i];
    case OLC_DTYPE_UINT32: return static_cast<const uint32_t*>(t.data)[i];
    case OLC_DTYPE_UINT64: return static_cast<double>(static_cast<const uint64_t*>(t.data)[i]);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

PowConst pow_const_of(double v) {
  if (v == 0.0) return PowConst::Zero;  // -0 too: x^-0 = 1
  if (v == 1.0) return PowConst::One;
  if (v == 2.0) return PowConst::Two;
  if (v == 3.0) return PowConst::Three;
  if (v == 0.5) return PowConst::Half;
  if (v == -1.0) return PowConst::MinusOne;
  if (v == -0.5) return PowConst::MinusHalf;
  return PowConst::None;
}

// The PowConst of an exponent tensor whose elements all hold one of the
// values above (an int64 exponent beyond 2^53 never compares equal to one).
PowConst pow_const_of(const olc_tensor& t) {
  const int64_t n = olc_element_count(&t);
  if (!t.data || n <= 0) return PowConst::None;
  const double v0 = value_at(t, 0);
  for (int64_t i = 1; i < n; ++i)
    if (!(value_at(t, i) == v0)) return PowConst::None;
  return pow_const_of(v0);
}

// Usage details: "<isa>,pow:<path>".
const char* pow_detail(const char* isa, PowConst c) {
  static const char* const kNames[3][static_cast<int>(PowConst::kCount)] = {
      {"scalar,pow:general", "scalar,pow:one", "scalar,pow:identity", "scalar,pow:square", "scalar,pow:cube",
       "scalar,pow:sqrt", "scalar,pow:reciprocal", "scalar,pow:rsqrt"},
      {"avx2,pow:general", "avx2,pow:one", "avx2,pow:identity", "avx2,pow:square", "avx2,pow:cube",
       "avx2,pow:sqrt", "avx2,pow:reciprocal", "avx2,pow:rsqrt"},
      {"avx512,pow:general", "avx512,pow:one", "avx512,pow:identity", "avx512,pow:square", "avx512,pow:cube",
       "avx512,pow:sqrt", "avx512,pow:reciprocal", "avx512,pow:rsqrt"}};
  const int lv = !std::strcmp(isa, "avx512") ? 2 : !std::strcmp(isa, "avx2") ? 1 : 0;
  return kNames[lv][static_cast<int>(c)];
}

bool select_pow_const_at(const char* isa, PowConst c, BinaryFns* out) {
  if (!std::strcmp(isa, "avx512")) return nary_avx512::select_pow_const(c, out);
  if (!std::strcmp(isa, "avx2")) return nary_avx2::select_pow_const(c, out);
  return nary_scalar::select_pow_const(c, out);
}

// The immutable per-node kernel state.
struct BinaryKernelDescriptor {
  BinOp op;
  const char* op_name;
  int64_t opset;
  BinaryVariant variant;
  int32_t a_dtype, b_dtype, y_dtype;
  size_t a_size, b_size, y_size;
  BinaryFns fns;
  const char* isa;
  StreamLevel streaming;  // the level's fence and usage detail for non-temporal stores
  bool check_divisor;  // integer Div / Mod: zero divisors rejected
  bool check_overflow; // signed integer Div: INT_MIN / -1 rejected
  bool unidirectional; // PRelu: the output must have X's shape
  // float32 Pow: a constant exponent's exact path (fns already bound to it),
  // or, when the exponent is not a constant, the exact paths a one-element
  // exponent may take at run time (pow_runtime).
  bool pow_f32 = false;
  PowConst pow_const = PowConst::None;
  bool pow_runtime = false;
  BinaryFns pow_fns[static_cast<int>(PowConst::kCount)];
  Tuning tuning;
  StreamPolicy stream;
  mutable PlanCache plans;
};

void* binary_create(const olc_core_api* capi, const olc_node_info* node, char* error, size_t size) {
  const BinSpec* spec = find_bin(node->op_type);
  if (!spec) { fail(error, size, "op %s is not a binary op of olc_elementwise", node->op_type); return nullptr; }
  if (node->n_inputs != 2 || node->n_outputs != 1) {
    fail(error, size, "expects 2 inputs and 1 output, got %d and %d", node->n_inputs, node->n_outputs);
    return nullptr;
  }
  BinaryVariant v;
  if (spec->op == BinOp::Mod) {
    static const char* const known[] = {"fmod", nullptr};
    if (!check_known_attributes(node, known, error, size)) return nullptr;
    if (const olc_attribute* a = find_attribute(node, "fmod")) {
      if (a->type != OLC_ATTR_INT || (a->i != 0 && a->i != 1)) {
        fail(error, size, "attribute 'fmod' must be the integer 0 or 1");
        return nullptr;
      }
      v.fmod = a->i == 1;
    }
  } else if (spec->op == BinOp::BitShift) {
    static const char* const known[] = {"direction", nullptr};
    if (!check_known_attributes(node, known, error, size)) return nullptr;
    const olc_attribute* a = find_attribute(node, "direction");
    if (!a || a->type != OLC_ATTR_STRING || !a->s) {
      fail(error, size, "attribute 'direction' (\"LEFT\" or \"RIGHT\") is required");
      return nullptr;
    }
    if (!std::strcmp(a->s, "LEFT")) v.shift_left = true;
    else if (std::strcmp(a->s, "RIGHT")) {
      fail(error, size, "attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"%s\"", a->s);
      return nullptr;
    }
  } else {
    static const char* const none[] = {nullptr};
    if (!check_known_attributes(node, none, error, size)) return nullptr;
  }
  const int32_t ta = node->input_dtypes[0], tb = node->input_dtypes[1];
  const int32_t lv = capi->simd_level();
  BinaryFns fns;
  const char* isa = "scalar";
  if (lv >= OLC_SIMD_AVX512 && nary_avx512::select_binary(spec->op, v, ta, tb, &fns)) isa = "avx512";
  else if (lv >= OLC_SIMD_AVX2 && nary_avx2::select_binary(spec->op, v, ta, tb, &fns)) isa = "avx2";
  else if (!nary_scalar::select_binary(spec->op, v, ta, tb, &fns)) {
    fail(error, size, "unsupported input types %s and %s", olc_dtype_name(ta), olc_dtype_name(tb));
    return nullptr;
  }
  const int32_t ty = spec->bool_out ? OLC_DTYPE_BOOL : ta;
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != ty) {
    fail(error, size, "output type %s does not match the op's output type %s", olc_dtype_name(node->output_dtypes[0]),
         olc_dtype_name(ty));
    return nullptr;
  }
  auto* st = new (std::nothrow) BinaryKernelDescriptor();
  if (!st) { fail(error, size, "out of memory"); return nullptr; }
  st->op = spec->op;
  st->op_name = spec->name;
  st->opset = node->opset;
  st->variant = v;
  st->a_dtype = ta;
  st->b_dtype = tb;
  st->y_dtype = ty;
  st->a_size = olc_dtype_size(ta);
  st->b_size = olc_dtype_size(tb);
  st->y_size = olc_dtype_size(ty);
  st->fns = fns;
  st->isa = isa;
  st->check_divisor = (spec->op == BinOp::Div || spec->op == BinOp::Mod) && is_int(tb);
  st->check_overflow = spec->op == BinOp::Div && is_signed_int(ta);
  st->unidirectional = spec->op == BinOp::PRelu;
  if (spec->op == BinOp::Pow && ta == OLC_DTYPE_FLOAT) {
    st->pow_f32 = true;
    const olc_tensor* c = node->input_constants ? &node->input_constants[1] : nullptr;
    if (c && c->data) {
      st->pow_const = pow_const_of(*c);
      if (st->pow_const != PowConst::None && !select_pow_const_at(isa, st->pow_const, &st->fns))
        st->pow_const = PowConst::None;
    } else {
      st->pow_runtime = true;
      for (int k = 1; k < static_cast<int>(PowConst::kCount); ++k)
        st->pow_runtime &= select_pow_const_at(isa, static_cast<PowConst>(k), &st->pow_fns[k]);
    }
  }
  const bool costly = spec->op == BinOp::Pow || spec->op == BinOp::Mod || (spec->op == BinOp::Div && is_int(ta));
  st->tuning.declare(spec->name, isa, ta, costly);
  // Non-temporal stores for outputs far larger than the caches (the level's
  // *_stream variants; run_streams says when).
  st->streaming = stream_level(isa);
  st->stream.declare(capi, kLibrary, spec->name, isa, ta, !costly);
  return st;
}

// Element i of a signed integer tensor as int64 (the INT_MIN / -1 check of
// signed Div is its only user).
int64_t int_at(const void* p, int32_t dtype, int64_t i) {
  switch (dtype) {
    case OLC_DTYPE_INT8: return static_cast<const int8_t*>(p)[i];
    case OLC_DTYPE_INT16: return static_cast<const int16_t*>(p)[i];
    case OLC_DTYPE_INT32: return static_cast<const int32_t*>(p)[i];
    case OLC_DTYPE_INT64: return static_cast<const int64_t*>(p)[i];
    default: return 0;
  }
}

int64_t int_min_of(int32_t dtype) {
  switch (dtype) {
    case OLC_DTYPE_INT8: return std::numeric_limits<int8_t>::min();
    case OLC_DTYPE_INT16: return std::numeric_limits<int16_t>::min();
    case OLC_DTYPE_INT32: return std::numeric_limits<int32_t>::min();
    default: return std::numeric_limits<int64_t>::min();
  }
}

template <class T> bool has_value(const void* p, int64_t n, T v) {
  const T* x = static_cast<const T*>(p);
  bool found = false;
  for (int64_t i = 0; i < n; ++i) found |= x[i] == v;
  return found;
}

// True when the integer tensor holds the value v (v representable in it).
bool contains(const olc_tensor& t, int64_t n, int64_t v) {
  switch (t.dtype) {
    case OLC_DTYPE_INT8: return has_value<int8_t>(t.data, n, static_cast<int8_t>(v));
    case OLC_DTYPE_INT16: return has_value<int16_t>(t.data, n, static_cast<int16_t>(v));
    case OLC_DTYPE_INT32: return has_value<int32_t>(t.data, n, static_cast<int32_t>(v));
    case OLC_DTYPE_INT64: return has_value<int64_t>(t.data, n, v);
    case OLC_DTYPE_UINT8: return v >= 0 && has_value<uint8_t>(t.data, n, static_cast<uint8_t>(v));
    case OLC_DTYPE_UINT16: return v >= 0 && has_value<uint16_t>(t.data, n, static_cast<uint16_t>(v));
    case OLC_DTYPE_UINT32: return v >= 0 && has_value<uint32_t>(t.data, n, static_cast<uint32_t>(v));
    case OLC_DTYPE_UINT64: return v >= 0 && has_value<uint64_t>(t.data, n, static_cast<uint64_t>(v));
    default: return false;
  }
}

struct BinRun {
  const BinaryKernelDescriptor* st;
  const BroadcastPlan* plan;
  const char* a;
  const char* b;
  char* y;
  BinaryFn fn;
  bool stream;
};

void binary_range(void* user, int64_t b0, int64_t b1, int64_t e0, int64_t e1) {
  const BinRun* r = static_cast<const BinRun*>(user);
  const BroadcastPlan& p = *r->plan;
  const int64_t sa = p.inner_stride[0], sb = p.inner_stride[1];
  const size_t za = r->st->a_size, zb = r->st->b_size, zy = r->st->y_size;
  BlockCursor c(p, b0);
  const int64_t len = e1 - e0;
  for (int64_t blk = b0; blk < b1; ++blk) {
    r->fn(r->a + (c.offset[0] + e0 * sa) * za, r->b + (c.offset[1] + e0 * sb) * zb,
          r->y + (blk * p.inner + e0) * zy, len);
    c.next();
  }
  if (r->stream) r->st->streaming.fence();
}

int32_t binary_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const auto* st = static_cast<const BinaryKernelDescriptor*>(state);
  if (n_inputs != 2 || n_outputs != 1)
    return run_error(ctx, "expects 2 inputs and 1 output, got %d and %d", n_inputs, n_outputs);
  if (inputs[0].dtype != st->a_dtype || inputs[1].dtype != st->b_dtype)
    return run_error(ctx, "inputs have types %s and %s, the kernel was created for %s and %s",
                     olc_dtype_name(inputs[0].dtype), olc_dtype_name(inputs[1].dtype), olc_dtype_name(st->a_dtype),
                     olc_dtype_name(st->b_dtype));
  if (!check_inputs(ctx, 2, inputs)) return OLC_ERROR;
  char err[256];
  std::shared_ptr<const BroadcastPlan> plan = st->plans.get(2, inputs, err, sizeof err);
  if (!plan) return run_error(ctx, "%s", err);
  const BroadcastPlan& p = *plan;
  if (st->unidirectional) {
    bool same = p.out_rank == inputs[0].ndim;
    for (int d = 0; same && d < p.out_rank; ++d) same = p.out_shape[d] == inputs[0].shape[d];
    if (!same) return run_error(ctx, "slope must broadcast to the shape of X (unidirectional broadcasting)");
  }
  if (p.count > 0 && st->check_divisor) {
    const int64_t nb = olc_element_count(&inputs[1]);
    if (contains(inputs[1], nb, 0))
      return run_error(ctx, "integer %s by zero: the divisor B holds a zero", st->op_name);
    if (st->check_overflow && contains(inputs[1], nb, -1) &&
        contains(inputs[0], olc_element_count(&inputs[0]), int_min_of(st->a_dtype))) {
      // Both values occur: check whether they meet in the broadcast.
      bool hit = false;
      const int64_t mn = int_min_of(st->a_dtype);
      for_each_block(p, 0, p.blocks, [&](int64_t, const int64_t* off) {
        for (int64_t k = 0; k < p.inner && !hit; ++k)
          hit = int_at(inputs[0].data, st->a_dtype, off[0] + k * p.inner_stride[0]) == mn &&
                int_at(inputs[1].data, st->b_dtype, off[1] + k * p.inner_stride[1]) == -1;
      });
      if (hit)
        return run_error(ctx, "integer Div overflow: the most negative %s divided by -1 is not representable",
                         olc_dtype_name(st->a_dtype));
    }
  }
  void* y = g_api->allocate_output(ctx, 0, st->y_dtype, p.out_rank, p.out_shape);
  if (!y && p.count > 0) return OLC_ERROR;
  if (p.count == 0) {
    g_api->record_usage_detail(ctx, st->isa);
    return OLC_OK;
  }
  const int64_t sa = p.inner_stride[0], sb = p.inner_stride[1];
  const BinaryFns* fns = &st->fns;
  const char* detail = st->isa;
  if (st->pow_f32) {
    PowConst pc = st->pow_const;
    if (st->pow_runtime && olc_element_count(&inputs[1]) == 1) {
      pc = pow_const_of(value_at(inputs[1], 0));
      if (pc != PowConst::None) fns = &st->pow_fns[static_cast<int>(pc)];
    }
    detail = pow_detail(st->isa, pc);
  }
  BinRun r{st, &p, static_cast<const char*>(inputs[0].data), static_cast<const char*>(inputs[1].data),
           static_cast<char*>(y), fns->vv, false};
  BinaryFn stream_fn = fns->vv_stream;
  if (sa == 0 && sb != 0) { r.fn = fns->sv; stream_fn = fns->sv_stream; }
  else if (sb == 0 && sa != 0) { r.fn = fns->vs; stream_fn = fns->vs_stream; }
  const int64_t bpe = static_cast<int64_t>(st->a_size + st->b_size + st->y_size);
  const SplitParams sp = st->tuning.params(p.family, bpe);
  if (stream_fn && run_streams(ctx, st->stream, p, sp, 2, inputs, static_cast<int64_t>(st->y_size))) {
    r.fn = stream_fn;
    r.stream = true;
  }
  g_api->record_usage_detail(ctx, r.stream ? st->streaming.detail : detail);
  run_split(ctx, p, sp, &binary_range, &r);
  return OLC_OK;
}

void binary_destroy(void* state) { delete static_cast<BinaryKernelDescriptor*>(state); }

// ---------------------------------------------------------------- vtable table

struct VtEntry {
  std::string op;
  std::string name;
  olc_kernel_vtable vt;
};

std::vector<VtEntry>& table() {
  static std::vector<VtEntry> t;
  return t;
}

void add(const char* op, void* (*create)(const olc_core_api*, const olc_node_info*, char*, size_t),
         int32_t (*run)(const void*, olc_context*, int32_t, const olc_tensor*, int32_t), void (*destroy)(void*),
         uint32_t flags) {
  VtEntry e;
  e.op = op;
  e.name = std::string("olc_elementwise::") + op;
  e.vt.abi_version = OLC_ABI_VERSION;
  e.vt.flags = flags;
  e.vt.create = create;
  e.vt.run = run;
  e.vt.destroy = destroy;
  table().push_back(std::move(e));
}

void build_table() {
  auto& t = table();
  if (!t.empty()) return;
  t.reserve(32);
  // In place on input 0: the runtime only hands input 0's buffer over when
  // its dtype and byte size equal the output's. A broadcast input 0 has
  // fewer elements than a non-empty output (each of its dims is the
  // output's or 1 < the output's), so equal sizes mean input 0 is full and
  // element i is read before element i is written.
  for (const BinSpec& s : kBinSpecs) add(s.name, &binary_create, &binary_run, &binary_destroy, OLC_KERNEL_INPLACE_INPUT0);
  for (const char* op : {"Sum", "Mean", "Min", "Max"})
    add(op, &variadic_create, &variadic_run, &variadic_destroy, OLC_KERNEL_INPLACE_INPUT0);
  add("Where", &where_create, &where_run, &where_destroy, OLC_KERNEL_INPLACE_INPUT0);
  add("Clip", &clip_create, &clip_run, &clip_destroy, OLC_KERNEL_INPLACE_INPUT0);
  add("SwiGLU", &swiglu_create, &swiglu_run, &swiglu_destroy, OLC_KERNEL_INPLACE_INPUT0);
  for (VtEntry& e : t) e.vt.name = e.name.c_str();
}

}  // namespace
}  // namespace nary

void set_nary_core_api(const olc_core_api* api) {
  nary::g_api = api;
  nary::build_table();
}

const olc_kernel_vtable* nary_vtable(const std::string& op_type) {
  for (const auto& e : nary::table())
    if (e.op == op_type) return &e.vt;
  return nullptr;
}

std::vector<std::string> nary_op_names() {
  std::vector<std::string> out;
  for (const auto& e : nary::table()) out.push_back(e.op);
  return out;
}

}  // namespace olc_ew
