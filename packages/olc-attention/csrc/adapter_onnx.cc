// Adapters of the ai.onnx operators: Attention (23, 24, 25),
// RotaryEmbedding (23) and TensorScatter (24). Attributes and types are
// checked at creation, shapes and values at run before any output exists;
// then the problem goes to the engine (or the naive reference).
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "adapter_util.h"
#include "attn_naive.h"

namespace olc_attn {
namespace {

// sqrt(scale) rounded to the storage type, as Attention's definition
// scales Q and K each by it in their own type; the engine multiplies the
// scores by its square.
double rounded_sqrt_scale(int dt, double scale) {
  const double s = std::sqrt(scale);
  float f = static_cast<float>(s);
  if (dt == kF32) return f;
  uint16_t h;
  naive::store(dt, &h, 0, s);
  return naive::load(dt, &h, 0);
}

// ---------------------------------------------------------------- Attention

struct OnnxAttentionKernel : Kernel {
  int64_t opset = 23;
  int dt = kF32;
  int64_t q_heads = 0, kv_heads = 0;  // 0: not given
  int causal = 0;
  int qk_mode = 0;
  int64_t left = -1, right = -1;
  float softcap = 0.0f;
  bool has_scale = false;
  float scale = 0.0f;
  bool fused = false;  // olc.fused::Attention, the graph pass's node (see run)
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_attention(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<OnnxAttentionKernel>();
  init_common(k.get(), node, naive, "Attention");
  k->opset = node->opset;
  k->fused = std::strcmp(node->domain, "olc.fused") == 0;
  Attrs a(node, error, es);
  std::vector<const char*> known = {"is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode",
                                    "scale",     "softcap",      "softmax_precision"};
  if (k->opset >= 25) {
    known.push_back("left_window_size");
    known.push_back("right_window_size");
  }
  int64_t causal = 0, mode = 0, prec = 0;
  bool has_prec = false;
  if (!a.only(known) || !a.get_int("is_causal", &causal) || !a.get_int("q_num_heads", &k->q_heads) ||
      !a.get_int("kv_num_heads", &k->kv_heads) || !a.get_int("qk_matmul_output_mode", &mode) ||
      !a.get_int("softmax_precision", &prec, &has_prec) || !a.get_float("scale", &k->scale, &k->has_scale) ||
      !a.get_float("softcap", &k->softcap) || !a.get_int("left_window_size", &k->left) ||
      !a.get_int("right_window_size", &k->right))
    return nullptr;
  if (causal != 0 && causal != 1) return fail(error, es, "is_causal must be 0 or 1, got %lld", (long long)causal), nullptr;
  if (mode < 0 || mode > 3)
    return fail(error, es, "qk_matmul_output_mode must be 0, 1, 2 or 3, got %lld", (long long)mode), nullptr;
  if (has_prec && prec != 1 && prec != 10 && prec != 11 && prec != 16)
    return fail(error, es, "softmax_precision must be 1 (float), 10 (float16), 11 (double) or 16 (bfloat16), got %lld",
                (long long)prec),
           nullptr;
  if (k->q_heads < 0 || k->kv_heads < 0)
    return fail(error, es, "q_num_heads and kv_num_heads must be positive, got %lld and %lld", (long long)k->q_heads,
                (long long)k->kv_heads),
           nullptr;
  if (k->left < -1 || k->right < -1)
    return fail(error, es, "left_window_size and right_window_size must be -1 or >= 0, got %lld and %lld",
                (long long)k->left, (long long)k->right),
           nullptr;
  if (k->has_scale && !std::isfinite(k->scale))
    return fail(error, es, "scale must be finite, got %g", k->scale), nullptr;
  if (!std::isfinite(k->softcap)) return fail(error, es, "softcap must be finite, got %g", k->softcap), nullptr;
  k->causal = static_cast<int>(causal);
  k->qk_mode = static_cast<int>(mode);
  const int max_in = k->opset >= 24 ? 7 : 6;
  if (node->n_inputs < 3 || node->n_inputs > max_in)
    return fail(error, es, "expects 3 to %d inputs, got %d", max_in, node->n_inputs), nullptr;
  if (node->n_outputs < 1 || node->n_outputs > 4)
    return fail(error, es, "expects 1 to 4 outputs, got %d", node->n_outputs), nullptr;
  static const char* names[] = {"Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"};
  k->dt = storage_of(node->input_dtypes[0]);
  if (k->dt < 0)
    return fail(error, es, "Q has type %s (expected float32, float16 or bfloat16)", olc_dtype_name(node->input_dtypes[0])),
           nullptr;
  for (int i = 0; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (t == OLC_DTYPE_UNDEFINED) {
      if (i < 3) return fail(error, es, "input %d (%s) is required", i, names[i]), nullptr;
      continue;
    }
    if (i == 3) {
      if (t != OLC_DTYPE_BOOL && storage_of(t) < 0)
        return fail(error, es, "attn_mask has type %s (expected bool, float32, float16 or bfloat16)", olc_dtype_name(t)),
               nullptr;
    } else if (i == 6) {
      if (t != OLC_DTYPE_INT64)
        return fail(error, es, "nonpad_kv_seqlen has type %s, expected int64", olc_dtype_name(t)), nullptr;
    } else if (t != node->input_dtypes[0]) {
      return fail(error, es, "input %d (%s) has type %s but Q has type %s", i, names[i], olc_dtype_name(t),
                  olc_dtype_name(node->input_dtypes[0])),
             nullptr;
    }
  }
  if (k->has_in(4) != k->has_in(5)) return fail(error, es, "past_key and past_value must be given together"), nullptr;
  if (k->has_in(4) && k->has_in(6))
    return fail(error, es, "nonpad_kv_seqlen cannot be combined with past_key / past_value"), nullptr;
  return k.release();
}

int32_t OnnxAttentionKernel::run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const {
  const olc_tensor &Q = in[0], &K = in[1], &V = in[2];
  const olc_tensor* mask = has_in(3) ? &in[3] : nullptr;
  const olc_tensor* pk = has_in(4) ? &in[4] : nullptr;
  const olc_tensor* pv = has_in(5) ? &in[5] : nullptr;
  const olc_tensor* nonpad = has_in(6) ? &in[6] : nullptr;
  const int rank = Q.ndim;
  if ((rank != 3 && rank != 4) || K.ndim != rank || V.ndim != rank)
    return c.err("Q, K and V must all be 3-D or all be 4-D, got %s, %s and %s", shape_str(Q).c_str(),
                 shape_str(K).c_str(), shape_str(V).c_str());
  int64_t B = Q.shape[0], Hq, Hkv, Sq, L, D, Dv;
  if (rank == 3) {
    if (q_heads <= 0 || kv_heads <= 0)
      return c.err("3-D Q, K, V need the q_num_heads and kv_num_heads attributes");
    Hq = q_heads;
    Hkv = kv_heads;
    Sq = Q.shape[1];
    L = K.shape[1];
    if (Q.shape[2] % Hq || K.shape[2] % Hkv || V.shape[2] % Hkv)
      return c.err("hidden sizes of Q %s, K %s, V %s must be multiples of q_num_heads %lld and kv_num_heads %lld",
                   shape_str(Q).c_str(), shape_str(K).c_str(), shape_str(V).c_str(), (long long)Hq, (long long)Hkv);
    D = Q.shape[2] / Hq;
    Dv = V.shape[2] / Hkv;
    if (K.shape[2] / Hkv != D)
      return c.err("the head size of K (%lld = %lld / kv_num_heads) differs from Q's (%lld = %lld / q_num_heads)",
                   (long long)(K.shape[2] / Hkv), (long long)K.shape[2], (long long)D, (long long)Q.shape[2]);
    if (K.shape[0] != B || V.shape[0] != B || V.shape[1] != L)
      return c.err("Q %s, K %s and V %s disagree on the batch size or K and V on the sequence length",
                   shape_str(Q).c_str(), shape_str(K).c_str(), shape_str(V).c_str());
  } else {
    Hq = Q.shape[1];
    Sq = Q.shape[2];
    D = Q.shape[3];
    Hkv = K.shape[1];
    L = K.shape[2];
    Dv = V.shape[3];
    if (opset >= 25 && (q_heads || kv_heads))
      return c.err("q_num_heads and kv_num_heads must not be set for 4-D Q, K, V (opset 25)");
    if ((q_heads && q_heads != Hq) || (kv_heads && kv_heads != Hkv))
      return c.err("q_num_heads %lld / kv_num_heads %lld disagree with the head axes of Q %s and K %s",
                   (long long)q_heads, (long long)kv_heads, shape_str(Q).c_str(), shape_str(K).c_str());
    if (K.shape[0] != B || V.shape[0] != B || K.shape[3] != D || V.shape[1] != Hkv || V.shape[2] != L)
      return c.err("K %s and V %s do not fit Q %s: expected K [%lld, kv_heads, L, %lld] and V [%lld, kv_heads, L, dv]",
                   shape_str(K).c_str(), shape_str(V).c_str(), shape_str(Q).c_str(), (long long)B, (long long)D,
                   (long long)B);
  }
  if (Hkv == 0 ? Hq != 0 : Hq % Hkv != 0)
    return c.err("the number of query heads (%lld) must be a multiple of the number of key/value heads (%lld)",
                 (long long)Hq, (long long)Hkv);
  int64_t P = 0;
  if (pk) {
    if (pk->ndim != 4 || pv->ndim != 4 || pk->shape[0] != B || pk->shape[1] != Hkv || pk->shape[3] != D ||
        pv->shape[0] != B || pv->shape[1] != Hkv || pv->shape[3] != Dv || pv->shape[2] != pk->shape[2])
      return c.err("past_key %s / past_value %s must be [%lld, %lld, past_len, %lld] / [%lld, %lld, past_len, %lld]",
                   shape_str(*pk).c_str(), shape_str(*pv).c_str(), (long long)B, (long long)Hkv, (long long)D,
                   (long long)B, (long long)Hkv, (long long)Dv);
    P = pk->shape[2];
  }
  const int64_t T = P + L;
  std::vector<int64_t> np_vals;
  if (nonpad) {
    if (nonpad->ndim != 1 || nonpad->shape[0] != B)
      return c.err("nonpad_kv_seqlen has shape %s, expected [%lld]", shape_str(*nonpad).c_str(), (long long)B);
    np_vals = read_int64(*nonpad);
    for (int64_t b = 0; b < B; ++b)
      if (np_vals[b] < 0 || np_vals[b] > T)
        return c.err("nonpad_kv_seqlen[%lld] = %lld is outside [0, %lld] (the key sequence length)", (long long)b,
                     (long long)np_vals[b], (long long)T);
  }
  // The graph pass's fused node stands for Add(scores, mask): a mask of one
  // key column adds its value to every key, as the Add broadcast it
  // (Attention itself reads it as excluding the keys past the first).
  std::vector<int64_t> wide_shape;
  std::vector<unsigned char> wide_data;
  olc_tensor wide;
  if (fused && mask && mask->ndim >= 1 && mask->shape[mask->ndim - 1] != T) {
    if (mask->shape[mask->ndim - 1] != 1)
      return c.err("attn_mask has shape %s: its last dimension must be 1 or %lld (the keys)",
                   shape_str(*mask).c_str(), (long long)T);
    const size_t size = olc_dtype_size(mask->dtype);
    const int64_t rows = olc_element_count(mask);
    wide_shape.assign(mask->shape, mask->shape + mask->ndim);
    wide_shape.back() = T;
    wide_data.resize(static_cast<size_t>(rows * T) * size);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < T; ++j)
        std::memcpy(&wide_data[static_cast<size_t>(r * T + j) * size],
                    static_cast<const unsigned char*>(mask->data) + static_cast<size_t>(r) * size, size);
    wide = {mask->dtype, mask->ndim, wide_shape.data(), wide_data.data()};
    mask = &wide;
  }
  // The mask broadcasts (right-aligned) to [B, Hq, Sq, Lm], Lm <= T: keys
  // past its last column are excluded.
  int64_t ms[4] = {0, 0, 0, 0};
  int64_t Lm = 0;
  if (mask) {
    const int mr = mask->ndim;
    bool ok = mr >= 1 && mr <= 4;
    const int64_t target[3] = {B, Hq, Sq};
    if (ok) {
      Lm = mask->shape[mr - 1];
      ok = Lm <= T;
      int64_t stride = Lm;
      for (int a = 2; a >= 0 && ok; --a) {
        const int ma = a - (4 - mr);
        if (ma < 0) break;
        const int64_t d = mask->shape[ma];
        ok = d == 1 || d == target[a];
        ms[a] = d == 1 ? 0 : stride;
        stride *= d;
      }
    }
    if (!ok)
      return c.err("attn_mask has shape %s; it must broadcast to [batch %lld, heads %lld, q_len %lld, keys] with at most "
                   "%lld keys (each leading dimension 1 or equal)",
                   shape_str(*mask).c_str(), (long long)B, (long long)Hq, (long long)Sq, (long long)T);
  }

