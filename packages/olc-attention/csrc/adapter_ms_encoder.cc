// Adapters of onnxruntime's encoder-style attention operators:
// com.microsoft MultiHeadAttention and Attention (BERT: packed QKV weights).
// Their key masks (mask_index / key_padding_mask) add mask_filter_value to
// the masked keys' scores, as onnxruntime does; unidirectional is causal
// with the past in front.
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

// The key mask forms onnxruntime's CPU kernels take: lengths (B), end and
// start positions (2B, Attention only), 0/1 per key (B, T) or per query and
// key (B, S, T). Empty string: the shape fits.
std::string check_key_mask(const olc_tensor& m, int64_t B, int64_t S, int64_t T, bool start_end) {
  const bool ok = (m.ndim == 1 && (m.shape[0] == B || (start_end && m.shape[0] == 2 * B))) ||
                  (m.ndim == 2 && m.shape[0] == B && m.shape[1] == T) ||
                  (m.ndim == 3 && m.shape[0] == B && m.shape[1] == S && m.shape[2] == T);
  if (ok) return "";
  return "has shape " + shape_str(m) + "; expected [" + std::to_string(B) + "] (key lengths)" +
         (start_end ? ", [" + std::to_string(2 * B) + "] (end and start positions)" : std::string()) + ", [" +
         std::to_string(B) + ", " + std::to_string(T) + "] or [" + std::to_string(B) + ", " + std::to_string(S) + ", " +
         std::to_string(T) + "] (0 / 1 per key; T = past + new keys)";
}

// The mask as a float32 bias the engine adds: 0 where kept, filter where masked.
void key_mask_bias(const olc_tensor& m, int64_t B, int64_t S, int64_t T, float filter, std::vector<float>* buf,
                   Mask* out) {
  const int32_t* d = static_cast<const int32_t*>(m.data);
  const int64_t rows = m.ndim == 3 ? B * S : B;
  buf->assign(static_cast<size_t>(rows * T), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < T; ++t) {
      bool keep;
      if (m.ndim == 1 && m.shape[0] == B) keep = t < d[r];
      else if (m.ndim == 1) keep = t >= d[B + r] && t < d[r];
      else keep = d[r * T + t] > 0;
      if (!keep) (*buf)[static_cast<size_t>(r * T + t)] = filter;
    }
  out->kind = kMaskAdd;
  out->dt = kF32;
  out->data = buf->data();
  out->sb = m.ndim == 3 ? S * T : T;
  out->sh = 0;
  out->sq = m.ndim == 3 ? T : 0;
  out->st = 1;
  out->cols = T;
}

// attention_bias (B or 1, N or 1, S, T) of the query's type, as an engine mask.
bool check_attn_bias(const olc_tensor& a, int64_t B, int64_t N, int64_t S, int64_t T) {
  return a.ndim == 4 && (a.shape[0] == 1 || a.shape[0] == B) && (a.shape[1] == 1 || a.shape[1] == N) &&
         a.shape[2] == S && a.shape[3] == T;
}
Mask attn_bias_mask(const olc_tensor& a, int dt, int64_t N, int64_t S, int64_t T) {
  Mask m;
  m.kind = kMaskAdd;
  m.dt = dt;
  m.data = a.data;
  m.sb = a.shape[0] == 1 ? 0 : N * S * T;
  m.sh = a.shape[1] == 1 ? 0 : S * T;
  m.sq = T;
  m.st = 1;
  m.cols = T;
  return m;
}

// ---------------------------------------------------------------- MultiHeadAttention

enum MhaIn : int { kQ = 0, kK, kV, kBias, kKeyMask, kAttnBias, kPastK, kPastV, kPastLen, kCacheInd, kMhaInputs };
const char* const kMhaNames[] = {"query", "key", "value", "bias", "key_padding_mask", "attention_bias",
                                 "past_key", "past_value", "past_sequence_length", "cache_indirection"};
enum Layout : int { kSeparate = 0, kPackedQkv = 1, kPackedKv = 2, kBnsh = 3 };

