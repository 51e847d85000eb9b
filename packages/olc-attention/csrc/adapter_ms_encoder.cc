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

// com.microsoft Attention: the projection QKV = input . weights + bias, then
// attention over Q, K, V (the past in front, present written once). Its
// projected form olc.fused::PackedQkvAttention (made by the graph pass
// that runs the projection as a MatMul on olc-matmul, passes.py) takes the
// product input . weights without its bias and adds the bias as Q, K and V
// are used. Both share everything after the projection: MsAttentionBase.

enum AttIn : int { kInput = 0, kWeights, kAttBias, kMaskIndex, kPast, kAttnBias2, kPastSeqLen, kAttInputs };
const char* const kAttNames[] = {"input", "weights", "bias", "mask_index", "past", "attention_bias",
                                 "past_sequence_length"};
enum PackedIn : int { kQkv = 0, kQkvBias, kQkvMask, kQkvPast, kQkvAttnBias, kPackedInputs };
const char* const kPackedNames[] = {"qkv", "bias", "mask_index", "past", "attention_bias"};

// The sizes of one run: Q, K, V hidden sizes (dq, dk, dv: the projection's
// columns, Wn in all), head sizes, past and total key counts.
struct MsDims {
  int64_t B = 0, S = 0, Wn = 0, dq = 0, dk = 0, dv = 0, H = 0, Hv = 0, P = 0, T = 0;
};

// The inputs after the projection (null when absent).
struct MsRest {
  const olc_tensor* bias = nullptr;
  const olc_tensor* mask = nullptr;
  const olc_tensor* past = nullptr;
  const olc_tensor* attn_bias = nullptr;
};

struct MsAttentionBase : Kernel {
  int dt = kF32;
  int64_t N = 0;
  std::vector<int64_t> sizes;  // qkv_hidden_sizes, or empty
  float scale = 0.0f, filter = -10000.0f;
  int causal = 0;

  // Reads and checks the attributes both forms take.
  bool read_attributes(const olc_node_info* node, char* error, size_t es);
  // The hidden sizes of a projection of Wn columns (`cols` names them in
  // errors), then every input after the projection checked against them.
  // OLC_OK or the error set.
  int32_t check(RunCtx& c, int64_t B, int64_t S, int64_t Wn, const char* cols, const MsRest& r, MsDims* d) const;
  // Allocates the outputs (Y and present).
  int32_t outputs(RunCtx& c, int32_t dtype, const MsDims& d, void** y, void** present) const;
  // The naive reference on x (with weights w) or on the projection x (w null).
  void run_naive(const MsDims& d, int64_t Din, const void* x, const void* w, const MsRest& r, void* y,
                 void* present) const;
  // The attention over the projection qkv ((B * S) x Wn of the storage
  // type); bias (Wn float32 values) is added as Q, K and V are used, or null
  // when qkv holds it already.
  int32_t attend(RunCtx& c, const MsDims& d, const void* qkv, const float* bias, const MsRest& r, void* y,
                 void* present) const;
};

bool MsAttentionBase::read_attributes(const olc_node_info* node, char* error, size_t es) {
  Attrs a(node, error, es);
  int64_t uni = 0, rotary = 0, share = 0, rot_dim = 0;
  bool has_n = false;
  if (!a.only({"num_heads", "unidirectional", "qkv_hidden_sizes", "mask_filter_value", "scale", "do_rotary",
               "past_present_share_buffer", "rotary_embedding_dim"}) ||
      !a.get_int("num_heads", &N, &has_n) || !a.get_int("unidirectional", &uni) ||
      !a.get_float("mask_filter_value", &filter) || !a.get_float("scale", &scale) ||
      !a.get_int("do_rotary", &rotary) || !a.get_int("past_present_share_buffer", &share) ||
      !a.get_int("rotary_embedding_dim", &rot_dim))
    return false;
  for (int32_t i = 0; i < node->n_attributes; ++i) {
    const olc_attribute& at = node->attributes[i];
    if (std::strcmp(at.name, "qkv_hidden_sizes") != 0) continue;
    if (at.type != OLC_ATTR_INTS || at.count != 3) return fail(error, es, "qkv_hidden_sizes must be 3 ints");
    sizes.assign(at.ints, at.ints + 3);
  }
  if (!has_n || N <= 0) return fail(error, es, "num_heads is required and must be positive");
  if (uni != 0 && uni != 1) return fail(error, es, "unidirectional must be 0 or 1");
  if (rotary != 0) return fail(error, es, "do_rotary is not supported");
  if (share != 0) return fail(error, es, "past_present_share_buffer is not supported");
  if (!std::isfinite(scale) || scale < 0) return fail(error, es, "scale must be finite and >= 0");
  for (int64_t s : sizes)
    if (s <= 0 || s % N)
      return fail(error, es, "qkv_hidden_sizes must be positive multiples of num_heads (%lld)", (long long)N);
  if (!sizes.empty() && sizes[0] != sizes[1])
    return fail(error, es, "the Q and K hidden sizes of qkv_hidden_sizes must be equal");
  causal = static_cast<int>(uni);
  return true;
}