  // Validation done: outputs.
  const int32_t odt = in[0].dtype;
  bool ok;
  std::vector<int64_t> yshape = rank == 4 ? std::vector<int64_t>{B, Hq, Sq, Dv} : std::vector<int64_t>{B, Sq, Hq * Dv};
  void* y = alloc_out(c, *this, 0, odt, yshape, &ok);
  if (!ok) return OLC_ERROR;
  void* ok_out = alloc_out(c, *this, 1, odt, {B, Hkv, T, D}, &ok);
  if (!ok) return OLC_ERROR;
  void* ov_out = alloc_out(c, *this, 2, odt, {B, Hkv, T, Dv}, &ok);
  if (!ok) return OLC_ERROR;
  void* qk_out = alloc_out(c, *this, 3, odt, {B, Hq, Sq, T}, &ok);
  if (!ok) return OLC_ERROR;

  if (naive) {
    naive::OnnxAttention a;
    a.dt = dt;
    a.rank = rank;
    a.B = B, a.Hq = Hq, a.Hkv = Hkv, a.Sq = Sq, a.L = L, a.P = P, a.D = D, a.Dv = Dv;
    a.q = Q.data, a.k = K.data, a.v = V.data;
    a.past_k = pk ? pk->data : nullptr;
    a.past_v = pv ? pv->data : nullptr;
    if (mask) {
      a.mask = mask->data;
      a.mask_dt = mask->dtype == OLC_DTYPE_BOOL ? -1 : storage_of(mask->dtype);
      a.mask_rank = mask->ndim;
      a.mask_shape = mask->shape;
    }
    a.nonpad = nonpad ? np_vals.data() : nullptr;
    a.has_scale = has_scale;
    a.scale = scale;
    a.causal = causal;
    a.left = left, a.right = right;
    a.softcap = softcap;
    a.qk_mode = qk_mode;
    a.y = y, a.present_k = ok_out, a.present_v = ov_out, a.qk = qk_out;
    naive::onnx_attention(a);
    return OLC_OK;
  }