struct MhaKernel : Kernel {
  int dt = kF32;
  int64_t N = 0;
  float scale = 0.0f, filter = -10000.0f;
  int causal = 0;
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_mha(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<MhaKernel>();
  init_common(k.get(), node, naive, "MultiHeadAttention");
  Attrs a(node, error, es);
  int64_t uni = 0;
  bool has_n = false;
  if (!a.only({"num_heads", "mask_filter_value", "scale", "unidirectional"}) || !a.get_int("num_heads", &k->N, &has_n) ||
      !a.get_float("mask_filter_value", &k->filter) || !a.get_float("scale", &k->scale) ||
      !a.get_int("unidirectional", &uni))
    return nullptr;
  if (!has_n || k->N <= 0) return fail(error, es, "num_heads is required and must be positive"), nullptr;
  if (uni != 0 && uni != 1) return fail(error, es, "unidirectional must be 0 or 1"), nullptr;
  if (!std::isfinite(k->scale) || k->scale < 0) return fail(error, es, "scale must be finite and >= 0"), nullptr;
  k->causal = static_cast<int>(uni);
  if (node->n_inputs < 1 || node->n_inputs > kMhaInputs)
    return fail(error, es, "expects 1 to %d inputs, got %d", int(kMhaInputs), node->n_inputs), nullptr;
  if (node->n_outputs < 1 || node->n_outputs > 3)
    return fail(error, es, "expects 1 to 3 outputs (the qk output is not supported), got %d", node->n_outputs), nullptr;
  k->dt = storage_of(node->input_dtypes[kQ]);
  if (k->dt < 0) return fail(error, es, "query has type %s", olc_dtype_name(node->input_dtypes[kQ])), nullptr;
  for (int i = 0; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (t == OLC_DTYPE_UNDEFINED) continue;
    if (i == kPastLen || i == kCacheInd)
      return fail(error, es, "input %d (%s) is not supported (shared-buffer caches, beam search)", i, kMhaNames[i]),
             nullptr;
    const int32_t want = i == kKeyMask ? OLC_DTYPE_INT32 : node->input_dtypes[kQ];
    if (t != want)
      return fail(error, es, "input %d (%s) has type %s, expected %s", i, kMhaNames[i], olc_dtype_name(t),
                  olc_dtype_name(want)),
             nullptr;
  }
  if (k->has_in(kPastK) != k->has_in(kPastV))
    return fail(error, es, "past_key and past_value must be given together"), nullptr;
  if (k->has_in(kV) && !k->has_in(kK)) return fail(error, es, "value needs key"), nullptr;
  return k.release();
}

int32_t MhaKernel::run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const {
  const olc_tensor& Q = in[kQ];
  const olc_tensor* K = has_in(kK) ? &in[kK] : nullptr;
  const olc_tensor* V = has_in(kV) ? &in[kV] : nullptr;
  int layout;
  int64_t B, S, L, H, Hv;
  if (!K) {
    if (Q.ndim != 5 || Q.shape[2] != N || Q.shape[3] != 3)
      return c.err("without key and value, query must be packed QKV [batch, seq, %lld, 3, head_size], got %s",
                   (long long)N, shape_str(Q).c_str());
    layout = kPackedQkv;
    B = Q.shape[0], S = L = Q.shape[1], H = Hv = Q.shape[4];
  } else {
    if (Q.ndim != 3 || Q.shape[2] % N)
      return c.err("query must be [batch, seq, num_heads (%lld) x head_size], got %s", (long long)N, shape_str(Q).c_str());
    B = Q.shape[0], S = Q.shape[1], H = Q.shape[2] / N;
    if (!V) {
      if (K->ndim != 5 || K->shape[0] != B || K->shape[2] != N || K->shape[3] != 2 || K->shape[4] != H)
        return c.err("without value, key must be packed KV [%lld, kv_seq, %lld, 2, %lld], got %s", (long long)B,
                     (long long)N, (long long)H, shape_str(*K).c_str());
      layout = kPackedKv;
      L = K->shape[1], Hv = H;
    } else if (K->ndim == 4) {
      if (V->ndim != 4 || K->shape[0] != B || K->shape[1] != N || K->shape[3] != H || V->shape[0] != B ||
          V->shape[1] != N || V->shape[2] != K->shape[2])
        return c.err("4-D key %s and value %s must be [%lld, %lld, kv_seq, %lld] and [%lld, %lld, kv_seq, v_head]",
                     shape_str(*K).c_str(), shape_str(*V).c_str(), (long long)B, (long long)N, (long long)H,
                     (long long)B, (long long)N);
      layout = kBnsh;
      L = K->shape[2], Hv = V->shape[3];
    } else {
      if (K->ndim != 3 || V->ndim != 3 || K->shape[0] != B || K->shape[2] != N * H || V->shape[0] != B ||
          V->shape[1] != K->shape[1] || V->shape[2] % N)
        return c.err("key %s and value %s must be [%lld, kv_seq, %lld] and [%lld, kv_seq, %lld x v_head] "
                     "(num_heads x the head size of query %s)",
                     shape_str(*K).c_str(), shape_str(*V).c_str(), (long long)B, (long long)(N * H), (long long)B,
                     (long long)N, shape_str(Q).c_str());
      layout = kSeparate;
      L = K->shape[1], Hv = V->shape[2] / N;
    }
  }
  const olc_tensor* bias = has_in(kBias) ? &in[kBias] : nullptr;
  if (bias && (bias->ndim != 1 || bias->shape[0] != N * (2 * H + Hv)))
    return c.err("bias has shape %s, expected [%lld] (the Q, K and V hidden sizes)", shape_str(*bias).c_str(),
                 (long long)(N * (2 * H + Hv)));
  const olc_tensor* pk = has_in(kPastK) ? &in[kPastK] : nullptr;
  const olc_tensor* pv = has_in(kPastV) ? &in[kPastV] : nullptr;
  int64_t P = 0;
  if (pk) {
    if (pk->ndim != 4 || pv->ndim != 4 || pk->shape[0] != B || pk->shape[1] != N || pk->shape[3] != H ||
        pv->shape[0] != B || pv->shape[1] != N || pv->shape[2] != pk->shape[2] || pv->shape[3] != Hv)
      return c.err("past_key %s / past_value %s must be [%lld, %lld, past, %lld] / [%lld, %lld, past, %lld]",
                   shape_str(*pk).c_str(), shape_str(*pv).c_str(), (long long)B, (long long)N, (long long)H,
                   (long long)B, (long long)N, (long long)Hv);
    P = pk->shape[2];
  }
  const int64_t T = P + L;
  const olc_tensor* km = has_in(kKeyMask) ? &in[kKeyMask] : nullptr;
  if (km) {
    const std::string why = check_key_mask(*km, B, S, T, false);
    if (!why.empty()) return c.err("key_padding_mask %s", why.c_str());
  }
  const olc_tensor* ab = has_in(kAttnBias) ? &in[kAttnBias] : nullptr;
  if (ab && !check_attn_bias(*ab, B, N, S, T))
    return c.err("attention_bias has shape %s, expected [%lld or 1, %lld or 1, %lld, %lld]", shape_str(*ab).c_str(),
                 (long long)B, (long long)N, (long long)S, (long long)T);

  bool ok;
  void* y = alloc_out(c, *this, 0, Q.dtype, {B, S, N * Hv}, &ok);
  if (!ok) return OLC_ERROR;
  void* ok_out = alloc_out(c, *this, 1, Q.dtype, {B, N, T, H}, &ok);
  if (!ok) return OLC_ERROR;
  void* ov_out = alloc_out(c, *this, 2, Q.dtype, {B, N, T, Hv}, &ok);
  if (!ok) return OLC_ERROR;

  if (naive) {
    naive::Mha a;
    a.dt = dt, a.layout = layout;
    a.B = B, a.S = S, a.L = L, a.P = P, a.N = N, a.H = H, a.Hv = Hv;
    a.q = Q.data, a.k = K ? K->data : nullptr, a.v = V ? V->data : nullptr;
    a.bias = bias ? bias->data : nullptr;
    a.past_k = pk ? pk->data : nullptr, a.past_v = pv ? pv->data : nullptr;
    if (km) a.mask = {static_cast<const int32_t*>(km->data), km->ndim, km->shape, filter};
    if (ab) a.attn_bias = ab->data, a.ab_b = ab->shape[0], a.ab_h = ab->shape[1];
    a.scale = scale;
    a.causal = causal;
    a.y = y, a.present_k = ok_out, a.present_v = ov_out;
    naive::mha(a);
    return OLC_OK;
  }

  const size_t es = storage_size(dt);
  const char* qd = static_cast<const char*>(Q.data);
  // Views of the new Q, K, V (b, h, s, d) in their layouts.
  View q, kn, vn;
  switch (layout) {
    case kPackedQkv:
      q = {qd, S * N * 3 * H, 3 * H, N * 3 * H};
      kn = {qd + static_cast<size_t>(H) * es, S * N * 3 * H, 3 * H, N * 3 * H};
      vn = {qd + static_cast<size_t>(2 * H) * es, S * N * 3 * H, 3 * H, N * 3 * H};
      break;
    case kPackedKv:
      q = {qd, S * N * H, H, N * H};
      kn = {K->data, L * N * 2 * H, 2 * H, N * 2 * H};
      vn = {static_cast<const char*>(K->data) + static_cast<size_t>(H) * es, L * N * 2 * H, 2 * H, N * 2 * H};
      break;
    case kBnsh:
      q = {qd, S * N * H, H, N * H};
      kn = {K->data, N * L * H, L * H, H};
      vn = {V->data, N * L * Hv, L * Hv, Hv};
      break;
    default:
      q = {qd, S * N * H, H, N * H};
      kn = {K->data, L * N * H, H, N * H};
      vn = {V->data, L * N * Hv, Hv, N * Hv};
  }
  // The bias makes contiguous BSNH copies (of Q only when K and V are caches).
  std::vector<char> qb, kb, vb;
  if (bias) {
    const char* bd = static_cast<const char*>(bias->data);
    auto biased = [&](const View& src, int64_t rows, int64_t heads_w, int64_t width, const char* b, std::vector<char>* out) {
      // rows x (N heads of `width`): row r = (b, s); head h at src.sh.
      out->resize(static_cast<size_t>(rows * heads_w) * es);
      std::vector<float> x(static_cast<size_t>(width)), bb(static_cast<size_t>(heads_w));
      isa->to_f32(dt, b, bb.data(), heads_w);
      const int64_t per_b = rows / B;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < N; ++h) {
          const char* s = static_cast<const char*>(src.data) +
                          static_cast<size_t>((r / per_b) * src.sb + h * src.sh + (r % per_b) * src.ss) * es;
          isa->to_f32(dt, s, x.data(), width);
          for (int64_t d = 0; d < width; ++d) x[static_cast<size_t>(d)] += bb[static_cast<size_t>(h * width + d)];
          isa->from_f32(dt, x.data(), out->data() + static_cast<size_t>(r * heads_w + h * width) * es, width);
        }
    };
    biased(q, B * S, N * H, H, bd, &qb);
    q = {qb.data(), S * N * H, H, N * H};
    if (layout != kBnsh) {
      biased(kn, B * L, N * H, H, bd + static_cast<size_t>(N * H) * es, &kb);
      biased(vn, B * L, N * Hv, Hv, bd + static_cast<size_t>(2 * N * H) * es, &vb);
      kn = {kb.data(), L * N * H, H, N * H};
      vn = {vb.data(), L * N * Hv, Hv, N * Hv};
    }
  }
  AttnProblem p;
  p.dt = dt;
  p.B = B, p.Hq = N, p.Hkv = N, p.Sq = S, p.T = T, p.D = H, p.Dv = Hv;
  p.q = q;
  p.y = {y, S * N * Hv, Hv, N * Hv};
  std::vector<char> tmp_k, tmp_v;
  CacheWrite cw[2];
  const View* cur[2] = {&kn, &vn};
  void* outs[2] = {ok_out, ov_out};
  const int64_t dims[2] = {H, Hv};
  std::vector<char>* tmps[2] = {&tmp_k, &tmp_v};
  View* srcs[2] = {&p.k, &p.v};
  const CacheWrite** fills[2] = {&p.fill_k, &p.fill_v};
  for (int w = 0; w < 2; ++w) {
    const int64_t d = dims[w];
    void* dst = outs[w];
    if (pk && !dst) {
      tmps[w]->resize(static_cast<size_t>(B * N * T * d) * es);
      dst = tmps[w]->data();
    }
    *srcs[w] = *cur[w];
    if (!dst) continue;
    cw[w].k = isa;
    cw[w].dt = dt;
    cw[w].B = B, cw[w].H = N, cw[w].T = T, cw[w].D = d;
    if (pk) cw[w].past = {w == 0 ? pk->data : pv->data, N * P * d, P * d, d};
    cw[w].P = P;
    cw[w].cur = *cur[w];
    cw[w].S = L;
    cw[w].out = dst;
    *fills[w] = &cw[w];
    if (pk) *srcs[w] = View{dst, N * T * d, T * d, d};
  }
  p.scale = scale > 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(H)));
  std::vector<float> kmb;
  int nm = 0;
  if (ab) p.mask[nm++] = attn_bias_mask(*ab, dt, N, S, T);
  if (km) key_mask_bias(*km, B, S, T, filter, &kmb, &p.mask[nm++]);
  std::vector<int64_t> q_off(static_cast<size_t>(B), P);
  p.q_off = q_off.data();
  p.causal = causal;
  return run_attention(g_api, c.ctx, isa, p, tuning());
}

