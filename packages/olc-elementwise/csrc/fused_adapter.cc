// The fused elementwise kernel: program validation (create), input and
// broadcast validation (run, before the output is allocated), and the tile
// scheduler. Compiled without ISA flags; the arithmetic lives in the
// per-ISA fused_*.cc and unary_*.cc translation units.
//
// Program (attributes of an olc.fused::ElementwisePlan node):
//   ops          STRING  step op names in evaluation order, ';'-separated
//   args         INTS    two value indices per step (-1: no second operand)
//   constants    FLOATS  scalar constants (optional)
//   step_floats  FLOATS  alpha, beta, gamma per step (optional; 0 otherwise)
// Value indices: [0, n_inputs) the node's inputs, then the constants, then
// the results of earlier steps. The last step's result is the output.
#include "fused_adapter.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "broadcast.h"
#include "fused_common.h"
#include "stream_policy.h"
#include "unary_common.h"

namespace olc_ew {
namespace {

const olc_core_api* g_api = nullptr;
constexpr const char* kLibrary = "olc_elementwise";
constexpr const char* kKernel = "ElementwisePlan";
constexpr int kMaxSteps = 64;

struct UnaryName {
  const char* name;
  Op op;
  bool costly;
};

// The float-valued unary ops of the family (the BOOL predicates IsNaN and
// IsInf, Not and the integer-only BitwiseNot are not fusable). step_floats
// carry alpha, beta, gamma; Shrink's lambd and bias come as alpha and beta.
const std::vector<UnaryName>& unary_names() {
  static const std::vector<UnaryName> v = {
      {"Abs", Op::Abs, false},        {"Neg", Op::Neg, false},
      {"Exp", Op::Exp, true},         {"Log", Op::Log, true},
      {"Sqrt", Op::Sqrt, false},      {"Reciprocal", Op::Reciprocal, false},
      {"Sigmoid", Op::Sigmoid, true}, {"HardSigmoid", Op::HardSigmoid, false},
      {"Tanh", Op::Tanh, true},       {"Relu", Op::Relu, false},
      {"LeakyRelu", Op::LeakyRelu, false}, {"Elu", Op::Elu, true},
      {"Selu", Op::Selu, true},       {"Softplus", Op::Softplus, true},
      {"Gelu", Op::Gelu, true},       {"GeluTanh", Op::GeluTanh, true},
      {"Erf", Op::Erf, true},         {"Floor", Op::Floor, false},
      {"Ceil", Op::Ceil, false},      {"Round", Op::Round, false},
      {"Sign", Op::Sign, false},      {"Sin", Op::Sin, true},
      {"Cos", Op::Cos, true},         {"HardSwish", Op::HardSwish, false},
      {"Mish", Op::Mish, true},       {"Softsign", Op::Softsign, false},
      {"Celu", Op::Celu, true},       {"ThresholdedRelu", Op::ThresholdedRelu, false},
      {"Shrink", Op::Shrink, false},  {"Tan", Op::Tan, true},
      {"Asin", Op::Asin, true},       {"Acos", Op::Acos, true},
      {"Atan", Op::Atan, true},       {"Sinh", Op::Sinh, true},
      {"Cosh", Op::Cosh, true},       {"Asinh", Op::Asinh, true},
      {"Acosh", Op::Acosh, true},     {"Atanh", Op::Atanh, true},
  };
  return v;
}

struct BinaryName {
  const char* name;
  FusedBinOp op;
};
const BinaryName kBinaryNames[] = {
    {"Add", FusedBinOp::kAdd}, {"Sub", FusedBinOp::kSub}, {"Mul", FusedBinOp::kMul}, {"Div", FusedBinOp::kDiv}};

struct Step {
  bool binary;
  FusedBinOp bop;
  Op uop;
  UnaryFn ufn;
  UnaryParams params;
  int a, b;  // value indices
};

struct FusedState {
  int32_t dtype;
  int n_inputs;
  int n_values;  // inputs + constants + steps
  std::vector<float> constants;
  std::vector<Step> steps;
  const FusedTileOps* tile;
  const char* isa;
  const olc_tuning_param* parallel_min_elements;
  const olc_tuning_param* tile_elements;
  const olc_tuning_param* max_participants;
  const olc_tuning_param* specialized;
  StreamPolicy stream;
  const char* stream_isa = nullptr;  // usage detail of a run with non-temporal stores
  // The program is the SwiGLU gate: inputs swiglu_gate and 1 - swiglu_gate.
  bool swiglu = false;
  int swiglu_gate = 0;
  // The program is Mul(x, constant 0) then Add with the other input:
  // inputs scale_x and 1 - scale_x.
  bool scale_add = false;
  int scale_x = 0;
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

std::vector<std::string> split_ops(const char* s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = s; *p; ++p) {
    if (*p == ';') {
      out.push_back(cur);
      cur.clear();
    } else if (*p != ' ') {
      cur.push_back(*p);
    }
  }
  out.push_back(cur);
  return out;
}

UnaryFn select_unary(int32_t level, Op op, const char** isa) {
  UnaryFn fn = nullptr;
  if (level >= OLC_SIMD_AVX512 && (fn = avx512::select(op, OLC_DTYPE_FLOAT))) {
    *isa = "avx512";
    return fn;
  }
  if (level >= OLC_SIMD_AVX2 && (fn = avx2::select(op, OLC_DTYPE_FLOAT))) {
    *isa = "avx2";
    return fn;
  }
  *isa = "scalar";
  return scalar::select(op, OLC_DTYPE_FLOAT);
}

bool parse_program(const olc_node_info* node, int32_t level, FusedState* st, bool* costly, char* error,
                   size_t error_size) {
  const olc_attribute* ops = nullptr;
  const olc_attribute* args = nullptr;
  const olc_attribute* consts = nullptr;
  const olc_attribute* floats = nullptr;
  for (int32_t k = 0; k < node->n_attributes; ++k) {
    const olc_attribute& a = node->attributes[k];
    const char* name = a.name ? a.name : "";
    const olc_attribute** slot = nullptr;
    int32_t want = 0;
    if (!std::strcmp(name, "ops")) slot = &ops, want = OLC_ATTR_STRING;
    else if (!std::strcmp(name, "args")) slot = &args, want = OLC_ATTR_INTS;
    else if (!std::strcmp(name, "constants")) slot = &consts, want = OLC_ATTR_FLOATS;
    else if (!std::strcmp(name, "step_floats")) slot = &floats, want = OLC_ATTR_FLOATS;
    else return fail(error, error_size, "unknown attribute '%s'", name);
    if (a.type != want)
      return fail(error, error_size, "attribute '%s' has type code %d, expected %d", name, a.type, want);
    *slot = &a;
  }
  if (!ops || !ops->s) return fail(error, error_size, "attribute 'ops' is required");
  if (!args) return fail(error, error_size, "attribute 'args' is required");
  const std::vector<std::string> names = split_ops(ops->s);
  const int n_steps = static_cast<int>(names.size());
  if (n_steps < 1 || n_steps > kMaxSteps)
    return fail(error, error_size, "a program has 1 to %d steps, got %d", kMaxSteps, n_steps);
  if (args->count != 2 * static_cast<int64_t>(n_steps))
    return fail(error, error_size, "attribute 'args' needs 2 entries per step (%d), got %lld", 2 * n_steps,
                static_cast<long long>(args->count));
  if (floats && floats->count != 3 * static_cast<int64_t>(n_steps))
    return fail(error, error_size, "attribute 'step_floats' needs 3 entries per step (%d), got %lld", 3 * n_steps,
                static_cast<long long>(floats->count));
  const int n_consts = consts ? static_cast<int>(consts->count) : 0;
  if (n_consts > 64) return fail(error, error_size, "at most 64 constants, got %d", n_consts);
  for (int c = 0; c < n_consts; ++c) st->constants.push_back(static_cast<float>(consts->floats[c]));

  std::vector<int> reads(st->n_inputs + n_consts + n_steps, 0);
  *costly = false;
  st->isa = "scalar";
  for (int k = 0; k < n_steps; ++k) {
    Step s{};
    const std::string& nm = names[k];
    const int limit = st->n_inputs + n_consts + k;  // values defined before step k
    s.a = static_cast<int>(args->ints[2 * k]);
    s.b = static_cast<int>(args->ints[2 * k + 1]);
    const BinaryName* bn = nullptr;
    for (const BinaryName& b : kBinaryNames)
      if (nm == b.name) bn = &b;
    const UnaryName* un = nullptr;
    for (const UnaryName& u : unary_names())
      if (nm == u.name) un = &u;
    if (!bn && !un) return fail(error, error_size, "step %d: op '%s' cannot be fused", k, nm.c_str());
    if (args->ints[2 * k] < 0 || args->ints[2 * k] >= limit)
      return fail(error, error_size, "step %d (%s): operand 0 refers to value %lld, defined are 0..%d", k,
                  nm.c_str(), static_cast<long long>(args->ints[2 * k]), limit - 1);
    ++reads[s.a];
    if (bn) {
      if (args->ints[2 * k + 1] < 0 || args->ints[2 * k + 1] >= limit)
        return fail(error, error_size, "step %d (%s): operand 1 refers to value %lld, defined are 0..%d", k,
                    nm.c_str(), static_cast<long long>(args->ints[2 * k + 1]), limit - 1);
      ++reads[s.b];
      s.binary = true;
      s.bop = bn->op;
    } else {
      if (args->ints[2 * k + 1] != -1)
        return fail(error, error_size, "step %d (%s): a unary step takes one operand (operand 1 must be -1)", k,
                    nm.c_str());
      s.binary = false;
      s.b = -1;
      s.uop = un->op;
      const char* isa = "scalar";
      s.ufn = select_unary(level, un->op, &isa);
      if (!s.ufn) return fail(error, error_size, "step %d: no float32 kernel for %s", k, nm.c_str());
      if (un->costly) *costly = true;
      if (std::strcmp(isa, "scalar")) st->isa = isa;
      if (floats) {
        const double al = floats->floats[3 * k], be = floats->floats[3 * k + 1], ga = floats->floats[3 * k + 2];
        if (!std::isfinite(al) || !std::isfinite(be) || !std::isfinite(ga))
          return fail(error, error_size, "step %d (%s): step_floats must be finite", k, nm.c_str());
        if (un->op == Op::Celu && static_cast<float>(al) == 0.0f)
          return fail(error, error_size, "step %d (Celu): alpha must be non-zero", k);
        s.params.alpha = static_cast<float>(al);
        s.params.beta = static_cast<float>(be);
        s.params.gamma = static_cast<float>(ga);
        s.params.alpha_d = s.params.alpha;
        s.params.beta_d = s.params.beta;
        s.params.gamma_d = s.params.gamma;
      }
      s.params.stream = false;
    }
    st->steps.push_back(s);
  }
  for (int i = 0; i < st->n_inputs; ++i)
    if (!reads[i]) return fail(error, error_size, "input %d is not read by the program", i);
  st->n_values = st->n_inputs + n_consts + n_steps;
  return true;
}

// Programs with a one-pass loop of their own: Sigmoid(g); Mul(g, s0) (either
// order); Mul(s1, u) (either order), with g and u the two inputs.
void detect_patterns(FusedState* st) {
  const std::vector<Step>& s = st->steps;
  // Mul(x, c) or Mul(c, x) with c the one constant; then Add(t, m) or Add(m, t).
  if (st->n_inputs == 2 && st->constants.size() == 1 && s.size() == 2 && s[0].binary &&
      s[0].bop == FusedBinOp::kMul && s[1].binary && s[1].bop == FusedBinOp::kAdd) {
    const int c = 2, t = 3;
    int x = -1;
    if (s[0].a == c && s[0].b < 2) x = s[0].b;
    else if (s[0].b == c && s[0].a < 2) x = s[0].a;
    if (x >= 0 && ((s[1].a == t && s[1].b == 1 - x) || (s[1].b == t && s[1].a == 1 - x))) {
      st->scale_add = true;
      st->scale_x = x;
    }
  }
  if (st->n_inputs != 2 || !st->constants.empty() || s.size() != 3 || !st->tile->swiglu || !st->tile->swiglu_bf16)
    return;
  const int v0 = 2, v1 = 3;  // results of steps 0 and 1
  if (s[0].binary || s[0].uop != Op::Sigmoid || s[0].a > 1) return;
  const int g = s[0].a, u = 1 - g;
  const bool m1 = s[1].binary && s[1].bop == FusedBinOp::kMul &&
                  ((s[1].a == g && s[1].b == v0) || (s[1].a == v0 && s[1].b == g));
  const bool m2 = s[2].binary && s[2].bop == FusedBinOp::kMul &&
                  ((s[2].a == v1 && s[2].b == u) || (s[2].a == u && s[2].b == v1));
  if (m1 && m2) {
    st->swiglu = true;
    st->swiglu_gate = g;
  }
}

void* fused_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t error_size) {
  if (node->n_outputs != 1) {
    fail(error, error_size, "expects 1 output, got %d", node->n_outputs);
    return nullptr;
  }
  if (node->n_inputs < 1 || node->n_inputs > kMaxBroadcastInputs) {
    fail(error, error_size, "expects 1 to %d inputs, got %d", kMaxBroadcastInputs, node->n_inputs);
    return nullptr;
  }
  const int32_t dtype = node->input_dtypes[0];
  if (dtype != OLC_DTYPE_FLOAT && dtype != OLC_DTYPE_BFLOAT16) {
    fail(error, error_size, "unsupported input type %s (float32 and bfloat16 are fused)", olc_dtype_name(dtype));
    return nullptr;
  }
  for (int32_t i = 1; i < node->n_inputs; ++i) {
    if (node->input_dtypes[i] != dtype) {
      fail(error, error_size, "input %d has type %s, input 0 has %s: a fused program has one element type", i,
           olc_dtype_name(node->input_dtypes[i]), olc_dtype_name(dtype));
      return nullptr;
    }
  }
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != dtype) {
    fail(error, error_size, "output type %s differs from the input type %s", olc_dtype_name(node->output_dtypes[0]),
         olc_dtype_name(dtype));
    return nullptr;
  }
  std::unique_ptr<FusedState> st(new (std::nothrow) FusedState());
  if (!st) {
    fail(error, error_size, "out of memory");
    return nullptr;
  }
  st->dtype = dtype;
  st->n_inputs = node->n_inputs;
  const int32_t level = api->simd_level();
  bool costly = false;
  if (!parse_program(node, level, st.get(), &costly, error, error_size)) return nullptr;
  // The binary and conversion loops run at the session's level.
  if (level >= OLC_SIMD_AVX512) st->tile = avx512::fused_tile_ops(), st->isa = "avx512";
  else if (level >= OLC_SIMD_AVX2) st->tile = avx2::fused_tile_ops(), st->isa = "avx2";
  else st->tile = scalar::fused_tile_ops(), st->isa = "scalar";
  // Chains with a transcendental step are compute-bound and pay for threads
  // early; pure arithmetic chains are memory-bound.
  const int64_t par_min = costly ? 16384 : 65536;
  st->parallel_min_elements =
      api->tuning_declare_int(kLibrary, kKernel, st->isa, dtype, "parallel_min_elements", par_min);
  st->tile_elements = api->tuning_declare_int(kLibrary, kKernel, st->isa, dtype, "tile_elements", 512);
  st->max_participants = api->tuning_declare_int(kLibrary, kKernel, st->isa, dtype, "max_participants", 0);
  st->specialized = api->tuning_declare_int(kLibrary, kKernel, st->isa, dtype, "specialized", 1);
  // Non-temporal stores on the one-pass scale-and-add loop (stream_policy.h).
  st->stream.declare(api, kLibrary, kKernel, st->isa, dtype, true);
  st->stream_isa = stream_detail(st->isa);
  detect_patterns(st.get());
  return st.release();
}

