// Where (three-way broadcast, any fixed-width element type, BOOL
// condition), Clip (opset 6 attribute bounds; opset 11+ optional scalar
// bound inputs) and SwiGLU (opset 28, equal shapes). Compiled without ISA
// flags.
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include "binary_shared.h"

namespace olc_ew {
namespace nary {
namespace {

template <class Fn>
Fn pick(const olc_core_api* capi, Fn (*s512)(int32_t), Fn (*s2)(int32_t), Fn (*s0)(int32_t), int32_t arg,
        const char** isa) {
  const int32_t lv = capi->simd_level();
  Fn fn = nullptr;
  *isa = "scalar";
  if (lv >= OLC_SIMD_AVX512 && (fn = s512(arg))) *isa = "avx512";
  else if (lv >= OLC_SIMD_AVX2 && (fn = s2(arg))) *isa = "avx2";
  else fn = s0(arg);
  return fn;
}

bool check_output(const olc_node_info* node, int32_t t, char* error, size_t size) {
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != t)
    return fail(error, size, "output type %s does not match the op's output type %s",
                olc_dtype_name(node->output_dtypes[0]), olc_dtype_name(t));
  return true;
}

// ---------------------------------------------------------------- Where

struct WhereState {
  int32_t dtype;
  size_t size;
  WhereFn fn;
  WhereFn stream_fn = nullptr;  // with non-temporal stores (stream_policy.h)
  const char* isa;
  StreamLevel streaming;
  Tuning tuning;
  StreamPolicy stream;
  mutable PlanCache plans;
};

struct WhereRun {
  const WhereState* st;
  const BroadcastPlan* plan;
  const olc_tensor* in;
  char* y;
  int mask;
  WhereFn fn;
  bool stream;
};

void where_range(void* user, int64_t b0, int64_t b1, int64_t e0, int64_t e1) {
  const WhereRun* r = static_cast<const WhereRun*>(user);
  const BroadcastPlan& p = *r->plan;
  const size_t z = r->st->size;
  BlockCursor c(p, b0);
  for (int64_t blk = b0; blk < b1; ++blk) {
    r->fn(static_cast<const uint8_t*>(r->in[0].data) + c.offset[0] + e0 * p.inner_stride[0],
          static_cast<const char*>(r->in[1].data) + (c.offset[1] + e0 * p.inner_stride[1]) * z,
          static_cast<const char*>(r->in[2].data) + (c.offset[2] + e0 * p.inner_stride[2]) * z,
          r->y + (blk * p.inner + e0) * z, e1 - e0, r->mask);
    c.next();
  }
  if (r->stream) r->st->streaming.fence();
}

// ---------------------------------------------------------------- Clip

// float -> IEEE half bits, round to nearest even (for opset-6 bounds).
uint16_t half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  const uint32_t e = a >> 23;
  if (e >= 113) {
    uint32_t h = ((e - 112u) << 10) | ((a >> 13) & 0x3ffu);
    const uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return sign | static_cast<uint16_t>(h);
  }
  if (e < 102) return sign;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u, s = 126u - e;
  uint32_t h = m >> s;
  const uint32_t rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
  if (rem > half || (rem == half && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

struct ClipState {
  int32_t dtype;
  size_t size;
  ClipFn fn;
  ClipFn stream_fn = nullptr;  // with non-temporal stores (stream_policy.h)
  const char* isa;
  StreamLevel streaming;
  StreamPolicy stream;
  bool attr_form;
  bool has_lo, has_hi;  // attribute form
  alignas(8) unsigned char lo[8], hi[8];
  Tuning tuning;
};

struct ClipRun {
  const ClipState* st;
  ClipFn fn;
  const char* x;
  char* y;
  const void* lo;
  const void* hi;
  bool stream;  // fn writes with non-temporal stores: fence on the thread that ran it
};

void clip_range(void* user, int64_t, int64_t, int64_t e0, int64_t e1) {
  const ClipRun* r = static_cast<const ClipRun*>(user);
  const size_t z = r->st->size;
  r->fn(r->x + e0 * z, r->y + e0 * z, e1 - e0, r->lo, r->hi);
  if (r->stream) r->st->streaming.fence();
}

// ---------------------------------------------------------------- SwiGLU

struct SwiGluState {
  int32_t dtype;
  size_t size;
  SwiGluFn fn;
  const char* isa;
  double alpha;
  Tuning tuning;
};

struct SwiGluRun {
  const SwiGluState* st;
  const char* a;
  const char* b;
  char* y;
};

void swiglu_range(void* user, int64_t, int64_t, int64_t e0, int64_t e1) {
  const SwiGluRun* r = static_cast<const SwiGluRun*>(user);
  const size_t z = r->st->size;
  r->st->fn(r->a + e0 * z, r->b + e0 * z, r->y + e0 * z, e1 - e0, r->st->alpha);
}

// A one-dimensional plan over n elements (unary-shaped kernels).
BroadcastPlan flat_plan(int64_t n) {
  BroadcastPlan p;
  p.n_inputs = 1;
  p.count = n;
  p.rank = 1;
  p.dims[0] = n;
  p.inner = n;
  p.blocks = n > 0 ? 1 : 0;
  p.inner_stride[0] = 1;
  return p;
}

}  // namespace

void* where_create(const olc_core_api* capi, const olc_node_info* node, char* error, size_t size) {
  if (node->n_inputs != 3 || node->n_outputs != 1) {
    fail(error, size, "expects 3 inputs and 1 output, got %d and %d", node->n_inputs, node->n_outputs);
    return nullptr;
  }
  static const char* const none[] = {nullptr};
  if (!check_known_attributes(node, none, error, size)) return nullptr;
  if (node->input_dtypes[0] != OLC_DTYPE_BOOL) {
    fail(error, size, "condition has type %s, expected bool", olc_dtype_name(node->input_dtypes[0]));
    return nullptr;
  }
  const int32_t t = node->input_dtypes[1];
  if (node->input_dtypes[2] != t) {
    fail(error, size, "X and Y have different types (%s and %s)", olc_dtype_name(t), olc_dtype_name(node->input_dtypes[2]));
    return nullptr;
  }
  const int32_t z = static_cast<int32_t>(olc_dtype_size(t));
  if (z == 0) { fail(error, size, "unsupported input type %s", olc_dtype_name(t)); return nullptr; }
  if (!check_output(node, t, error, size)) return nullptr;
  auto* st = new (std::nothrow) WhereState();
  if (!st) { fail(error, size, "out of memory"); return nullptr; }
  st->dtype = t;
  st->size = static_cast<size_t>(z);
  st->fn = pick<WhereFn>(capi, &nary_avx512::select_where, &nary_avx2::select_where, &nary_scalar::select_where, z,
                         &st->isa);
  st->tuning.declare("Where", st->isa, t, false);
  st->streaming = stream_level(st->isa);
  if (st->streaming.fence)
    st->stream_fn = st->streaming.avx512 ? nary_avx512::select_where_stream(z) : nary_avx2::select_where_stream(z);
  st->stream.declare(capi, kLibrary, "Where", st->isa, t, true);
  return st;
}

int32_t where_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const auto* st = static_cast<const WhereState*>(state);
  if (n_inputs != 3 || n_outputs != 1) return run_error(ctx, "expects 3 inputs and 1 output, got %d and %d", n_inputs, n_outputs);
  if (inputs[0].dtype != OLC_DTYPE_BOOL || inputs[1].dtype != st->dtype || inputs[2].dtype != st->dtype)
    return run_error(ctx, "inputs have types %s, %s, %s; the kernel was created for bool, %s, %s",
                     olc_dtype_name(inputs[0].dtype), olc_dtype_name(inputs[1].dtype), olc_dtype_name(inputs[2].dtype),
                     olc_dtype_name(st->dtype), olc_dtype_name(st->dtype));
  if (!check_inputs(ctx, 3, inputs)) return OLC_ERROR;
  char err[256];
  std::shared_ptr<const BroadcastPlan> plan = st->plans.get(3, inputs, err, sizeof err);
  if (!plan) return run_error(ctx, "%s", err);
  const BroadcastPlan& p = *plan;
  void* y = api()->allocate_output(ctx, 0, st->dtype, p.out_rank, p.out_shape);
  if (!y && p.count > 0) return OLC_ERROR;
  if (p.count == 0) {
    api()->record_usage_detail(ctx, st->isa);
    return OLC_OK;
  }
  const int mask = (p.inner_stride[0] ? 1 : 0) | (p.inner_stride[1] ? 2 : 0) | (p.inner_stride[2] ? 4 : 0);
  WhereRun r{st, &p, inputs, static_cast<char*>(y), mask, st->fn, false};
  const SplitParams sp = st->tuning.params(p.family, 1 + 3 * static_cast<int64_t>(st->size));
  if (st->stream_fn && run_streams(ctx, st->stream, p, sp, 3, inputs, static_cast<int64_t>(st->size))) {
    r.fn = st->stream_fn;
    r.stream = true;
  }
  api()->record_usage_detail(ctx, r.stream ? st->streaming.detail : st->isa);
  run_split(ctx, p, sp, &where_range, &r);
  return OLC_OK;
}

void where_destroy(void* state) { delete static_cast<WhereState*>(state); }

void* clip_create(const olc_core_api* capi, const olc_node_info* node, char* error, size_t size) {
  const bool attr_form = node->opset < 11;
  if (node->n_outputs != 1 || node->n_inputs < 1 || node->n_inputs > (attr_form ? 1 : 3)) {
    fail(error, size, "expects %s and 1 output, got %d inputs and %d outputs", attr_form ? "1 input" : "1 to 3 inputs",
         node->n_inputs, node->n_outputs);
    return nullptr;
  }
  static const char* const attr_names[] = {"min", "max", nullptr};
  static const char* const none[] = {nullptr};
  if (!check_known_attributes(node, attr_form ? attr_names : none, error, size)) return nullptr;
  const int32_t t = node->input_dtypes[0];
  for (int32_t i = 1; i < node->n_inputs; ++i)
    if (node->input_dtypes[i] != OLC_DTYPE_UNDEFINED && node->input_dtypes[i] != t) {
      fail(error, size, "input %d has type %s, input 0 has %s", i, olc_dtype_name(node->input_dtypes[i]), olc_dtype_name(t));
      return nullptr;
    }
  if (!check_output(node, t, error, size)) return nullptr;
  auto* st = new (std::nothrow) ClipState();
  if (!st) { fail(error, size, "out of memory"); return nullptr; }
  st->dtype = t;
  st->size = olc_dtype_size(t);
  st->attr_form = attr_form;
  st->fn = pick<ClipFn>(capi, &nary_avx512::select_clip, &nary_avx2::select_clip, &nary_scalar::select_clip, t, &st->isa);
  if (!st->fn) {
    delete st;
    fail(error, size, "unsupported input type %s", olc_dtype_name(t));
    return nullptr;
  }
  if (attr_form) {
    float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
    for (int k = 0; k < 2; ++k) {
      const olc_attribute* a = find_attribute(node, k ? "max" : "min");
      if (!a) continue;
      if (a->type != OLC_ATTR_FLOAT) {
        delete st;
        fail(error, size, "attribute '%s' must be a float", k ? "max" : "min");
        return nullptr;
      }
      (k ? hi : lo) = static_cast<float>(a->f);
    }
    st->has_lo = st->has_hi = true;
    for (int k = 0; k < 2; ++k) {
      const float v = k ? hi : lo;
      unsigned char* dst = k ? st->hi : st->lo;
      if (t == OLC_DTYPE_FLOAT) std::memcpy(dst, &v, 4);
      else if (t == OLC_DTYPE_DOUBLE) { const double d = v; std::memcpy(dst, &d, 8); }
      else if (t == OLC_DTYPE_FLOAT16) { const uint16_t h = half_bits(v); std::memcpy(dst, &h, 2); }
      else {
        delete st;
        fail(error, size, "the attribute form of Clip takes float types only, got %s", olc_dtype_name(t));
        return nullptr;
      }
    }
  }
  st->tuning.declare("Clip", st->isa, t, false);
  st->streaming = stream_level(st->isa);
  if (st->streaming.fence)
    st->stream_fn = st->streaming.avx512 ? nary_avx512::select_clip_stream(t) : nary_avx2::select_clip_stream(t);
  st->stream.declare(capi, kLibrary, "Clip", st->isa, t, true);
  return st;
}

int32_t clip_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const auto* st = static_cast<const ClipState*>(state);
  if (n_inputs < 1 || n_inputs > 3 || n_outputs != 1)
    return run_error(ctx, "expects 1 to 3 inputs and 1 output, got %d and %d", n_inputs, n_outputs);
  if (inputs[0].dtype != st->dtype)
    return run_error(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(inputs[0].dtype),
                     olc_dtype_name(st->dtype));
  if (!check_inputs(ctx, n_inputs, inputs)) return OLC_ERROR;
  const void* lo = st->attr_form && st->has_lo ? st->lo : nullptr;
  const void* hi = st->attr_form && st->has_hi ? st->hi : nullptr;
  if (!st->attr_form) {
    for (int32_t i = 1; i < n_inputs; ++i) {
      const olc_tensor& b = inputs[i];
      if (b.dtype == OLC_DTYPE_UNDEFINED) continue;
      if (b.dtype != st->dtype)
        return run_error(ctx, "input %d (%s) has type %s, input 0 has %s", i, i == 1 ? "min" : "max",
                         olc_dtype_name(b.dtype), olc_dtype_name(st->dtype));
      if (olc_element_count(&b) != 1)
        return run_error(ctx, "input %d (%s) must be a scalar (one element), got %lld elements", i, i == 1 ? "min" : "max",
                         static_cast<long long>(olc_element_count(&b)));
      (i == 1 ? lo : hi) = b.data;
    }
  }
  const int64_t n = olc_element_count(&inputs[0]);
  void* y = api()->allocate_output(ctx, 0, st->dtype, inputs[0].ndim, inputs[0].shape);
  if (!y && n > 0) return OLC_ERROR;
  if (n == 0) {
    api()->record_usage_detail(ctx, st->isa);
    return OLC_OK;
  }
  const BroadcastPlan p = flat_plan(n);
  const SplitParams sp = st->tuning.params(LoopFamily::kContiguous, 2 * static_cast<int64_t>(st->size));
  // Only x counts as read: the bounds are one element each.
  const bool stream = st->stream_fn && run_streams(ctx, st->stream, p, sp, 1, inputs, static_cast<int64_t>(st->size));
  ClipRun r{st, stream ? st->stream_fn : st->fn, static_cast<const char*>(inputs[0].data), static_cast<char*>(y), lo, hi,
            stream};
  api()->record_usage_detail(ctx, stream ? st->streaming.detail : st->isa);
  run_split(ctx, p, sp, &clip_range, &r);
  return OLC_OK;
}

void clip_destroy(void* state) { delete static_cast<ClipState*>(state); }

void* swiglu_create(const olc_core_api* capi, const olc_node_info* node, char* error, size_t size) {
  if (node->n_inputs != 2 || node->n_outputs != 1) {
    fail(error, size, "expects 2 inputs and 1 output, got %d and %d", node->n_inputs, node->n_outputs);
    return nullptr;
  }
  static const char* const names[] = {"alpha", nullptr};
  if (!check_known_attributes(node, names, error, size)) return nullptr;
  double alpha = 1.0;
  if (const olc_attribute* a = find_attribute(node, "alpha")) {
    if (a->type != OLC_ATTR_FLOAT || !std::isfinite(a->f)) {
      fail(error, size, "attribute 'alpha' must be a finite float");
      return nullptr;
    }
    alpha = static_cast<double>(static_cast<float>(a->f));
  }
  const int32_t t = node->input_dtypes[0];
  if (node->input_dtypes[1] != t) {
    fail(error, size, "A and B have different types (%s and %s)", olc_dtype_name(t), olc_dtype_name(node->input_dtypes[1]));
    return nullptr;
  }
  if (!check_output(node, t, error, size)) return nullptr;
  auto* st = new (std::nothrow) SwiGluState();
  if (!st) { fail(error, size, "out of memory"); return nullptr; }
  st->dtype = t;
  st->size = olc_dtype_size(t);
  st->alpha = alpha;
  st->fn = pick<SwiGluFn>(capi, &nary_avx512::select_swiglu, &nary_avx2::select_swiglu, &nary_scalar::select_swiglu, t,
                          &st->isa);
  if (!st->fn) {
    delete st;
    fail(error, size, "unsupported input type %s", olc_dtype_name(t));
    return nullptr;
  }
  st->tuning.declare("SwiGLU", st->isa, t, true);
  return st;
}

int32_t swiglu_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const auto* st = static_cast<const SwiGluState*>(state);
  if (n_inputs != 2 || n_outputs != 1) return run_error(ctx, "expects 2 inputs and 1 output, got %d and %d", n_inputs, n_outputs);
  if (inputs[0].dtype != st->dtype || inputs[1].dtype != st->dtype)
    return run_error(ctx, "inputs have types %s and %s, the kernel was created for %s", olc_dtype_name(inputs[0].dtype),
                     olc_dtype_name(inputs[1].dtype), olc_dtype_name(st->dtype));
  if (!check_inputs(ctx, 2, inputs)) return OLC_ERROR;
  bool same = inputs[0].ndim == inputs[1].ndim;
  for (int32_t d = 0; same && d < inputs[0].ndim; ++d) same = inputs[0].shape[d] == inputs[1].shape[d];
  if (!same) return run_error(ctx, "A and B must have identical shapes (SwiGLU does not broadcast)");
  const int64_t n = olc_element_count(&inputs[0]);
  void* y = api()->allocate_output(ctx, 0, st->dtype, inputs[0].ndim, inputs[0].shape);
  if (!y && n > 0) return OLC_ERROR;
  api()->record_usage_detail(ctx, st->isa);
  if (n == 0) return OLC_OK;
  const BroadcastPlan p = flat_plan(n);
  SwiGluRun r{st, static_cast<const char*>(inputs[0].data), static_cast<const char*>(inputs[1].data),
              static_cast<char*>(y)};
  run_split(ctx, p, st->tuning.params(LoopFamily::kContiguous, 3 * static_cast<int64_t>(st->size)), &swiglu_range, &r);
  return OLC_OK;
}

void swiglu_destroy(void* state) { delete static_cast<SwiGluState*>(state); }

}  // namespace nary
}  // namespace olc_ew