int32_t MsAttentionBase::check(RunCtx& c, int64_t B, int64_t S, int64_t Wn, const char* cols, const MsRest& r,
                               MsDims* d) const {
  d->B = B, d->S = S, d->Wn = Wn;
  if (sizes.empty()) {
    if (Wn % 3 || (Wn / 3) % N)
      return c.err("%s' columns %lld must be 3 x a multiple of num_heads %lld (or give qkv_hidden_sizes)", cols,
                   (long long)Wn, (long long)N);
    d->dq = d->dk = d->dv = Wn / 3;
  } else {
    d->dq = sizes[0], d->dk = sizes[1], d->dv = sizes[2];
    if (d->dq + d->dk + d->dv != Wn)
      return c.err("qkv_hidden_sizes add up to %lld but %s have %lld columns", (long long)(d->dq + d->dk + d->dv),
                   cols, (long long)Wn);
  }
  d->H = d->dq / N, d->Hv = d->dv / N;
  if (r.bias && (r.bias->ndim != 1 || r.bias->shape[0] != Wn))
    return c.err("bias has shape %s, expected [%lld]", shape_str(*r.bias).c_str(), (long long)Wn);
  d->P = 0;
  if (r.past) {
    if (d->dq != d->dv)
      return c.err("with a past, the Q, K and V hidden sizes must be equal (got %lld, %lld, %lld)", (long long)d->dq,
                   (long long)d->dk, (long long)d->dv);
    const olc_tensor& p = *r.past;
    if (p.ndim != 5 || p.shape[0] != 2 || p.shape[1] != B || p.shape[2] != N || p.shape[4] != d->H)
      return c.err("past has shape %s, expected [2, %lld, %lld, past_len, %lld]", shape_str(p).c_str(), (long long)B,
                   (long long)N, (long long)d->H);
    d->P = p.shape[3];
  }
  d->T = d->P + S;
  if (wants_out(1) && d->dq != d->dv)
    return c.err("the present output holds K and V with one head size: the Q, K and V hidden sizes must be equal "
                 "(got %lld, %lld, %lld)",
                 (long long)d->dq, (long long)d->dk, (long long)d->dv);
  if (r.mask) {
    if (r.mask->ndim == 4)
      return c.err("mask_index of 4 dimensions %s (Megatron) is not supported", shape_str(*r.mask).c_str());
    const std::string why = check_key_mask(*r.mask, B, S, d->T, true);
    if (!why.empty()) return c.err("mask_index %s", why.c_str());
  }
  if (r.attn_bias && !check_attn_bias(*r.attn_bias, B, N, S, d->T))
    return c.err("attention_bias has shape %s, expected [%lld or 1, %lld or 1, %lld, %lld]",
                 shape_str(*r.attn_bias).c_str(), (long long)B, (long long)N, (long long)S, (long long)d->T);
  return OLC_OK;
}

int32_t MsAttentionBase::outputs(RunCtx& c, int32_t dtype, const MsDims& d, void** y, void** present) const {
  bool ok;
  *y = alloc_out(c, *this, 0, dtype, {d.B, d.S, d.dv}, &ok);
  if (!ok) return OLC_ERROR;
  *present = alloc_out(c, *this, 1, dtype, {2, d.B, N, d.T, d.H}, &ok);
  return ok ? OLC_OK : OLC_ERROR;
}

void MsAttentionBase::run_naive(const MsDims& d, int64_t Din, const void* x, const void* w, const MsRest& r, void* y,
                                void* present) const {
  naive::MsAttention a;
  a.dt = dt;
  a.B = d.B, a.S = d.S, a.Din = Din, a.N = N, a.dq = d.dq, a.dk = d.dk, a.dv = d.dv, a.P = d.P;
  a.x = x, a.w = w, a.bias = r.bias ? r.bias->data : nullptr, a.past = r.past ? r.past->data : nullptr;
  if (r.mask) a.mask = {static_cast<const int32_t*>(r.mask->data), r.mask->ndim, r.mask->shape, filter};
  if (r.attn_bias) a.attn_bias = r.attn_bias->data, a.ab_b = r.attn_bias->shape[0], a.ab_h = r.attn_bias->shape[1];
  a.scale = scale;
  a.causal = causal;
  a.y = y, a.present = present;
  naive::ms_attention(a);
}