struct Job {
  const FusedState* st;
  const BroadcastPlan* plan;
  const char* const* in;  // input base pointers
  char* out;
  int64_t tile;            // elements per tile
  int64_t tiles_per_block;
  bool swiglu;     // the one-pass SwiGLU loop applies to this run
  bool scale_add;  // the one-pass scale-and-add loop applies to this run
  bool stream;     // ... and writes with non-temporal stores
};

// A value of one tile: a pointer to n floats, or to one float for all.
struct Val {
  const float* p;
  bool scalar;
};

void run_items(void* user, int64_t begin, int64_t end) {
  const Job& j = *static_cast<const Job*>(user);
  const FusedState& st = *j.st;
  const BroadcastPlan& plan = *j.plan;
  const int n_in = st.n_inputs;
  const int n_const = static_cast<int>(st.constants.size());
  const int n_steps = static_cast<int>(st.steps.size());
  const bool bf16 = st.dtype == OLC_DTYPE_BFLOAT16;
  const size_t esize = bf16 ? 2 : 4;
  // Scratch: a tile per input (bfloat16 widened) and per step result; a few
  // KiB, L1-resident across the steps of one tile.
  const int64_t T = j.tile;
  // (The one-pass loops need none.)
  const bool one_pass = j.swiglu || j.scale_add;
  std::unique_ptr<float[]> scratch(one_pass ? nullptr : new float[static_cast<size_t>((n_in + n_steps) * T + 16)]);
  float* in_buf = scratch.get();
  float* step_buf = in_buf ? in_buf + n_in * T : nullptr;
  Val vals[kMaxBroadcastInputs + 64 + kMaxSteps];
  for (int c = 0; c < n_const; ++c) vals[n_in + c] = Val{&st.constants[c], true};

  int64_t block = begin / j.tiles_per_block;
  BlockCursor cur(plan, block);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / j.tiles_per_block;
    if (b != cur.block) cur.next();  // items are consecutive: at most one block ahead
    const int64_t e0 = (item - b * j.tiles_per_block) * T;
    const int64_t n = std::min(T, plan.inner - e0);
    const int64_t out_off = b * plan.inner + e0;
    if (j.swiglu && bf16) {
      const int g = st.swiglu_gate;
      const uint16_t* gp = reinterpret_cast<const uint16_t*>(j.in[g]) + cur.offset[g] + e0;
      const uint16_t* up = reinterpret_cast<const uint16_t*>(j.in[1 - g]) + cur.offset[1 - g] + e0;
      st.tile->swiglu_bf16(gp, up, reinterpret_cast<uint16_t*>(j.out) + out_off, n);
      continue;
    }
    if (j.swiglu) {
      const int g = st.swiglu_gate;
      const float* gp = reinterpret_cast<const float*>(j.in[g]) + cur.offset[g] + e0;
      const float* up = reinterpret_cast<const float*>(j.in[1 - g]) + cur.offset[1 - g] + e0;
      st.tile->swiglu(gp, up, reinterpret_cast<float*>(j.out) + out_off, n);
      continue;
    }
    if (j.scale_add) {
      const int x = st.scale_x;
      const float* xp = reinterpret_cast<const float*>(j.in[x]) + cur.offset[x] + e0;
      const float* mp = reinterpret_cast<const float*>(j.in[1 - x]) + cur.offset[1 - x] + e0;
      (j.stream ? st.tile->scale_add_stream : st.tile->scale_add)(xp, st.constants[0], mp,
                                                                    reinterpret_cast<float*>(j.out) + out_off, n);
      continue;
    }
    for (int i = 0; i < n_in; ++i) {
      const bool sc = plan.inner_stride[i] == 0;
      const int64_t off = cur.offset[i] + (sc ? 0 : e0);
      float* buf = in_buf + i * T;
      if (bf16) {
        st.tile->load_bf16(reinterpret_cast<const uint16_t*>(j.in[i]) + off, buf, sc ? 1 : n);
        vals[i] = Val{buf, sc};
      } else {
        vals[i] = Val{reinterpret_cast<const float*>(j.in[i]) + off, sc};
      }
    }
    for (int k = 0; k < n_steps; ++k) {
      const Step& s = st.steps[k];
      const Val a = vals[s.a];
      float* buf = step_buf + k * T;
      const bool last = k == n_steps - 1;
      if (s.binary) {
        const Val bv = vals[s.b];
        const bool sc = a.scalar && bv.scalar;
        float* dst = (last && !bf16 && !sc) ? reinterpret_cast<float*>(j.out) + out_off : buf;
        st.tile->binary(s.bop, a.p, a.scalar, bv.p, bv.scalar, dst, sc ? 1 : n);
        vals[n_in + n_const + k] = Val{dst, sc};
      } else {
        float* dst = (last && !bf16 && !a.scalar) ? reinterpret_cast<float*>(j.out) + out_off : buf;
        s.ufn(a.p, dst, a.scalar ? 1 : n, &s.params);
        vals[n_in + n_const + k] = Val{dst, a.scalar};
      }
    }
    const Val r = vals[n_in + n_const + n_steps - 1];
    if (r.scalar) {
      // Every operand was one value along this block: broadcast the result.
      float* fill = step_buf + (n_steps - 1) * T;
      const float v = *r.p;
      for (int64_t e = 0; e < n; ++e) fill[e] = v;
      if (bf16) st.tile->store_bf16(fill, reinterpret_cast<uint16_t*>(j.out) + out_off, n);
      else std::memcpy(reinterpret_cast<float*>(j.out) + out_off, fill, static_cast<size_t>(n) * esize);
    } else if (bf16) {
      st.tile->store_bf16(r.p, reinterpret_cast<uint16_t*>(j.out) + out_off, n);
    }
  }
  if (j.stream) st.tile->stream_fence();
}

