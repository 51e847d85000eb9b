// Adapters of the com.microsoft operators (onnxruntime's contrib schemas
// and CPU semantics): GroupQueryAttention and RotaryEmbedding.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "adapter_util.h"
#include "attn_naive.h"

namespace olc_attn {
namespace {

// ---------------------------------------------------------------- GroupQueryAttention

enum GqaIn : int {
  kQuery = 0, kKey, kValue, kPastKey, kPastValue, kSeqlensK, kTotalSeqLen, kCos, kSin, kPositionIds,
  kAttnBias, kHeadSink, kKScale, kVScale, kQNorm, kKNorm, kQuerySeqlens, kGqaInputs
};
const char* const kGqaNames[] = {"query",    "key",      "value",          "past_key",      "past_value",
                                 "seqlens_k", "total_sequence_length", "cos_cache", "sin_cache",
                                 "position_ids", "attention_bias", "head_sink", "k_scale", "v_scale",
                                 "q_norm_weight", "k_norm_weight", "query_seqlens"};

struct GqaKernel : Kernel {
  int dt = kF32;
  int64_t Hq = 0, Hkv = 0;
  float scale = 0.0f, softcap = 0.0f;
  int64_t local = -1;
  int rotary = 0, interleaved = 0, smooth = 0, causal = 1;
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_gqa(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<GqaKernel>();
  init_common(k.get(), node, naive, "GroupQueryAttention");
  Attrs a(node, error, es);
  int64_t rot = 0, inter = 0, smooth = 0, causal = 1, qk_output = 0, bits = 0, swc = 0;
  std::string kq = "NONE", vq = "NONE";
  float eps = 0;
  bool has_nh = false, has_kvh = false;
  if (!a.only({"num_heads", "kv_num_heads", "scale", "softcap", "local_window_size", "do_rotary",
               "rotary_interleaved", "smooth_softmax", "causal", "qk_output", "kv_cache_bit_width", "k_quant_type",
               "v_quant_type", "sliding_window_cache", "qk_norm_epsilon", "q_norm_epsilon", "k_norm_epsilon"}) ||
      !a.get_int("num_heads", &k->Hq, &has_nh) || !a.get_int("kv_num_heads", &k->Hkv, &has_kvh) ||
      !a.get_float("scale", &k->scale) || !a.get_float("softcap", &k->softcap) ||
      !a.get_int("local_window_size", &k->local) || !a.get_int("do_rotary", &rot) ||
      !a.get_int("rotary_interleaved", &inter) || !a.get_int("smooth_softmax", &smooth) ||
      !a.get_int("causal", &causal) || !a.get_int("qk_output", &qk_output) ||
      !a.get_int("kv_cache_bit_width", &bits) || !a.get_string("k_quant_type", &kq) ||
      !a.get_string("v_quant_type", &vq) || !a.get_int("sliding_window_cache", &swc) ||
      !a.get_float("qk_norm_epsilon", &eps) || !a.get_float("q_norm_epsilon", &eps) ||
      !a.get_float("k_norm_epsilon", &eps))
    return nullptr;
  if (!has_nh || !has_kvh || k->Hq <= 0 || k->Hkv <= 0)
    return fail(error, es, "num_heads and kv_num_heads are required and must be positive"), nullptr;
  if (k->Hq % k->Hkv)
    return fail(error, es, "num_heads (%lld) must be a multiple of kv_num_heads (%lld)", (long long)k->Hq,
                (long long)k->Hkv),
           nullptr;
  for (int64_t flag : {rot, inter, smooth, causal})
    if (flag != 0 && flag != 1)
      return fail(error, es, "do_rotary, rotary_interleaved, smooth_softmax and causal must be 0 or 1"), nullptr;
  if (k->local == 0 || k->local < -1)
    return fail(error, es, "local_window_size must be -1 or positive, got %lld", (long long)k->local), nullptr;
  if (!causal && k->local != -1) return fail(error, es, "local_window_size needs causal=1"), nullptr;
  if (!std::isfinite(k->scale) || k->scale < 0 || !std::isfinite(k->softcap) || k->softcap < 0)
    return fail(error, es, "scale and softcap must be finite and >= 0, got %g and %g", k->scale, k->softcap), nullptr;
  if (qk_output != 0) return fail(error, es, "qk_output (the output_qk debug output) is not supported"), nullptr;
  if (bits != 0 || kq != "NONE" || vq != "NONE")
    return fail(error, es, "quantized KV caches (kv_cache_bit_width, k_quant_type, v_quant_type) are not supported"),
           nullptr;
  if (swc != 0) return fail(error, es, "sliding_window_cache is not supported"), nullptr;
  k->rotary = static_cast<int>(rot), k->interleaved = static_cast<int>(inter);
  k->smooth = static_cast<int>(smooth), k->causal = static_cast<int>(causal);
  if (node->n_inputs < kCos || node->n_inputs > kGqaInputs)
    return fail(error, es, "expects %d to %d inputs, got %d", int(kCos), int(kGqaInputs), node->n_inputs), nullptr;
  if (node->n_outputs < 1 || node->n_outputs > 3)
    return fail(error, es, "expects 1 to 3 outputs (output_qk is not supported), got %d", node->n_outputs), nullptr;
  k->dt = storage_of(node->input_dtypes[kQuery]);
  if (k->dt < 0) return fail(error, es, "query has type %s", olc_dtype_name(node->input_dtypes[kQuery])), nullptr;
  for (int i = 0; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (t == OLC_DTYPE_UNDEFINED) {
      if (i == kQuery || i == kSeqlensK || i == kTotalSeqLen)
        return fail(error, es, "input %d (%s) is required", i, kGqaNames[i]), nullptr;
      continue;
    }
    if (i >= kKScale)
      return fail(error, es, "input %d (%s) is not supported (quantized caches, Q/K norms, query_seqlens)", i,
                  kGqaNames[i]),
             nullptr;
    const int32_t want = (i == kSeqlensK || i == kTotalSeqLen) ? OLC_DTYPE_INT32
                         : i == kPositionIds                   ? OLC_DTYPE_INT64
                                                               : node->input_dtypes[kQuery];
    if (t != want)
      return fail(error, es, "input %d (%s) has type %s, expected %s", i, kGqaNames[i], olc_dtype_name(t),
                  olc_dtype_name(want)),
             nullptr;
  }
  if (k->has_in(kKey) != k->has_in(kValue))
    return fail(error, es, "key and value must both be given, or both be empty (QKV packed in query)"), nullptr;
  if (k->has_in(kPastKey) != k->has_in(kPastValue))
    return fail(error, es, "past_key and past_value must be given together"), nullptr;
  if (k->rotary && (!k->has_in(kCos) || !k->has_in(kSin)))
    return fail(error, es, "do_rotary needs cos_cache and sin_cache"), nullptr;
  return k.release();
}

int32_t GqaKernel::run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const {
  const olc_tensor& Q = in[kQuery];
  const bool packed = !has_in(kKey);
  if (Q.ndim != 3) return c.err("query must be 3-D [batch, sequence, hidden], got %s", shape_str(Q).c_str());
  const int64_t B = Q.shape[0], S = Q.shape[1];
  const int64_t heads = packed ? Hq + 2 * Hkv : Hq;
  if (Q.shape[2] % heads)
    return c.err("query hidden size %lld is not a multiple of %s (%lld)", (long long)Q.shape[2],
                 packed ? "num_heads + 2 * kv_num_heads (packed QKV)" : "num_heads", (long long)heads);
  const int64_t D = Q.shape[2] / heads;
  if (!packed) {
    const olc_tensor &K = in[kKey], &V = in[kValue];
    for (const olc_tensor* t : {&K, &V})
      if (t->ndim != 3 || t->shape[0] != B || t->shape[1] != S || t->shape[2] != Hkv * D)
        return c.err("%s has shape %s, expected [%lld, %lld, %lld] (kv_num_heads %lld x head size %lld of query %s)",
                     t == &K ? "key" : "value", shape_str(*t).c_str(), (long long)B, (long long)S,
                     (long long)(Hkv * D), (long long)Hkv, (long long)D, shape_str(Q).c_str());
  }
  const olc_tensor* pk = has_in(kPastKey) ? &in[kPastKey] : nullptr;
  const olc_tensor* pv = has_in(kPastValue) ? &in[kPastValue] : nullptr;
  int64_t P = 0;
  if (pk) {
    for (const olc_tensor* t : {pk, pv})
      if (t->ndim != 4 || t->shape[0] != B || t->shape[1] != Hkv || t->shape[3] != D || t->shape[2] != pk->shape[2])
        return c.err("past_key %s / past_value %s must both be [%lld, %lld, past_length, %lld] (BNSH)",
                     shape_str(*pk).c_str(), shape_str(*pv).c_str(), (long long)B, (long long)Hkv, (long long)D);
    P = pk->shape[2];
  }
  const olc_tensor &sk = in[kSeqlensK], &ts = in[kTotalSeqLen];
  if (sk.ndim != 1 || sk.shape[0] != B)
    return c.err("seqlens_k has shape %s, expected [%lld]", shape_str(sk).c_str(), (long long)B);
  if (olc_element_count(&ts) != 1 || ts.ndim > 1)
    return c.err("total_sequence_length must be a scalar, got shape %s", shape_str(ts).c_str());
  const int64_t total = *static_cast<const int32_t*>(ts.data);
  const std::vector<int64_t> seqlens = read_int32(sk);
  const bool first = S == total;
  if (total < 1) return c.err("total_sequence_length must be >= 1, got %lld", (long long)total);
  std::vector<int64_t> past_len(static_cast<size_t>(B)), kv_len(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t tl = seqlens[b] + 1;
    kv_len[b] = tl;
    if (tl < 1 || tl > total)
      return c.err("seqlens_k[%lld] = %lld: the total length seqlens_k + 1 must be in [1, total_sequence_length = %lld]",
                   (long long)b, (long long)seqlens[b], (long long)total);
    if (first) {
      if (tl > S)
        return c.err("seqlens_k[%lld] = %lld: a first prompt (sequence length %lld = total_sequence_length) holds at "
                     "most %lld tokens",
                     (long long)b, (long long)seqlens[b], (long long)S, (long long)S);
      past_len[b] = 0;
    } else {
      past_len[b] = tl - S;
      if (past_len[b] < 0)
        return c.err("seqlens_k[%lld] = %lld: the past length seqlens_k + 1 - sequence length = %lld is negative",
                     (long long)b, (long long)seqlens[b], (long long)past_len[b]);
      if (past_len[b] > P)
        return c.err("seqlens_k[%lld] = %lld: the past length %lld disagrees with past_key, which holds %lld rows",
                     (long long)b, (long long)seqlens[b], (long long)past_len[b], (long long)P);
    }
  }
  const int64_t Tp = pk ? std::max(P, total) : total;
  // Positions of the query rows (RoPE): position_ids (the first prompt
  // counts from its first element, as onnxruntime does), else past + s.
  const olc_tensor* pos_in = has_in(kPositionIds) ? &in[kPositionIds] : nullptr;
  std::vector<int64_t> pos(static_cast<size_t>(B * S));
  if (pos_in && (pos_in->ndim != 2 || pos_in->shape[0] != B || pos_in->shape[1] != S))
    return c.err("position_ids has shape %s, expected [%lld, %lld]", shape_str(*pos_in).c_str(), (long long)B,
                 (long long)S);
  const int64_t* pid = pos_in ? static_cast<const int64_t*>(pos_in->data) : nullptr;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      pos[b * S + s] = pid ? (first ? pid[0] + s : pid[b * S + s]) : past_len[b] + s;
  int64_t rot = 0, cache_rows = 0;
  if (rotary) {
    const olc_tensor &cs = in[kCos], &sn = in[kSin];
    if (cs.ndim != 2 || sn.ndim != 2 || cs.shape[0] != sn.shape[0] || cs.shape[1] != sn.shape[1])
      return c.err("cos_cache %s and sin_cache %s must be 2-D [max_position, rotary_dim / 2] of one shape",
                   shape_str(cs).c_str(), shape_str(sn).c_str());
    rot = 2 * cs.shape[1];
    cache_rows = cs.shape[0];
    if (rot > D || rot == 0)
      return c.err("the rotary dimension 2 x %lld (cos_cache columns) must be in [2, head size %lld]",
                   (long long)cs.shape[1], (long long)D);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t v = pos[b * S + s];
        if ((v < 0 || v >= cache_rows) && first && s >= kv_len[b]) {  // a padding row: any cache row will do
          pos[b * S + s] = 0;
          continue;
        }
        if (v < 0 || v >= cache_rows)
          return c.err("position %lld of token %lld of batch %lld is outside the cos/sin caches (%lld rows)",
                       (long long)v, (long long)s, (long long)b, (long long)cache_rows);
      }
  }
  const olc_tensor* bias = has_in(kAttnBias) ? &in[kAttnBias] : nullptr;
  const int64_t max_tl = *std::max_element(kv_len.begin(), kv_len.end());
  if (bias && (bias->ndim != 4 || (bias->shape[0] != 1 && bias->shape[0] != B) ||
               (bias->shape[1] != 1 && bias->shape[1] != Hq) || bias->shape[2] != S || bias->shape[3] < max_tl))
    return c.err("attention_bias has shape %s, expected [%lld or 1, %lld or 1, %lld, >= %lld (the longest total length)]",
                 shape_str(*bias).c_str(), (long long)B, (long long)Hq, (long long)S, (long long)max_tl);
  const olc_tensor* sink = has_in(kHeadSink) ? &in[kHeadSink] : nullptr;
  if (sink && (sink->ndim != 1 || sink->shape[0] != Hq))
    return c.err("head_sink has shape %s, expected [%lld]", shape_str(*sink).c_str(), (long long)Hq);