// ---------------------------------------------------------------- Attention (BERT)

enum AttIn : int { kInput = 0, kWeights, kAttBias, kMaskIndex, kPast, kAttnBias2, kPastSeqLen, kAttInputs };
const char* const kAttNames[] = {"input", "weights", "bias", "mask_index", "past", "attention_bias",
                                 "past_sequence_length"};

struct MsAttentionKernel : Kernel {
  int dt = kF32;
  int64_t N = 0;
  std::vector<int64_t> sizes;  // qkv_hidden_sizes, or empty
  float scale = 0.0f, filter = -10000.0f;
  int causal = 0;
  // Constant weights converted / padded once for the projection.
  std::vector<float> packed;
  int64_t packed_ld = 0;
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_ms_attention(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<MsAttentionKernel>();
  init_common(k.get(), node, naive, "MicrosoftAttention");
  Attrs a(node, error, es);
  int64_t uni = 0, rotary = 0, share = 0, rot_dim = 0;
  bool has_n = false;
  if (!a.only({"num_heads", "unidirectional", "qkv_hidden_sizes", "mask_filter_value", "scale", "do_rotary",
               "past_present_share_buffer", "rotary_embedding_dim"}) ||
      !a.get_int("num_heads", &k->N, &has_n) || !a.get_int("unidirectional", &uni) ||
      !a.get_float("mask_filter_value", &k->filter) || !a.get_float("scale", &k->scale) ||
      !a.get_int("do_rotary", &rotary) || !a.get_int("past_present_share_buffer", &share) ||
      !a.get_int("rotary_embedding_dim", &rot_dim))
    return nullptr;
  for (int32_t i = 0; i < node->n_attributes; ++i) {
    const olc_attribute& at = node->attributes[i];
    if (std::strcmp(at.name, "qkv_hidden_sizes") != 0) continue;
    if (at.type != OLC_ATTR_INTS || at.count != 3)
      return fail(error, es, "qkv_hidden_sizes must be 3 ints"), nullptr;
    k->sizes.assign(at.ints, at.ints + 3);
  }
  if (!has_n || k->N <= 0) return fail(error, es, "num_heads is required and must be positive"), nullptr;
  if (uni != 0 && uni != 1) return fail(error, es, "unidirectional must be 0 or 1"), nullptr;
  if (rotary != 0) return fail(error, es, "do_rotary is not supported"), nullptr;
  if (share != 0) return fail(error, es, "past_present_share_buffer is not supported"), nullptr;
  if (!std::isfinite(k->scale) || k->scale < 0) return fail(error, es, "scale must be finite and >= 0"), nullptr;
  for (int64_t s : k->sizes)
    if (s <= 0 || s % k->N)
      return fail(error, es, "qkv_hidden_sizes must be positive multiples of num_heads (%lld)", (long long)k->N),
             nullptr;
  if (!k->sizes.empty() && k->sizes[0] != k->sizes[1])
    return fail(error, es, "the Q and K hidden sizes of qkv_hidden_sizes must be equal"), nullptr;
  k->causal = static_cast<int>(uni);
  if (node->n_inputs < 2 || node->n_inputs > kAttInputs)
    return fail(error, es, "expects 2 to %d inputs, got %d", int(kAttInputs), node->n_inputs), nullptr;
  if (node->n_outputs < 1 || node->n_outputs > 2)
    return fail(error, es, "expects 1 or 2 outputs, got %d", node->n_outputs), nullptr;
  k->dt = storage_of(node->input_dtypes[kInput]);
  if (k->dt < 0) return fail(error, es, "input has type %s", olc_dtype_name(node->input_dtypes[kInput])), nullptr;
  for (int i = 0; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (t == OLC_DTYPE_UNDEFINED) {
      if (i == kWeights) return fail(error, es, "weights are required"), nullptr;
      continue;
    }
    if (i == kPastSeqLen)
      return fail(error, es, "past_sequence_length (shared-buffer caches) is not supported"), nullptr;
    const int32_t want = i == kMaskIndex ? OLC_DTYPE_INT32 : node->input_dtypes[kInput];
    if (t != want)
      return fail(error, es, "input %d (%s) has type %s, expected %s", i, kAttNames[i], olc_dtype_name(t),
                  olc_dtype_name(want)),
             nullptr;
  }
  // Constant weights (an initializer): converted and padded for the GEMM once.
  const olc_tensor& w = node->input_constants[kWeights];
  if (!naive && w.data && w.ndim == 2) {
    const bool direct = k->dt == kF32 && w.shape[1] % k->isa->width == 0;
    if (!direct) {
      k->packed = pack_weights(k->isa, k->dt, w.shape[0], w.shape[1], w.data, &k->packed_ld);
      if (OLC_API_HAS(g_api, report_prepacked))
        g_api->report_prepacked(node, k.get(), static_cast<int64_t>(k->packed.size() * sizeof(float)));
    }
  }
  return k.release();
}

int32_t MsAttentionKernel::run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const {
  const olc_tensor &X = in[kInput], &Wt = in[kWeights];
  if (X.ndim != 3) return c.err("input must be [batch, seq, input_hidden], got %s", shape_str(X).c_str());
  const int64_t B = X.shape[0], S = X.shape[1], Din = X.shape[2];
  if (Wt.ndim != 2 || Wt.shape[0] != Din)
    return c.err("weights has shape %s, expected [%lld (input_hidden), q + k + v hidden]", shape_str(Wt).c_str(),
                 (long long)Din);
  const int64_t Wn = Wt.shape[1];
  int64_t dq, dk, dv;
  if (sizes.empty()) {
    if (Wn % 3 || (Wn / 3) % N)
      return c.err("weights' second dimension %lld must be 3 x a multiple of num_heads %lld (or give qkv_hidden_sizes)",
                   (long long)Wn, (long long)N);
    dq = dk = dv = Wn / 3;
  } else {
    dq = sizes[0], dk = sizes[1], dv = sizes[2];
    if (dq + dk + dv != Wn)
      return c.err("qkv_hidden_sizes add up to %lld but weights have %lld columns", (long long)(dq + dk + dv),
                   (long long)Wn);
  }
  const int64_t H = dq / N, Hv = dv / N;
  const olc_tensor* bias = has_in(kAttBias) ? &in[kAttBias] : nullptr;
  if (bias && (bias->ndim != 1 || bias->shape[0] != Wn))
    return c.err("bias has shape %s, expected [%lld]", shape_str(*bias).c_str(), (long long)Wn);
  const olc_tensor* past = has_in(kPast) ? &in[kPast] : nullptr;
  int64_t P = 0;
  if (past) {
    if (dq != dv)
      return c.err("with a past, the Q, K and V hidden sizes must be equal (got %lld, %lld, %lld)", (long long)dq,
                   (long long)dk, (long long)dv);
    if (past->ndim != 5 || past->shape[0] != 2 || past->shape[1] != B || past->shape[2] != N || past->shape[4] != H)
      return c.err("past has shape %s, expected [2, %lld, %lld, past_len, %lld]", shape_str(*past).c_str(),
                   (long long)B, (long long)N, (long long)H);
    P = past->shape[3];
  }
  const int64_t T = P + S;
  if (wants_out(1) && dq != dv)
    return c.err("the present output holds K and V with one head size: the Q, K and V hidden sizes must be equal "
                 "(got %lld, %lld, %lld)",
                 (long long)dq, (long long)dk, (long long)dv);
  const olc_tensor* km = has_in(kMaskIndex) ? &in[kMaskIndex] : nullptr;
  if (km) {
    if (km->ndim == 4)
      return c.err("mask_index of 4 dimensions %s (Megatron) is not supported", shape_str(*km).c_str());
    const std::string why = check_key_mask(*km, B, S, T, true);
    if (!why.empty()) return c.err("mask_index %s", why.c_str());
  }
  const olc_tensor* ab = has_in(kAttnBias2) ? &in[kAttnBias2] : nullptr;
  if (ab && !check_attn_bias(*ab, B, N, S, T))
    return c.err("attention_bias has shape %s, expected [%lld or 1, %lld or 1, %lld, %lld]", shape_str(*ab).c_str(),
                 (long long)B, (long long)N, (long long)S, (long long)T);

  bool ok;
  void* y = alloc_out(c, *this, 0, X.dtype, {B, S, dv}, &ok);
  if (!ok) return OLC_ERROR;
  void* present = alloc_out(c, *this, 1, X.dtype, {2, B, N, T, H}, &ok);
  if (!ok) return OLC_ERROR;

  if (naive) {
    naive::MsAttention a;
    a.dt = dt;
    a.B = B, a.S = S, a.Din = Din, a.N = N, a.dq = dq, a.dk = dk, a.dv = dv, a.P = P;
    a.x = X.data, a.w = Wt.data, a.bias = bias ? bias->data : nullptr, a.past = past ? past->data : nullptr;
    if (km) a.mask = {static_cast<const int32_t*>(km->data), km->ndim, km->shape, filter};
    if (ab) a.attn_bias = ab->data, a.ab_b = ab->shape[0], a.ab_h = ab->shape[1];
    a.scale = scale;
    a.causal = causal;
    a.y = y, a.present = present;
    naive::ms_attention(a);
    return OLC_OK;
  }

  // QKV = X . W + bias, one (B * S) x Wn matrix of the input's type.
  const size_t es = storage_size(dt);
  std::vector<char> qkv(static_cast<size_t>(B * S * Wn) * es);
  std::vector<float> wtmp;
  const float* wp;
  int64_t ldw;
  if (!packed.empty()) {
    wp = packed.data(), ldw = packed_ld;
  } else if (dt == kF32 && Wn % isa->width == 0) {
    wp = static_cast<const float*>(Wt.data), ldw = Wn;
  } else {
    wtmp = pack_weights(isa, dt, Din, Wn, Wt.data, &ldw);
    wp = wtmp.data();
  }
  const int32_t rc = run_projection(g_api, c.ctx, isa, dt, B * S, Din, Wn, X.data, wp, ldw,
                                    bias ? bias->data : nullptr, qkv.data());
  if (rc != OLC_OK) return rc;

  AttnProblem p;
  p.dt = dt;
  p.B = B, p.Hq = N, p.Hkv = N, p.Sq = S, p.T = T, p.D = H, p.Dv = Hv;
  const char* qd = qkv.data();
  p.q = {qd, S * Wn, H, Wn};
  const View kn = {qd + static_cast<size_t>(dq) * es, S * Wn, dk / N, Wn};
  const View vn = {qd + static_cast<size_t>(dq + dk) * es, S * Wn, Hv, Wn};
  p.k = kn, p.v = vn;
  p.y = {y, S * dv, Hv, dv};
  CacheWrite cw[2];
  std::vector<char> tmp;
  if (past || present) {
    char* dst = static_cast<char*>(present);
    if (!dst) {
      tmp.resize(static_cast<size_t>(2 * B * N * T * H) * es);
      dst = tmp.data();
    }
    for (int w = 0; w < 2; ++w) {
      cw[w].k = isa;
      cw[w].dt = dt;
      cw[w].B = B, cw[w].H = N, cw[w].T = T, cw[w].D = H;
      if (past)
        cw[w].past = {static_cast<const char*>(past->data) + static_cast<size_t>(w * B * N * P * H) * es, N * P * H,
                      P * H, H};
      cw[w].P = P;
      cw[w].cur = w == 0 ? kn : vn;
      cw[w].S = S;
      cw[w].out = dst + static_cast<size_t>(w * B * N * T * H) * es;
    }
    p.fill_k = &cw[0], p.fill_v = &cw[1];
    p.k = {cw[0].out, N * T * H, T * H, H};
    p.v = {cw[1].out, N * T * H, T * H, H};
  }
  p.scale = scale > 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(H)));
  std::vector<float> kmb;
  int nm = 0;
  if (ab) p.mask[nm++] = attn_bias_mask(*ab, dt, N, S, T);
  if (km) key_mask_bias(*km, B, S, T, filter, &kmb, &p.mask[nm++]);
  std::vector<int64_t> q_off(static_cast<size_t>(B), P);
  p.q_off = q_off.data();
  p.causal = causal;
  return run_attention(g_api, c.ctx, isa, p, tuning());
}

}  // namespace

void ms_encoder_ops(std::vector<OpEntry>* out) {
  out->push_back({"com.microsoft", "MultiHeadAttention", "MultiHeadAttention", &make_mha, 0});
  out->push_back({"com.microsoft", "Attention", "MicrosoftAttention", &make_ms_attention, 0});
}

}  // namespace olc_attn