int32_t fused_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs,
                  int32_t n_outputs) {
  const olc_core_api* api = g_api;
  const FusedState* st = static_cast<const FusedState*>(state);
  char msg[200];
  if (n_inputs != st->n_inputs || n_outputs != 1) {
    std::snprintf(msg, sizeof msg, "expects %d inputs and 1 output, got %d and %d", st->n_inputs, n_inputs,
                  n_outputs);
    return api->set_error(ctx, msg);
  }
  int32_t ranks[kMaxBroadcastInputs];
  const int64_t* shapes[kMaxBroadcastInputs];
  for (int i = 0; i < n_inputs; ++i) {
    const olc_tensor& t = inputs[i];
    if (t.dtype != st->dtype) {
      std::snprintf(msg, sizeof msg, "input %d has type %s, the kernel was created for %s", i,
                    olc_dtype_name(t.dtype), olc_dtype_name(st->dtype));
      return api->set_error(ctx, msg);
    }
    const int64_t n = olc_element_count(&t);
    if (n < 0) {
      std::snprintf(msg, sizeof msg, "input %d has a negative dimension or too many elements", i);
      return api->set_error(ctx, msg);
    }
    if (n > 0 && t.data == nullptr) {
      std::snprintf(msg, sizeof msg, "input %d has no data", i);
      return api->set_error(ctx, msg);
    }
    ranks[i] = t.ndim;
    shapes[i] = t.shape;
  }
  BroadcastPlan plan;
  if (!build_broadcast_plan(n_inputs, ranks, shapes, &plan, msg, sizeof msg)) return api->set_error(ctx, msg);
  void* y = api->allocate_output(ctx, 0, st->dtype, plan.out_rank, plan.out_shape);
  if (!y && plan.count > 0) return OLC_ERROR;
  if (plan.count == 0) {
    api->record_usage_detail(ctx, st->isa);
    return OLC_OK;
  }

  int64_t tile = api->tuning_read_int(st->tile_elements);
  tile = std::min<int64_t>(std::max<int64_t>(16, (tile + 15) / 16 * 16), 16384);
  const char* in[kMaxBroadcastInputs];
  for (int i = 0; i < n_inputs; ++i) in[i] = static_cast<const char*>(inputs[i].data);
  const int64_t tiles_per_block = (plan.inner + tile - 1) / tile;
  // The one-pass loop needs both operands varying along the inner block.
  const bool swiglu = st->swiglu && plan.inner_stride[0] == 1 &&
                      plan.inner_stride[1] == 1 && api->tuning_read_int(st->specialized) != 0;
  const bool scale_add = st->scale_add && st->dtype == OLC_DTYPE_FLOAT && plan.inner_stride[0] == 1 &&
                         plan.inner_stride[1] == 1 && api->tuning_read_int(st->specialized) != 0;
  const int64_t items = plan.blocks * tiles_per_block;
  const int64_t par_min = api->tuning_read_int(st->parallel_min_elements);
  const bool serial = par_min <= 0 || plan.count < par_min || items < 2 || api->concurrency(ctx) <= 1;
  bool stream = false;
  if (scale_add && st->tile->scale_add_stream)
    stream = st->stream.wants(api, bytes_read(n_inputs, inputs), plan.count * static_cast<int64_t>(sizeof(float)),
                              serial);
  api->record_usage_detail(ctx, stream ? st->stream_isa : st->isa);
  Job job{st, &plan, in, static_cast<char*>(y), tile, tiles_per_block, swiglu, scale_add, stream};
  if (serial) {
    run_items(&job, 0, items);
    return OLC_OK;
  }
  // Ranges of whole tiles; at least ~8 KiB of output per range so the
  // per-range setup (scratch, cursor seek) stays negligible.
  const int64_t grain = std::max<int64_t>(1, 2048 / tile);
  const int64_t maxp = api->tuning_read_int(st->max_participants);
  api->parallel_for(ctx, items, grain, static_cast<int32_t>(std::max<int64_t>(0, maxp)), &run_items, &job);
  return OLC_OK;
}

void fused_destroy(void* state) { delete static_cast<FusedState*>(state); }

olc_kernel_vtable g_vtable = {OLC_ABI_VERSION, 0u, "olc_elementwise::ElementwisePlan",
                              &fused_create, &fused_run, &fused_destroy};

}  // namespace

void set_fused_core_api(const olc_core_api* api) { g_api = api; }

const olc_kernel_vtable* fused_vtable() { return &g_vtable; }

std::vector<std::string> fused_op_names() {
  std::vector<std::string> out;
  for (const UnaryName& u : unary_names()) out.emplace_back(u.name);
  for (const BinaryName& b : kBinaryNames) out.emplace_back(b.name);
  return out;
}

}  // namespace olc_ew