  // Validation done: outputs.
  bool ok;
  void* y = alloc_out(c, *this, 0, Q.dtype, {B, S, Hq * D}, &ok);
  if (!ok) return OLC_ERROR;
  void* ok_out = alloc_out(c, *this, 1, Q.dtype, {B, Hkv, Tp, D}, &ok);
  if (!ok) return OLC_ERROR;
  void* ov_out = alloc_out(c, *this, 2, Q.dtype, {B, Hkv, Tp, D}, &ok);
  if (!ok) return OLC_ERROR;
  const size_t es = storage_size(dt);
  std::vector<char> tmp_k, tmp_v;
  if (!ok_out) {
    tmp_k.resize(static_cast<size_t>(B * Hkv * Tp * D) * es);
    ok_out = tmp_k.data();
  }
  if (!ov_out) {
    tmp_v.resize(static_cast<size_t>(B * Hkv * Tp * D) * es);
    ov_out = tmp_v.data();
  }

  if (naive) {
    naive::Gqa a;
    a.dt = dt;
    a.B = B, a.S = S, a.Hq = Hq, a.Hkv = Hkv, a.D = D;
    a.q = Q.data;
    a.k = packed ? nullptr : in[kKey].data;
    a.v = packed ? nullptr : in[kValue].data;
    a.past_k = pk ? pk->data : nullptr;
    a.past_v = pv ? pv->data : nullptr;
    a.P = P;
    a.seqlens = seqlens.data();
    a.total = total;
    a.Tp = Tp;
    if (rotary) {
      a.cos = in[kCos].data, a.sin = in[kSin].data, a.rot = rot;
      a.interleaved = interleaved;
    }
    a.position_ids = pid;
    if (bias) {
      a.bias = bias->data;
      a.bias_b = bias->shape[0], a.bias_h = bias->shape[1], a.bias_t = bias->shape[3];
    }
    a.sink = sink ? sink->data : nullptr;
    a.smooth = smooth;
    a.scale = scale;
    a.softcap = softcap;
    a.local = local;
    a.causal = causal;
    a.y = y, a.present_k = ok_out, a.present_v = ov_out;
    naive::gqa(a);
    return OLC_OK;
  }

