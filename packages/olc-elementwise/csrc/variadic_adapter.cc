// Variadic Sum, Mean, Min, Max: every input in one traversal of one common
// broadcast space (the N-ary plan of broadcast.h), combined left to right
// per chunk of an inner block straight into the output (or a small stack
// buffer, see variadic_entry): no pairwise temporaries. Compiled without ISA
// flags.
#include <cstring>
#include <new>

#include "binary_shared.h"

namespace olc_ew {
namespace nary {
namespace {

static_assert(kMaxVariadicInputs == kMaxBroadcastInputs, "the variadic streaming loop sizes its pointer array so");

struct VariadicState {
  VarOp op;
  const char* op_name;
  int32_t dtype;
  size_t size;
  VariadicFn fn;
  VariadicFn stream_fn = nullptr;  // with non-temporal stores (stream_policy.h)
  const char* isa;
  StreamLevel streaming;
  Tuning tuning;
  StreamPolicy stream;
  mutable PlanCache plans;
};

struct VarRun {
  const VariadicState* st;
  const BroadcastPlan* plan;
  const olc_tensor* inputs;
  int n;
  char* y;
  VariadicFn fn;
  bool stream;
};

void variadic_range(void* user, int64_t b0, int64_t b1, int64_t e0, int64_t e1) {
  const VarRun* r = static_cast<const VarRun*>(user);
  const BroadcastPlan& p = *r->plan;
  const size_t z = r->st->size;
  const void* ptrs[kMaxBroadcastInputs];
  BlockCursor c(p, b0);
  for (int64_t blk = b0; blk < b1; ++blk) {
    for (int j = 0; j < r->n; ++j)
      ptrs[j] = static_cast<const char*>(r->inputs[j].data) + (c.offset[j] + e0 * p.inner_stride[j]) * z;
    r->fn(ptrs, p.inner_stride, r->n, r->y + (blk * p.inner + e0) * z, e1 - e0);
    c.next();
  }
  if (r->stream) r->st->streaming.fence();
}

}  // namespace

void* variadic_create(const olc_core_api* capi, const olc_node_info* node, char* error, size_t size) {
  VarOp op;
  if (!std::strcmp(node->op_type, "Sum")) op = VarOp::Sum;
  else if (!std::strcmp(node->op_type, "Mean")) op = VarOp::Mean;
  else if (!std::strcmp(node->op_type, "Min")) op = VarOp::Min;
  else if (!std::strcmp(node->op_type, "Max")) op = VarOp::Max;
  else { fail(error, size, "op %s is not a variadic op of olc_elementwise", node->op_type); return nullptr; }
  if (node->n_inputs < 1 || node->n_inputs > kMaxBroadcastInputs || node->n_outputs != 1) {
    fail(error, size, "expects 1 to %d inputs and 1 output, got %d and %d", kMaxBroadcastInputs, node->n_inputs,
         node->n_outputs);
    return nullptr;
  }
  static const char* const none[] = {nullptr};
  if (!check_known_attributes(node, none, error, size)) return nullptr;
  const int32_t t = node->input_dtypes[0];
  for (int32_t i = 1; i < node->n_inputs; ++i)
    if (node->input_dtypes[i] != t) {
      fail(error, size, "input %d has type %s, input 0 has %s", i, olc_dtype_name(node->input_dtypes[i]),
           olc_dtype_name(t));
      return nullptr;
    }
  const int32_t lv = capi->simd_level();
  VariadicFn fn = nullptr;
  const char* isa = "scalar";
  if (lv >= OLC_SIMD_AVX512 && (fn = nary_avx512::select_variadic(op, t))) isa = "avx512";
  else if (lv >= OLC_SIMD_AVX2 && (fn = nary_avx2::select_variadic(op, t))) isa = "avx2";
  else fn = nary_scalar::select_variadic(op, t);
  if (!fn) { fail(error, size, "unsupported input type %s", olc_dtype_name(t)); return nullptr; }
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != t) {
    fail(error, size, "output type %s does not match the input type %s", olc_dtype_name(node->output_dtypes[0]),
         olc_dtype_name(t));
    return nullptr;
  }
  auto* st = new (std::nothrow) VariadicState();
  if (!st) { fail(error, size, "out of memory"); return nullptr; }
  st->op = op;
  st->op_name = node->op_type[0] == 'S' ? "Sum" : node->op_type[1] == 'e' ? "Mean" : node->op_type[1] == 'i' ? "Min" : "Max";
  st->dtype = t;
  st->size = olc_dtype_size(t);
  st->fn = fn;
  st->isa = isa;
  st->tuning.declare(st->op_name, isa, t, false);
  st->streaming = stream_level(isa);
  if (st->streaming.fence)
    st->stream_fn = st->streaming.avx512 ? nary_avx512::select_variadic_stream(op, t)
                                         : nary_avx2::select_variadic_stream(op, t);
  st->stream.declare(capi, kLibrary, st->op_name, isa, t, true);
  return st;
}

int32_t variadic_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const auto* st = static_cast<const VariadicState*>(state);
  if (n_inputs < 1 || n_inputs > kMaxBroadcastInputs || n_outputs != 1)
    return run_error(ctx, "expects 1 to %d inputs and 1 output, got %d and %d", kMaxBroadcastInputs, n_inputs, n_outputs);
  for (int32_t i = 0; i < n_inputs; ++i)
    if (inputs[i].dtype != st->dtype)
      return run_error(ctx, "input %d has type %s, the kernel was created for %s", i, olc_dtype_name(inputs[i].dtype),
                       olc_dtype_name(st->dtype));
  if (!check_inputs(ctx, n_inputs, inputs)) return OLC_ERROR;
  char err[256];
  std::shared_ptr<const BroadcastPlan> plan = st->plans.get(n_inputs, inputs, err, sizeof err);
  if (!plan) return run_error(ctx, "%s", err);
  const BroadcastPlan& p = *plan;
  void* y = api()->allocate_output(ctx, 0, st->dtype, p.out_rank, p.out_shape);
  if (!y && p.count > 0) return OLC_ERROR;
  if (p.count == 0) {
    api()->record_usage_detail(ctx, st->isa);
    return OLC_OK;
  }
  VarRun r{st, &p, inputs, n_inputs, static_cast<char*>(y), st->fn, false};
  const int64_t z = static_cast<int64_t>(st->size);
  const SplitParams sp = st->tuning.params(p.family, z * (n_inputs + 1));
  if (st->stream_fn && run_streams(ctx, st->stream, p, sp, n_inputs, inputs, z)) {
    r.fn = st->stream_fn;
    r.stream = true;
  }
  api()->record_usage_detail(ctx, r.stream ? st->streaming.detail : st->isa);
  run_split(ctx, p, sp, &variadic_range, &r);
  return OLC_OK;
}

void variadic_destroy(void* state) { delete static_cast<VariadicState*>(state); }

}  // namespace nary
}  // namespace olc_ew