int32_t MsAttentionBase::attend(RunCtx& c, const MsDims& d, const void* qkv, const float* bias, const MsRest& r,
                                void* y, void* present) const {
  const size_t es = storage_size(dt);
  const int64_t B = d.B, S = d.S, Wn = d.Wn, H = d.H, Hv = d.Hv, P = d.P, T = d.T;
  AttnProblem p;
  p.dt = dt;
  p.B = B, p.Hq = N, p.Hkv = N, p.Sq = S, p.T = T, p.D = H, p.Dv = Hv;
  const char* qd = static_cast<const char*>(qkv);
  p.q = {qd, S * Wn, H, Wn};
  const View kn = {qd + static_cast<size_t>(d.dq) * es, S * Wn, d.dk / N, Wn};
  const View vn = {qd + static_cast<size_t>(d.dq + d.dk) * es, S * Wn, Hv, Wn};
  p.k = kn, p.v = vn;
  p.y = {y, S * d.dv, Hv, d.dv};
  if (bias) p.q_bias = bias;
  CacheWrite cw[2];
  std::vector<char> tmp;
  if (r.past || present) {
    // K and V through the cache: its new rows get their bias as they are written.
    char* dst = static_cast<char*>(present);
    if (!dst) {
      tmp.resize(static_cast<size_t>(2 * B * N * T * H) * es);
      dst = tmp.data();
    }
    for (int w = 0; w < 2; ++w) {
      cw[w].k = isa;
      cw[w].dt = dt;
      cw[w].B = B, cw[w].H = N, cw[w].T = T, cw[w].D = H;
      if (r.past)
        cw[w].past = {static_cast<const char*>(r.past->data) + static_cast<size_t>(w * B * N * P * H) * es, N * P * H,
                      P * H, H};
      cw[w].P = P;
      cw[w].cur = w == 0 ? kn : vn;
      cw[w].S = S;
      if (bias) cw[w].bias = bias + (w == 0 ? d.dq : d.dq + d.dk);
      cw[w].out = dst + static_cast<size_t>(w * B * N * T * H) * es;
    }
    p.fill_k = &cw[0], p.fill_v = &cw[1];
    p.k = {cw[0].out, N * T * H, T * H, H};
    p.v = {cw[1].out, N * T * H, T * H, H};
  } else if (bias) {
    p.k_bias = bias + d.dq;
    p.v_bias = bias + d.dq + d.dk;
  }
  p.scale = scale > 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(H)));
  std::vector<float> kmb;
  int nm = 0;
  if (r.attn_bias) p.mask[nm++] = attn_bias_mask(*r.attn_bias, dt, N, S, T);
  if (r.mask) key_mask_bias(*r.mask, B, S, T, filter, &kmb, &p.mask[nm++]);
  std::vector<int64_t> q_off(static_cast<size_t>(B), P);
  p.q_off = q_off.data();
  p.causal = causal;
  return run_attention(g_api, c.ctx, isa, p, tuning());
}

// Input types: T for every input but mask_index (int32); absent ones skipped.
bool check_types(const olc_node_info* node, int first, int mask, const char* const* names, int refused, int dt0,
                 char* error, size_t es) {
  for (int i = first; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (t == OLC_DTYPE_UNDEFINED) continue;
    if (i == refused) return fail(error, es, "past_sequence_length (shared-buffer caches) is not supported");
    const int32_t want = i == mask ? OLC_DTYPE_INT32 : dt0;
    if (t != want)
      return fail(error, es, "input %d (%s) has type %s, expected %s", i, names[i], olc_dtype_name(t),
                  olc_dtype_name(want));
  }
  return true;
}