  const int64_t W = packed ? (Hq + 2 * Hkv) * D : Hq * D;  // row width of query
  AttnProblem p;
  p.dt = dt;
  p.B = B, p.Hq = Hq, p.Hkv = Hkv, p.Sq = S, p.T = Tp, p.D = D, p.Dv = D;
  p.q = {Q.data, S * W, D, W};
  p.y = {y, S * Hq * D, D, Hq * D};
  Rope rope;
  if (rotary) {
    rope.rot = rot, rope.interleaved = interleaved, rope.dt = dt;
    rope.cos = in[kCos].data, rope.sin = in[kSin].data, rope.ld = rot / 2;
    rope.pos = pos.data(), rope.pos_sb = S;
    p.rope = rope;
  }
  const char* qbase = static_cast<const char*>(Q.data);
  CacheWrite cw[2];
  for (int w = 0; w < 2; ++w) {
    cw[w].k = isa;
    cw[w].dt = dt;
    cw[w].B = B, cw[w].H = Hkv, cw[w].T = Tp, cw[w].D = D;
    if (pk) cw[w].past = {w == 0 ? pk->data : pv->data, Hkv * P * D, P * D, D};
    cw[w].P = P;
    cw[w].past_len = past_len.data();
    if (packed) cw[w].cur = {qbase + static_cast<size_t>((Hq + w * Hkv) * D) * es, S * W, D, W};
    else cw[w].cur = {in[w == 0 ? kKey : kValue].data, S * Hkv * D, D, Hkv * D};
    cw[w].S = S;
    cw[w].rope = (w == 0 && rotary) ? &rope : nullptr;
    cw[w].out = w == 0 ? ok_out : ov_out;
  }
  p.fill_k = &cw[0];
  p.fill_v = &cw[1];
  p.k = {ok_out, Hkv * Tp * D, Tp * D, D};
  p.v = {ov_out, Hkv * Tp * D, Tp * D, D};
  p.scale = scale > 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  p.softcap = softcap;
  if (bias) {
    Mask& m = p.mask[0];
    m.kind = kMaskAdd;
    m.dt = dt;
    m.data = bias->data;
    const int64_t bt = bias->shape[3];
    m.sb = bias->shape[0] == 1 ? 0 : Hq * S * bt;
    m.sh = bias->shape[1] == 1 ? 0 : S * bt;
    m.sq = bt, m.st = 1;
    m.cols = bt;
  }
  p.q_off = past_len.data();
  p.kv_len = kv_len.data();
  p.causal = causal;
  p.left = local > 0 ? local - 1 : -1;
  std::vector<float> sinks;
  if (sink) sinks = read_floats(*this, dt, *sink);
  else if (smooth) sinks.assign(static_cast<size_t>(Hq), 0.0f);
  p.sink = sinks.empty() ? nullptr : sinks.data();
  return run_attention(g_api, c.ctx, isa, p, tuning());
}

// ---------------------------------------------------------------- RotaryEmbedding

struct MsRotaryKernel : Kernel {
  int dt = kF32;
  int64_t num_heads = 0, rot_attr = 0;
  int interleaved = 0;
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_ms_rotary(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<MsRotaryKernel>();
  init_common(k.get(), node, naive, "MicrosoftRotaryEmbedding");
  Attrs a(node, error, es);
  int64_t inter = 0, packed = 0;
  float scale = 1.0f;
  if (!a.only({"interleaved", "num_heads", "rotary_embedding_dim", "scale", "is_packed_batching"}) ||
      !a.get_int("interleaved", &inter) || !a.get_int("num_heads", &k->num_heads) ||
      !a.get_int("rotary_embedding_dim", &k->rot_attr) || !a.get_float("scale", &scale) ||
      !a.get_int("is_packed_batching", &packed))
    return nullptr;
  if (inter != 0 && inter != 1) return fail(error, es, "interleaved must be 0 or 1, got %lld", (long long)inter), nullptr;
  if (packed != 0) return fail(error, es, "is_packed_batching (ragged batches) is not supported"), nullptr;
  if (k->num_heads < 0 || k->rot_attr < 0)
    return fail(error, es, "num_heads and rotary_embedding_dim must be >= 0"), nullptr;
  if (k->rot_attr > 0 && k->num_heads == 0)
    return fail(error, es, "rotary_embedding_dim needs num_heads"), nullptr;
  k->interleaved = static_cast<int>(inter);
  if (node->n_inputs != 4) return fail(error, es, "expects 4 inputs, got %d", node->n_inputs), nullptr;
  if (node->n_outputs != 1) return fail(error, es, "expects 1 output, got %d", node->n_outputs), nullptr;
  k->dt = storage_of(node->input_dtypes[0]);
  if (k->dt < 0) return fail(error, es, "input has type %s", olc_dtype_name(node->input_dtypes[0])), nullptr;
  if (node->input_dtypes[1] != OLC_DTYPE_INT64)
    return fail(error, es, "position_ids must be int64, got %s", olc_dtype_name(node->input_dtypes[1])), nullptr;
  for (int i = 2; i < 4; ++i)
    if (node->input_dtypes[i] != node->input_dtypes[0])
      return fail(error, es, "the cos and sin caches must have the input's type %s", olc_dtype_name(node->input_dtypes[0])),
             nullptr;
  return k.release();
}

int32_t MsRotaryKernel::run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const {
  const olc_tensor &X = in[0], &pos = in[1], &cs = in[2], &sn = in[3];
  if (cs.ndim != 2 || sn.ndim != 2 || cs.shape[0] != sn.shape[0] || cs.shape[1] != sn.shape[1])
    return c.err("cos_cache %s and sin_cache %s must be 2-D [max_position, columns] of one shape",
                 shape_str(cs).c_str(), shape_str(sn).c_str());
  const int64_t cols = cs.shape[1], max_pos = cs.shape[0];
  int64_t B, H, S, hd;
  if (X.ndim == 4) {
    B = X.shape[0], H = X.shape[1], S = X.shape[2], hd = X.shape[3];
  } else if (X.ndim == 3) {
    B = X.shape[0], S = X.shape[1];
    hd = num_heads > 0 ? 0 : 2 * cols;
    if (num_heads > 0) {
      if (X.shape[2] % num_heads)
        return c.err("hidden size %lld is not a multiple of num_heads %lld", (long long)X.shape[2], (long long)num_heads);
      hd = X.shape[2] / num_heads;
    }
    if (hd == 0 || X.shape[2] % hd)
      return c.err("hidden size %lld is not a multiple of the head size %lld (2 x the caches' columns)",
                   (long long)X.shape[2], (long long)hd);
    H = X.shape[2] / hd;
  } else {
    return c.err("input must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size], got %s",
                 shape_str(X).c_str());
  }
  const int64_t rot = rot_attr > 0 ? rot_attr : hd;
  if (rot % 2 || rot > hd || cols < rot / 2)
    return c.err("rotary dimension %lld: it must be even, at most the head size %lld, and the caches need %lld columns "
                 "(they have %lld)",
                 (long long)rot, (long long)hd, (long long)(rot / 2), (long long)cols);
  std::vector<int64_t> rows(static_cast<size_t>(B * S));
  const int64_t* pv = static_cast<const int64_t*>(pos.data);
  const bool start = olc_element_count(&pos) == 1 && pos.ndim <= 1;
  if (!start && (pos.ndim != 2 || pos.shape[0] != B || pos.shape[1] != S))
    return c.err("position_ids has shape %s, expected [1] (a start position) or [%lld, %lld]", shape_str(pos).c_str(),
                 (long long)B, (long long)S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t v = start ? pv[0] + s : pv[b * S + s];
      if (v < 0 || v >= max_pos)
        return c.err("position %lld of token %lld of batch %lld is outside the cos/sin caches (%lld rows)", (long long)v,
                     (long long)s, (long long)b, (long long)max_pos);
      rows[b * S + s] = v;
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
    a.cache_cols = cols;
    if (start) a.start_pos = pv;
    else a.position_ids = pv, a.pos_batch = B;
    a.y = y;
    naive::rotary(a);
    return OLC_OK;
  }
  Rope r;
  r.rot = rot, r.interleaved = interleaved, r.dt = dt;
  r.cos = cs.data, r.sin = sn.data, r.ld = cols;
  r.pos = rows.data(), r.pos_sb = S;
  return run_rope_rows(c, isa, dt, X.ndim, B, H, S, hd, X.data, y, r);
}

}  // namespace

void ms_ops(std::vector<OpEntry>* out) {
  out->push_back({"com.microsoft", "GroupQueryAttention", "GroupQueryAttention", &make_gqa, 0});
  out->push_back({"com.microsoft", "RotaryEmbedding", "MicrosoftRotaryEmbedding", &make_ms_rotary, 0});
}

}  // namespace olc_attn