  AttnProblem p;
  p.dt = dt;
  p.B = B, p.Hq = Hq, p.Hkv = Hkv, p.Sq = Sq, p.T = T, p.D = D, p.Dv = Dv;
  View knew, vnew;
  if (rank == 4) {
    p.q = {Q.data, Hq * Sq * D, Sq * D, D};
    knew = {K.data, Hkv * L * D, L * D, D};
    vnew = {V.data, Hkv * L * Dv, L * Dv, Dv};
    p.y = {y, Hq * Sq * Dv, Sq * Dv, Dv};
  } else {
    p.q = {Q.data, Sq * Hq * D, D, Hq * D};
    knew = {K.data, L * Hkv * D, D, Hkv * D};
    vnew = {V.data, L * Hkv * Dv, Dv, Hkv * Dv};
    p.y = {y, Sq * Hq * Dv, Dv, Hq * Dv};
  }
  // present = past ++ new, written once (by the engine: see run_attention),
  // and the keys are read from it. Without a past the keys are the inputs
  // themselves, and a wanted present is their copy.
  const size_t es = storage_size(dt);
  std::vector<char> tmp_k, tmp_v;
  CacheWrite cw[2];
  const View* cur[2] = {&knew, &vnew};
  void* outs[2] = {ok_out, ov_out};
  const int64_t dims[2] = {D, Dv};
  std::vector<char>* tmps[2] = {&tmp_k, &tmp_v};
  View* src[2] = {&p.k, &p.v};
  const CacheWrite** fills[2] = {&p.fill_k, &p.fill_v};
  for (int w = 0; w < 2; ++w) {
    const int64_t d = dims[w];
    void* dst = outs[w];
    if (pk && !dst) {
      tmps[w]->resize(static_cast<size_t>(B * Hkv * T * d) * es);
      dst = tmps[w]->data();
    }
    *src[w] = *cur[w];
    if (!dst) continue;
    cw[w].k = isa;
    cw[w].dt = dt;
    cw[w].B = B, cw[w].H = Hkv, cw[w].T = T, cw[w].D = d;
    if (pk) cw[w].past = {w == 0 ? pk->data : pv->data, Hkv * P * d, P * d, d};
    cw[w].P = P;
    cw[w].cur = *cur[w];
    cw[w].S = L;
    cw[w].out = dst;
    *fills[w] = &cw[w];
    if (pk) *src[w] = View{dst, Hkv * T * d, T * d, d};
  }
  p.scale = static_cast<float>([&] {
    const double sq = rounded_sqrt_scale(dt, has_scale ? scale : 1.0 / std::sqrt(static_cast<double>(D)));
    return sq * sq;
  }());
  p.softcap = softcap > 0.0f ? softcap : 0.0f;
  if (mask) {
    Mask& m = p.mask[0];
    m.kind = mask->dtype == OLC_DTYPE_BOOL ? kMaskKeep : kMaskAdd;
    m.dt = mask->dtype == OLC_DTYPE_BOOL ? kF32 : storage_of(mask->dtype);
    m.data = mask->data;
    m.sb = ms[0], m.sh = ms[1], m.sq = ms[2], m.st = 1;
    m.cols = Lm;
  }
  std::vector<int64_t> q_off(static_cast<size_t>(B), P);
  if (nonpad)
    for (int64_t b = 0; b < B; ++b) q_off[b] = np_vals[b] - Sq;
  p.q_off = q_off.data();
  p.kv_len = nonpad ? np_vals.data() : nullptr;
  p.causal = causal;
  p.left = left, p.right = right;
  p.qk = qk_out;
  p.qk_mode = qk_mode;
  return run_attention(g_api, c.ctx, isa, p, tuning());
}

// ---------------------------------------------------------------- RotaryEmbedding

// Rows of a rotary problem: row r of the input is (b, h, s) with r the
// row-major index over (B, H, S) for rank 4 and (B, S, H) for rank 3.
struct RopeJob {
  const IsaKernels* k;
  int dt;
  int rank;
  int64_t B, H, S, hd;
  const void* x;
  void* y;
  const Rope* rope;
};

void rope_range(void* user, int64_t begin, int64_t end) {
  const RopeJob& j = *static_cast<const RopeJob*>(user);
  const size_t es = storage_size(j.dt);
  for (int64_t r = begin; r < end; ++r) {
    int64_t b, s;
    if (j.rank == 4) {
      b = r / (j.H * j.S);
      s = r % j.S;
    } else {
      b = r / (j.S * j.H);
      s = (r / j.H) % j.S;
    }
    const size_t off = static_cast<size_t>(r * j.hd) * es;
    j.k->rope_row(j.dt, j.rope, j.rope->pos[b * j.rope->pos_sb + s], static_cast<const char*>(j.x) + off,
                  static_cast<char*>(j.y) + off, j.hd);
  }
}

}  // namespace

// Shared with the com.microsoft RotaryEmbedding adapter (adapter_ms.cc).
int32_t run_rope_rows(RunCtx& c, const IsaKernels* k, int dt, int rank, int64_t B, int64_t H, int64_t S, int64_t hd,
                      const void* x, void* y, const Rope& rope) {
  RopeJob j{k, dt, rank, B, H, S, hd, x, y, &rope};
  const int64_t rows = B * H * S;
  g_api->parallel_for(c.ctx, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, hd)), 0, &rope_range, &j);
  return OLC_OK;
}