struct MsAttentionKernel : MsAttentionBase {
  // Constant weights converted / padded once for the projection.
  std::vector<float> packed;
  int64_t packed_ld = 0;
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_ms_attention(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<MsAttentionKernel>();
  init_common(k.get(), node, naive, "MicrosoftAttention");
  if (!k->read_attributes(node, error, es)) return nullptr;
  if (node->n_inputs < 2 || node->n_inputs > kAttInputs)
    return fail(error, es, "expects 2 to %d inputs, got %d", int(kAttInputs), node->n_inputs), nullptr;
  if (node->n_outputs < 1 || node->n_outputs > 2)
    return fail(error, es, "expects 1 or 2 outputs, got %d", node->n_outputs), nullptr;
  k->dt = storage_of(node->input_dtypes[kInput]);
  if (k->dt < 0) return fail(error, es, "input has type %s", olc_dtype_name(node->input_dtypes[kInput])), nullptr;
  if (node->input_dtypes[kWeights] == OLC_DTYPE_UNDEFINED) return fail(error, es, "weights are required"), nullptr;
  if (!check_types(node, 0, kMaskIndex, kAttNames, kPastSeqLen, node->input_dtypes[kInput], error, es)) return nullptr;
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
  MsRest r;
  r.bias = has_in(kAttBias) ? &in[kAttBias] : nullptr;
  r.mask = has_in(kMaskIndex) ? &in[kMaskIndex] : nullptr;
  r.past = has_in(kPast) ? &in[kPast] : nullptr;
  r.attn_bias = has_in(kAttnBias2) ? &in[kAttnBias2] : nullptr;
  MsDims d;
  void *y, *present;
  if (check(c, B, S, Wt.shape[1], "weights", r, &d) != OLC_OK || outputs(c, X.dtype, d, &y, &present) != OLC_OK)
    return OLC_ERROR;
  if (naive) {
    run_naive(d, Din, X.data, Wt.data, r, y, present);
    return OLC_OK;
  }

  // QKV = X . W + bias, one (B * S) x Wn matrix of the input's type.
  const int64_t Wn = d.Wn;
  std::vector<char> qkv(static_cast<size_t>(B * S * Wn) * storage_size(dt));
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
                                    r.bias ? r.bias->data : nullptr, qkv.data());
  if (rc != OLC_OK) return rc;
  return attend(c, d, qkv.data(), nullptr, r, y, present);
}

// olc.fused::PackedQkvAttention: qkv (B, S, Wn) = input . weights, the bias
// added on use. Attributes and everything after the projection as above.
struct PackedQkvKernel : MsAttentionBase {
  int32_t run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const override;
};

Kernel* make_packed_qkv(const olc_node_info* node, bool naive, char* error, size_t es) {
  auto k = std::make_unique<PackedQkvKernel>();
  init_common(k.get(), node, naive, "PackedQkvAttention");
  if (!k->read_attributes(node, error, es)) return nullptr;
  if (node->n_inputs < 1 || node->n_inputs > kPackedInputs)
    return fail(error, es, "expects 1 to %d inputs, got %d", int(kPackedInputs), node->n_inputs), nullptr;
  if (node->n_outputs < 1 || node->n_outputs > 2)
    return fail(error, es, "expects 1 or 2 outputs, got %d", node->n_outputs), nullptr;
  k->dt = storage_of(node->input_dtypes[kQkv]);
  if (k->dt < 0) return fail(error, es, "qkv has type %s", olc_dtype_name(node->input_dtypes[kQkv])), nullptr;
  if (!check_types(node, 0, kQkvMask, kPackedNames, -1, node->input_dtypes[kQkv], error, es)) return nullptr;
  return k.release();
}

int32_t PackedQkvKernel::run(RunCtx& c, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) const {
  const olc_tensor& X = in[kQkv];
  if (X.ndim != 3) return c.err("qkv must be [batch, seq, q + k + v hidden], got %s", shape_str(X).c_str());
  MsRest r;
  r.bias = has_in(kQkvBias) ? &in[kQkvBias] : nullptr;
  r.mask = has_in(kQkvMask) ? &in[kQkvMask] : nullptr;
  r.past = has_in(kQkvPast) ? &in[kQkvPast] : nullptr;
  r.attn_bias = has_in(kQkvAttnBias) ? &in[kQkvAttnBias] : nullptr;
  MsDims d;
  void *y, *present;
  if (check(c, X.shape[0], X.shape[1], X.shape[2], "qkv", r, &d) != OLC_OK || outputs(c, X.dtype, d, &y, &present) != OLC_OK)
    return OLC_ERROR;
  if (naive) {
    run_naive(d, 0, X.data, nullptr, r, y, present);
    return OLC_OK;
  }
  std::vector<float> bias;  // float32 values of a 16-bit bias
  const float* bp = nullptr;
  if (r.bias) {
    if (dt == kF32) {
      bp = static_cast<const float*>(r.bias->data);
    } else {
      bias = read_floats(*this, dt, *r.bias);
      bp = bias.data();
    }
  }
  return attend(c, d, X.data, bp, r, y, present);
}

}  // namespace

void ms_encoder_ops(std::vector<OpEntry>* out) {
  out->push_back({"com.microsoft", "MultiHeadAttention", "MultiHeadAttention", &make_mha, 0});
  out->push_back({"com.microsoft", "Attention", "MicrosoftAttention", &make_ms_attention, 0});
  out->push_back({"olc.fused", "PackedQkvAttention", "PackedQkvAttention", &make_packed_qkv, 0});
}

}  // namespace olc_attn
