// Adapters of the recurrent-state operators of hybrid linear-attention
// decoders: ai.onnx LinearAttention (27), com.microsoft LinearAttention (1)
// and ai.onnx CausalConvWithState (27). Attributes and types are checked at
// creation, shapes at run before any output exists; then the work is cut
// into items for the session's executor (the optimized kernels of
// linear_kernels.inc) or handed to the plain reference (linear_naive.cc).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "adapter_util.h"
#include "linear_common.h"

namespace olc_attn {
namespace {

const LinearKernels* linear_level() {
  const int32_t level = g_api->simd_level();
  return level >= OLC_SIMD_AVX512 ? avx512::linear_kernels()
         : level >= OLC_SIMD_AVX2 ? avx2::linear_kernels()
                                  : scalar::linear_kernels();
}

// The common fields of Kernel (these kernels have no engine tuning).
void init_linear(Kernel* k, const LinearKernels** lk, const olc_node_info* node, bool naive) {
  k->naive = naive;
  k->n_inputs = node->n_inputs;
  k->n_outputs = node->n_outputs;
  k->in_dtypes.assign(node->input_dtypes, node->input_dtypes + node->n_inputs);
  k->out_dtypes.assign(node->output_dtypes, node->output_dtypes + node->n_outputs);
  if (naive) return;
  *lk = linear_level();
  k->isa_name = (*lk)->isa;
}

// Runs fn over [0, n) on the executor; false when a range ran out of memory.
template <class F>
bool run_ranges(olc_context* ctx, int64_t n, int64_t grain, F fn) {
  struct Job {
    F* fn;
    std::atomic<bool> oom{false};
  } job{&fn};
  g_api->parallel_for(
      ctx, n, grain, 0,
      [](void* user, int64_t begin, int64_t end) {
        Job& j = *static_cast<Job*>(user);
        try {
          (*j.fn)(begin, end);
        } catch (...) {  // std::bad_alloc of a range's scratch: reported after the loop
          j.oom.store(true);
        }
      },
      &job);
  return !job.oom.load();
}

// ---------------------------------------------------------- LinearAttention

struct LinearAttentionKernel : Kernel {
  const LinearKernels* lk = nullptr;
  bool ms = false;  // com.microsoft: inverse GQA, key heads dividing the kv heads, state_window
  int dt = kF32, sdt = kF32;
  int rule = kRuleGatedDelta;
  int64_t hq = 0, hkv = 0, chunk = 64, window = 0;
  float scale = 0.0f;
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_linear_attention(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<LinearAttentionKernel>();
  init_linear(k.get(), &k->lk, node, naive);
  k->ms = node->domain && std::strcmp(node->domain, "com.microsoft") == 0;
  Attrs a(node, error, es);
  std::vector<const char*> known = {"chunk_size", "kv_num_heads", "q_num_heads", "scale", "update_rule"};
  if (k->ms) known.push_back("state_window");
  std::string rule = "gated_delta";
  bool has_hq = false, has_hkv = false;
  if (!a.only(known) || !a.get_int("q_num_heads", &k->hq, &has_hq) || !a.get_int("kv_num_heads", &k->hkv, &has_hkv) ||
      !a.get_int("chunk_size", &k->chunk) || !a.get_float("scale", &k->scale) || !a.get_string("update_rule", &rule) ||
      !a.get_int("state_window", &k->window))
    return nullptr;
  if (!has_hq || !has_hkv) return fail(error, es, "q_num_heads and kv_num_heads are required"), nullptr;
  if (k->hq <= 0 || k->hkv <= 0)
    return fail(error, es, "q_num_heads and kv_num_heads must be positive, got %lld and %lld", (long long)k->hq,
                (long long)k->hkv),
           nullptr;
  if (k->ms ? (k->hq % k->hkv != 0 && k->hkv % k->hq != 0) : k->hq % k->hkv != 0)
    return fail(error, es,
                k->ms ? "q_num_heads (%lld) and kv_num_heads (%lld): one must be a multiple of the other"
                      : "q_num_heads (%lld) must be a multiple of kv_num_heads (%lld)",
                (long long)k->hq, (long long)k->hkv),
           nullptr;
  if (rule == "linear") k->rule = kRuleLinear;
  else if (rule == "gated") k->rule = kRuleGated;
  else if (rule == "delta") k->rule = kRuleDelta;
  else if (rule == "gated_delta") k->rule = kRuleGatedDelta;
  else
    return fail(error, es, "update_rule must be 'linear', 'gated', 'delta' or 'gated_delta', got '%s'", rule.c_str()),
           nullptr;
  if (!std::isfinite(k->scale)) return fail(error, es, "scale must be finite, got %g", k->scale), nullptr;
  if (k->window < 0 || k->window > 8)
    return fail(error, es, "state_window must be in [0, 8], got %lld", (long long)k->window), nullptr;
  // chunk_size only sets how many tokens' inputs are converted at once.
  k->chunk = std::max<int64_t>(1, std::min<int64_t>(k->chunk, 1024));
  if (node->n_inputs < 3 || node->n_inputs > 6)
    return fail(error, es, "expects 3 to 6 inputs, got %d", node->n_inputs), nullptr;
  if (node->n_outputs < 1 || node->n_outputs > 2)
    return fail(error, es, "expects 1 or 2 outputs, got %d", node->n_outputs), nullptr;
  static const char* names[] = {"query", "key", "value", "past_state", "decay", "beta"};
  k->dt = storage_of(node->input_dtypes[0]);
  if (k->dt < 0)
    return fail(error, es, "query has type %s (expected float32, float16 or bfloat16)",
                olc_dtype_name(node->input_dtypes[0])),
           nullptr;
  for (int i = 1; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (t == OLC_DTYPE_UNDEFINED) {
      if (i < 3) return fail(error, es, "input %d (%s) is required", i, names[i]), nullptr;
      continue;
    }
    if (i == 3 ? storage_of(t) < 0 : t != node->input_dtypes[0])
      return fail(error, es, "%s has type %s (expected %s)", names[i], olc_dtype_name(t),
                  i == 3 ? "float32, float16 or bfloat16" : olc_dtype_name(node->input_dtypes[0])),
             nullptr;
  }
  const bool gated = (k->rule & kRuleGated) != 0, delta = (k->rule & kRuleDelta) != 0;
  if (gated && !k->has_in(4)) return fail(error, es, "update_rule '%s' needs the decay input", rule.c_str()), nullptr;
  if (delta && !k->has_in(5)) return fail(error, es, "update_rule '%s' needs the beta input", rule.c_str()), nullptr;
  // ai.onnx: as onnx.reference, an input the rule does not read is an error
  // (onnxruntime's com.microsoft kernel ignores it).
  if (!k->ms && !gated && k->has_in(4))
    return fail(error, es, "update_rule '%s' takes no decay input", rule.c_str()), nullptr;
  if (!k->ms && !delta && k->has_in(5))
    return fail(error, es, "update_rule '%s' takes no beta input", rule.c_str()), nullptr;
  // The state type: past_state's, else present_state's as inferred, else T.
  int32_t st = k->has_in(3) ? node->input_dtypes[3] : OLC_DTYPE_UNDEFINED;
  if (st == OLC_DTYPE_UNDEFINED && node->n_outputs > 1) st = node->output_dtypes[1];
  k->sdt = st == OLC_DTYPE_UNDEFINED ? k->dt : storage_of(st);
  if (k->sdt < 0) return fail(error, es, "present_state has type %s", olc_dtype_name(st)), nullptr;
  if (k->has_in(3) && node->n_outputs > 1 && node->output_dtypes[1] != OLC_DTYPE_UNDEFINED &&
      node->output_dtypes[1] != node->input_dtypes[3])
    return fail(error, es, "present_state has type %s but past_state %s", olc_dtype_name(node->output_dtypes[1]),
                olc_dtype_name(node->input_dtypes[3])),
           nullptr;
  return k.release();
}

int32_t LinearAttentionKernel::run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const {
  const olc_tensor &Q = in[0], &K = in[1], &V = in[2];
  const olc_tensor* past = has_in(3) ? &in[3] : nullptr;
  const olc_tensor* decay = has_in(4) ? &in[4] : nullptr;
  const olc_tensor* beta = has_in(5) ? &in[5] : nullptr;
  if (Q.ndim != 3 || K.ndim != 3 || V.ndim != 3)
    return c.err("query, key and value must be 3-D (batch, tokens, heads * head size), got %s, %s and %s",
                 shape_str(Q).c_str(), shape_str(K).c_str(), shape_str(V).c_str());
  const int64_t B = Q.shape[0], T = Q.shape[1];
  if (K.shape[0] != B || V.shape[0] != B || K.shape[1] != T || V.shape[1] != T)
    return c.err("query %s, key %s and value %s disagree on the batch size or the number of tokens",
                 shape_str(Q).c_str(), shape_str(K).c_str(), shape_str(V).c_str());
  if (Q.shape[2] % hq)
    return c.err("query's last dimension %lld is not a multiple of q_num_heads %lld", (long long)Q.shape[2],
                 (long long)hq);
  if (V.shape[2] % hkv)
    return c.err("value's last dimension %lld is not a multiple of kv_num_heads %lld", (long long)V.shape[2],
                 (long long)hkv);
  const int64_t dk = Q.shape[2] / hq, dv = V.shape[2] / hkv;
  int64_t hk = hkv;
  if (ms && dk > 0) {  // onnxruntime: key heads of size dk, each shared by kv_num_heads / key heads kv heads
    hk = K.shape[2] / dk;
    if (K.shape[2] % dk || hk == 0 || hkv % hk)
      return c.err("key's last dimension %lld must be a multiple of the head size %lld whose quotient divides "
                   "kv_num_heads %lld",
                   (long long)K.shape[2], (long long)dk, (long long)hkv);
  } else if (K.shape[2] != hkv * dk) {
    return c.err("key's last dimension is %lld, expected kv_num_heads %lld x head size %lld (query's last dimension "
                 "%lld / q_num_heads %lld)",
                 (long long)K.shape[2], (long long)hkv, (long long)dk, (long long)Q.shape[2], (long long)hq);
  }
  bool per_key = false, per_head = false;
  if (decay) {
    per_key = decay->ndim == 3 && decay->shape[2] == hkv * dk && dk != 1;
    if (decay->ndim != 3 || decay->shape[0] != B || decay->shape[1] != T ||
        (decay->shape[2] != hkv && decay->shape[2] != hkv * dk))
      return c.err("decay has shape %s, expected [%lld, %lld, %lld] (one per kv head) or [%lld, %lld, %lld] (one per "
                   "key dimension)",
                   shape_str(*decay).c_str(), (long long)B, (long long)T, (long long)hkv, (long long)B, (long long)T,
                   (long long)(hkv * dk));
  }
  if (beta) {
    per_head = beta->ndim == 3 && beta->shape[2] == hkv;
    if (beta->ndim != 3 || beta->shape[0] != B || beta->shape[1] != T || (beta->shape[2] != hkv && beta->shape[2] != 1))
      return c.err("beta has shape %s, expected [%lld, %lld, %lld] or [%lld, %lld, 1]", shape_str(*beta).c_str(),
                   (long long)B, (long long)T, (long long)hkv, (long long)B, (long long)T);
  }
  std::vector<int64_t> sshape = {B, hkv, dk, dv};
  if (window > 0) sshape.insert(sshape.begin(), window);
  if (past) {
    bool ok = past->ndim == static_cast<int32_t>(sshape.size());
    for (size_t i = 0; ok && i < sshape.size(); ++i) ok = past->shape[i] == sshape[i];
    if (!ok)
      return c.err("past_state has shape %s, expected %s (%s(batch, kv_num_heads, head size %lld, value head size %lld))",
                   shape_str(*past).c_str(), shape_str(sshape).c_str(), window > 0 ? "state_window, " : "",
                   (long long)dk, (long long)dv);
  }

  // Validation done: outputs.
  const int64_t hout = std::max(hq, hkv);
  bool ok;
  void* y = alloc_out(c, *this, 0, in[0].dtype, {B, T, hout * dv}, &ok);
  if (!ok) return OLC_ERROR;
  void* present = nullptr;
  if (n_outputs > 1) {
    const int32_t sdtype = sdt == kF32 ? OLC_DTYPE_FLOAT : sdt == kF16 ? OLC_DTYPE_FLOAT16 : OLC_DTYPE_BFLOAT16;
    int64_t n = 1;
    for (int64_t d : sshape) n *= d;
    present = g_api->allocate_output(c.ctx, 1, sdtype, static_cast<int32_t>(sshape.size()), sshape.data());
    if (!present && n > 0) return OLC_ERROR;
  }
  const int64_t nstate = B * hkv * dk * dv;
  std::vector<char> scratch;
  if (!present) {  // present_state not asked for: the kernels still need somewhere to write it
    scratch.resize(static_cast<size_t>(nstate * (window > 0 ? window : 1)) * storage_size(sdt));
    present = scratch.data();
  }

  LinAttnProblem p;
  p.dt = dt;
  p.sdt = sdt;
  p.rule = rule;
  p.B = B, p.T = T, p.Hq = hq, p.Hk = hk, p.Hkv = hkv, p.dk = dk, p.dv = dv;
  p.q = Q.data, p.k = K.data, p.v = V.data;
  p.decay = decay ? decay->data : nullptr;
  p.beta = beta ? beta->data : nullptr;
  // With a window, past_state's last slot holds the state to continue from.
  p.past = past ? static_cast<const char*>(past->data) +
                      static_cast<size_t>(window > 0 ? (window - 1) * nstate : 0) * storage_size(sdt)
                : nullptr;
  p.decay_per_key = per_key;
  p.beta_per_head = per_head;
  p.scale = scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(dk));
  p.window = window;
  p.chunk = chunk;
  p.y = y;
  p.present = present;
  if (naive) {
    naive::linear_attention(p);
    return OLC_OK;
  }
  // Work items: one per (batch, kv head), its columns cut into a few ranges
  // of whole slabs when there are too few heads to keep every thread busy;
  // the wide slab when each state has one reader and the heads suffice.
  const int64_t heads = B * hkv;
  const int64_t conc = g_api->concurrency(c.ctx);
  p.wide = (hq <= hkv) && heads >= 4 * conc;
  const int64_t slab = p.wide ? lk->slab_wide : lk->slab;
  const int64_t nslab = (dv + slab - 1) / slab;
  if (heads == 0 || nslab == 0) return OLC_OK;
  const int64_t split = std::max<int64_t>(1, std::min(nslab, (4 * conc + heads - 1) / heads));
  std::vector<LinItem> items;
  items.reserve(static_cast<size_t>(heads * split));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < hkv; ++g)
      for (int64_t s = 0; s < split; ++s) {
        const int64_t s0 = nslab * s / split, s1 = nslab * (s + 1) / split;
        if (s1 > s0) items.push_back({b, g, s0 * slab, std::min(dv, s1 * slab)});
      }
  const LinItem* it = items.data();
  const LinearKernels* kk = lk;
  if (!run_ranges(c.ctx, static_cast<int64_t>(items.size()), 1,
                  [&](int64_t begin, int64_t end) { kk->linattn(&p, it, begin, end); }))
    return c.err("out of memory");
  return OLC_OK;
}

// ------------------------------------------------------ CausalConvWithState

struct CausalConvKernel : Kernel {
  const LinearKernels* lk = nullptr;
  int dt = kF32;
  int silu = 0;
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_causal_conv(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<CausalConvKernel>();
  init_linear(k.get(), &k->lk, node, naive);
  Attrs a(node, error, es);
  std::string act = "none";
  if (!a.only({"activation"}) || !a.get_string("activation", &act)) return nullptr;
  if (act == "silu" || act == "swish") k->silu = 1;
  else if (act != "none")
    return fail(error, es, "activation must be 'none', 'silu' or 'swish', got '%s'", act.c_str()), nullptr;
  if (node->n_inputs < 2 || node->n_inputs > 4)
    return fail(error, es, "expects 2 to 4 inputs, got %d", node->n_inputs), nullptr;
  if (node->n_outputs < 1 || node->n_outputs > 2)
    return fail(error, es, "expects 1 or 2 outputs, got %d", node->n_outputs), nullptr;
  static const char* names[] = {"input", "weight", "bias", "past_state"};
  k->dt = storage_of(node->input_dtypes[0]);
  if (k->dt < 0)
    return fail(error, es, "input has type %s (expected float32, float16 or bfloat16)",
                olc_dtype_name(node->input_dtypes[0])),
           nullptr;
  for (int i = 1; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (t == OLC_DTYPE_UNDEFINED) {
      if (i == 1) return fail(error, es, "input 1 (weight) is required"), nullptr;
      continue;
    }
    if (t != node->input_dtypes[0])
      return fail(error, es, "%s has type %s but input %s", names[i], olc_dtype_name(t),
                  olc_dtype_name(node->input_dtypes[0])),
             nullptr;
  }
  return k.release();
}

int32_t CausalConvKernel::run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const {
  const olc_tensor &X = in[0], &Wt = in[1];
  const olc_tensor* bias = has_in(2) ? &in[2] : nullptr;
  const olc_tensor* past = has_in(3) ? &in[3] : nullptr;
  if (X.ndim != 3) return c.err("input must be 3-D (batch, channels, length), got %s", shape_str(X).c_str());
  const int64_t B = X.shape[0], C = X.shape[1], L = X.shape[2];
  if (Wt.ndim != 3 || Wt.shape[0] != C || Wt.shape[1] != 1 || Wt.shape[2] < 1)
    return c.err("weight has shape %s, expected [%lld, 1, kernel size >= 1] (one depthwise kernel per channel of input "
                 "%s)",
                 shape_str(Wt).c_str(), (long long)C, shape_str(X).c_str());
  const int64_t K = Wt.shape[2];
  if (bias && (bias->ndim != 1 || bias->shape[0] != C))
    return c.err("bias has shape %s, expected [%lld]", shape_str(*bias).c_str(), (long long)C);
  if (past && (past->ndim != 3 || past->shape[0] != B || past->shape[1] != C || past->shape[2] != K - 1))
    return c.err("past_state has shape %s, expected [%lld, %lld, %lld]: a kernel of size %lld carries %lld positions",
                 shape_str(*past).c_str(), (long long)B, (long long)C, (long long)(K - 1), (long long)K,
                 (long long)(K - 1));

  bool ok;
  void* y = alloc_out(c, *this, 0, X.dtype, {B, C, L}, &ok);
  if (!ok) return OLC_ERROR;
  void* present = alloc_out(c, *this, 1, X.dtype, {B, C, K - 1}, &ok);
  if (!ok) return OLC_ERROR;
  std::vector<char> scratch;
  if (!present) {
    scratch.resize(static_cast<size_t>(B * C * (K - 1)) * storage_size(dt));
    present = scratch.data();
  }
  ConvProblem p;
  p.dt = dt;
  p.B = B, p.C = C, p.L = L, p.K = K;
  p.x = X.data, p.w = Wt.data;
  p.bias = bias ? bias->data : nullptr;
  p.past = past ? past->data : nullptr;
  p.y = y, p.present = present;
  p.silu = silu;
  if (naive) {
    naive::causal_conv(p);
    return OLC_OK;
  }
  if (B == 0 || C == 0) return OLC_OK;
  // Blocks of channels of one batch row holding about 8K positions (the
  // one-token decode: hundreds of channels per block).
  const int64_t per = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, L + K));
  const int64_t nb = (C + per - 1) / per;
  const LinearKernels* kk = lk;
  if (!run_ranges(c.ctx, B * nb, 1, [&](int64_t begin, int64_t end) {
        for (int64_t u = begin; u < end; ++u) {
          const int64_t b = u / nb, c0 = (u % nb) * per;
          kk->conv(&p, b, c0, std::min(C, c0 + per));
        }
      }))
    return c.err("out of memory");
  return OLC_OK;
}

}  // namespace

void linear_ops(std::vector<OpEntry>* out) {
  out->push_back({"ai.onnx", "LinearAttention", "LinearAttention", &make_linear_attention, 0});
  out->push_back({"com.microsoft", "LinearAttention", "MicrosoftLinearAttention", &make_linear_attention, 0});
  out->push_back({"ai.onnx", "CausalConvWithState", "CausalConvWithState", &make_causal_conv, 0});
}

}  // namespace olc_attn