namespace {

struct OnnxRotaryKernel : Kernel {
  int dt = kF32;
  int64_t num_heads = 0, rot_attr = 0;
  int interleaved = 0;
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_rotary(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<OnnxRotaryKernel>();
  init_common(k.get(), node, naive, "RotaryEmbedding");
  Attrs a(node, error, es);
  int64_t inter = 0;
  if (!a.only({"interleaved", "num_heads", "rotary_embedding_dim"}) || !a.get_int("interleaved", &inter) ||
      !a.get_int("num_heads", &k->num_heads) || !a.get_int("rotary_embedding_dim", &k->rot_attr))
    return nullptr;
  if (inter != 0 && inter != 1) return fail(error, es, "interleaved must be 0 or 1, got %lld", (long long)inter), nullptr;
  if (k->num_heads < 0 || k->rot_attr < 0)
    return fail(error, es, "num_heads and rotary_embedding_dim must be >= 0, got %lld and %lld", (long long)k->num_heads,
                (long long)k->rot_attr),
           nullptr;
  k->interleaved = static_cast<int>(inter);
  if (node->n_inputs < 3 || node->n_inputs > 4)
    return fail(error, es, "expects 3 or 4 inputs, got %d", node->n_inputs), nullptr;
  if (node->n_outputs != 1) return fail(error, es, "expects 1 output, got %d", node->n_outputs), nullptr;
  k->dt = storage_of(node->input_dtypes[0]);
  if (k->dt < 0) return fail(error, es, "X has type %s", olc_dtype_name(node->input_dtypes[0])), nullptr;
  for (int i = 1; i < 3; ++i)
    if (node->input_dtypes[i] != node->input_dtypes[0])
      return fail(error, es, "the cos and sin caches must have X's type %s", olc_dtype_name(node->input_dtypes[0])),
             nullptr;
  if (k->has_in(3) && node->input_dtypes[3] != OLC_DTYPE_INT64)
    return fail(error, es, "position_ids must be int64, got %s", olc_dtype_name(node->input_dtypes[3])), nullptr;
  return k.release();
}

int32_t OnnxRotaryKernel::run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const {
  const olc_tensor &X = in[0], &cs = in[1], &sn = in[2];
  const olc_tensor* pos = has_in(3) ? &in[3] : nullptr;
  int64_t B, H, S, hd;
  if (X.ndim == 4) {
    B = X.shape[0], H = X.shape[1], S = X.shape[2], hd = X.shape[3];
  } else if (X.ndim == 3) {
    if (num_heads <= 0) return c.err("a 3-D input needs the num_heads attribute");
    B = X.shape[0], S = X.shape[1], H = num_heads;
    if (X.shape[2] % H) return c.err("hidden size %lld is not a multiple of num_heads %lld", (long long)X.shape[2], (long long)H);
    hd = X.shape[2] / H;
  } else {
    return c.err("X must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size], got %s", shape_str(X).c_str());
  }
  const int64_t rot = rot_attr ? rot_attr : hd;
  if (rot % 2 || rot > hd)
    return c.err("the rotary dimension %lld must be even and at most the head size %lld", (long long)rot, (long long)hd);
  const int64_t half = rot / 2;
  std::vector<int64_t> rows(static_cast<size_t>(B * S));
  int64_t cache_rows;
  if (pos) {
    if (cs.ndim != 2 || sn.ndim != 2 || cs.shape[1] != half || sn.shape[0] != cs.shape[0] || sn.shape[1] != half)
      return c.err("with position_ids, cos_cache %s and sin_cache %s must be [max_position, %lld]", shape_str(cs).c_str(),
                   shape_str(sn).c_str(), (long long)half);
    if (pos->ndim != 2 || (pos->shape[0] != B && pos->shape[0] != 1) || pos->shape[1] != S)
      return c.err("position_ids has shape %s, expected [%lld, %lld]", shape_str(*pos).c_str(), (long long)B, (long long)S);
    cache_rows = cs.shape[0];
    const int64_t* pv = static_cast<const int64_t*>(pos->data);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t v = pv[(pos->shape[0] == 1 ? 0 : b) * S + s];
        if (v < 0 || v >= cache_rows)
          return c.err("position_ids[%lld, %lld] = %lld is outside the cos/sin caches' %lld rows", (long long)b,
                       (long long)s, (long long)v, (long long)cache_rows);
        rows[b * S + s] = v;
      }
  } else {
    const bool fits = cs.ndim == 3 && sn.ndim == 3 && (cs.shape[0] == B || cs.shape[0] == 1) &&
                      (cs.shape[1] == S || cs.shape[1] == 1) && cs.shape[2] == half;
    if (!fits || sn.shape[0] != cs.shape[0] || sn.shape[1] != cs.shape[1] || sn.shape[2] != half)
      return c.err("without position_ids, cos_cache %s and sin_cache %s must be [%lld, %lld, %lld]", shape_str(cs).c_str(),
                   shape_str(sn).c_str(), (long long)B, (long long)S, (long long)half);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        rows[b * S + s] = (cs.shape[0] == 1 ? 0 : b) * cs.shape[1] + (cs.shape[1] == 1 ? 0 : s);
  }
  bool ok;
  void* y = alloc_out(c, *this, 0, X.dtype, std::vector<int64_t>(X.shape, X.shape + X.ndim), &ok);
  if (!ok) return OLC_ERROR;
  if (olc_element_count(&X) == 0) return OLC_OK;
  if (naive) {
    naive::Rotary a;
    a.dt = dt, a.rank = X.ndim;
    a.B = B, a.H = H, a.S = S, a.hd = hd, a.rot = rot;
    a.interleaved = interleaved;
    a.x = X.data, a.cos = cs.data, a.sin = sn.data;
    a.cache_cols = half;
    if (pos) {
      a.position_ids = static_cast<const int64_t*>(pos->data);
      a.pos_batch = pos->shape[0];
    } else {
      a.cache_b = cs.shape[0], a.cache_s = cs.shape[1];
    }
    a.y = y;
    naive::rotary(a);
    return OLC_OK;
  }
  Rope r;
  r.rot = rot, r.interleaved = interleaved, r.dt = dt;
  r.cos = cs.data, r.sin = sn.data, r.ld = half;
  r.pos = rows.data(), r.pos_sb = S;
  if (rot == 0) {
    std::memcpy(y, X.data, static_cast<size_t>(olc_element_count(&X)) * storage_size(dt));
    return OLC_OK;
  }
  return run_rope_rows(c, isa, dt, X.ndim, B, H, S, hd, X.data, y, r);
}

// ---------------------------------------------------------------- TensorScatter

struct ScatterKernel : Kernel {
  int64_t axis = -2;
  int circular = 0;
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_scatter(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<ScatterKernel>();
  init_common(k.get(), node, naive, "TensorScatter");
  Attrs a(node, error, es);
  std::string mode = "linear";
  if (!a.only({"axis", "mode"}) || !a.get_int("axis", &k->axis) || !a.get_string("mode", &mode)) return nullptr;
  if (mode != "linear" && mode != "circular")
    return fail(error, es, "mode must be \"linear\" or \"circular\", got \"%s\"", mode.c_str()), nullptr;
  k->circular = mode == "circular";
  if (node->n_inputs < 2 || node->n_inputs > 3)
    return fail(error, es, "expects 2 or 3 inputs, got %d", node->n_inputs), nullptr;
  if (node->n_outputs != 1) return fail(error, es, "expects 1 output, got %d", node->n_outputs), nullptr;
  if (olc_dtype_size(node->input_dtypes[0]) == 0)
    return fail(error, es, "past_cache has unsupported type %s", olc_dtype_name(node->input_dtypes[0])), nullptr;
  if (node->input_dtypes[1] != node->input_dtypes[0])
    return fail(error, es, "update has type %s but past_cache has %s", olc_dtype_name(node->input_dtypes[1]),
                olc_dtype_name(node->input_dtypes[0])),
           nullptr;
  if (k->has_in(2) && node->input_dtypes[2] != OLC_DTYPE_INT64)
    return fail(error, es, "write_indices must be int64, got %s", olc_dtype_name(node->input_dtypes[2])), nullptr;
  return k.release();
}

int32_t ScatterKernel::run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const {
  const olc_tensor &past = in[0], &upd = in[1];
  const olc_tensor* wi = has_in(2) ? &in[2] : nullptr;
  const int rank = past.ndim;
  const int64_t ax = axis < 0 ? axis + rank : axis;
  if (rank < 2 || ax < 1 || ax >= rank)
    return c.err("axis %lld is not a sequence axis of past_cache %s (it must not be the batch axis 0)", (long long)axis,
                 shape_str(past).c_str());
  bool same = upd.ndim == rank;
  for (int d = 0; same && d < rank; ++d) same = d == ax ? upd.shape[d] <= past.shape[d] : upd.shape[d] == past.shape[d];
  if (!same)
    return c.err("update %s must have past_cache's shape %s except along axis %lld, where it may be shorter",
                 shape_str(upd).c_str(), shape_str(past).c_str(), (long long)ax);
  const int64_t B = past.shape[0], M = past.shape[ax], S = upd.shape[ax];
  std::vector<int64_t> idx(static_cast<size_t>(B), 0);
  if (wi) {
    if (wi->ndim != 1 || wi->shape[0] != B)
      return c.err("write_indices has shape %s, expected [%lld]", shape_str(*wi).c_str(), (long long)B);
    idx = read_int64(*wi);
  }
  for (int64_t b = 0; b < B; ++b) {
    if (circular) {
      if (M == 0 && S > 0) return c.err("circular write into an empty sequence axis");
    } else if (idx[b] < 0 || idx[b] > M - S) {
      return c.err("write_indices[%lld] = %lld: linear mode needs 0 <= index and index + %lld (the update length) <= "
                   "%lld (the cache length)",
                   (long long)b, (long long)idx[b], (long long)S, (long long)M);
    }
  }
  bool ok;
  void* out = alloc_out(c, *this, 0, past.dtype, std::vector<int64_t>(past.shape, past.shape + rank), &ok);
  if (!ok) return OLC_ERROR;
  const size_t es = olc_dtype_size(past.dtype);
  const size_t total = static_cast<size_t>(olc_element_count(&past)) * es;
  if (total == 0) return OLC_OK;
  // In place (the runtime handed us past's own buffer): only the update is
  // written. An update that shares that buffer is copied aside first.
  const bool inplace = out == past.data;
  if (inplace) g_api->record_usage_detail(c.ctx, "in place");
  std::vector<char> upd_copy;
  const char* usrc = static_cast<const char*>(upd.data);
  const size_t ubytes = static_cast<size_t>(olc_element_count(&upd)) * es;
  if (inplace && ubytes > 0 && usrc < static_cast<const char*>(out) + total && static_cast<const char*>(out) < usrc + ubytes) {
    upd_copy.assign(usrc, usrc + ubytes);
    usrc = upd_copy.data();
  }
  if (naive) {
    naive::Scatter a;
    a.elem = static_cast<int64_t>(es);
    a.rank = rank;
    a.shape = past.shape;
    a.axis = static_cast<int>(ax);
    a.seq = S;
    a.past = past.data;
    a.update = usrc;
    a.write_indices = idx.data();
    a.circular = circular;
    a.out = out;
    naive::tensor_scatter(a);
    return OLC_OK;
  }
  if (!inplace) std::memcpy(out, past.data, total);
  int64_t outer = 1, inner = 1;
  for (int d = 1; d < ax; ++d) outer *= past.shape[d];
  for (int d = static_cast<int>(ax) + 1; d < rank; ++d) inner *= past.shape[d];
  const size_t row = static_cast<size_t>(inner) * es;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t o = 0; o < outer; ++o) {
      char* dst = static_cast<char*>(out) + static_cast<size_t>((b * outer + o) * M) * row;
      const char* src = usrc + static_cast<size_t>((b * outer + o) * S) * row;
      if (!circular) {
        std::memcpy(dst + static_cast<size_t>(idx[b]) * row, src, static_cast<size_t>(S) * row);
        continue;
      }
      for (int64_t s = 0; s < S; ++s) {
        const int64_t t = ((idx[b] + s) % M + M) % M;
        std::memcpy(dst + static_cast<size_t>(t) * row, src + static_cast<size_t>(s) * row, row);
      }
    }
  return OLC_OK;
}

}  // namespace

void onnx_ops(std::vector<OpEntry>* out) {
  out->push_back({"ai.onnx", "Attention", "Attention", &make_attention, 0});
  // The graph pass's node (src/olc_attention/passes.py): Attention on 3-D Q, K, V.
  out->push_back({"olc.fused", "Attention", "FusedAttention", &make_attention, 0});
  out->push_back({"ai.onnx", "RotaryEmbedding", "RotaryEmbedding", &make_rotary, 0});
  out->push_back({"ai.onnx", "TensorScatter", "TensorScatter", &make_scatter, OLC_KERNEL_INPLACE_INPUT0});
}

}  // namespace olc_attn
