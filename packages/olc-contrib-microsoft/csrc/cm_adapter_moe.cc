// Adapter of MoE and QMoE: shape validation, routing (softmax over the
// experts, top k, optional renormalization), the tokens of each expert, and
// the split over the executor (one expert's tokens per work item). The
// products and the activation are in the ISA engines (cm_moe.inc), the
// reference in cm_naive.cc.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cm_adapter_state.h"
#include "cm_common.h"

namespace olc_cm {
namespace {

// One expert projection: N outputs from K inputs, for every expert.
struct Fc {
  bool present = false;
  const char* w = nullptr;  // expert 0's weights: storage dt, or packed bits (QMoE)
  size_t expert_bytes = 0;
  int64_t N = 0, K = 0;
  std::vector<float> bias;  // [E][N] widened, empty when absent
  // QMoE
  int bits = 0;
  int64_t row_bytes = 0;
  int64_t blocks = 1, bs = 0;  // blocks per row of bs inputs (one block of K without block_size)
  const char* scales = nullptr;
  int scales_dt = kF32;
  const uint8_t* zp = nullptr;
  int64_t zp_expert_bytes = 0, zp_row_bytes = 0;  // zero points: per expert, per row (block form)
};

int32_t bits_at(const uint8_t* p, int bits, int64_t i) {
  if (bits == 8) return p[i];
  if (bits == 4) return (p[i >> 1] >> ((i & 1) * 4)) & 15;
  return (p[i >> 2] >> ((i & 3) * 2)) & 3;
}

// Scales and zero points of rows [n0, n0 + rows) of expert e as [row][block].
void fc_params(const KernelState* st, const Fc& f, int64_t e, int64_t n0, int64_t rows, float* scale, int32_t* zp,
               bool naive) {
  const size_t ses = f.scales_dt == kF32 ? 4 : 2;
  const char* s = f.scales + static_cast<size_t>((e * f.N + n0) * f.blocks) * ses;
  if (naive) naive::widen(f.scales_dt, s, rows * f.blocks, scale);
  else if (f.scales_dt == kF32) std::memcpy(scale, s, static_cast<size_t>(rows * f.blocks) * 4);
  else st->k->to_f32[f.scales_dt](s, scale, rows * f.blocks);
  const int32_t dz = 1 << (f.bits - 1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < f.blocks; ++b) {
      int32_t z = dz;
      if (f.zp) {
        const uint8_t* ez = f.zp + e * f.zp_expert_bytes;
        // per row: packed along the rows; with blocks: each row's blocks packed
        z = f.bs ? bits_at(ez + (n0 + r) * f.zp_row_bytes, f.bits, b) : bits_at(ez, f.bits, n0 + r);
      }
      zp[r * f.blocks + b] = z;
    }
  }
}

struct ExpertJob {
  const KernelState* st;
  const Fc* fc[3];  // FC1, FC2, FC3
  const float* x;   // tokens x H, widened
  int64_t H, I, k;
  const int64_t* offsets;  // expert e's entries: [offsets[e], offsets[e + 1])
  const int64_t* entries;  // token * k + rank
  const int64_t* experts;  // the experts with tokens, in order
  float* contrib;          // [tokens * k][H]
  std::atomic<bool>* oom;
};

// Per-thread buffers of one expert's work.
struct Scratch {
  std::vector<float> X, y1, y3, a, y2, rows, panel, products, scale;
  std::vector<int32_t> zp;
  std::vector<const float*> ptrs;
};

// Up to this many tokens, each weight row is dotted with the token rows
// directly: the decode case, where the weights are read once anyway.
constexpr int64_t kDirectTokens = 8;
// Weight rows materialized as float32 at a time (a multiple of every tile height).
constexpr int64_t kRowChunk = 48;

// Y[i][n] = sum_j X[i][j] W_e[n][j] (+ bias) for the n rows of X. Up to
// kDirectTokens tokens, quantized rows are dotted in their packed form
// (moe_qdot); otherwise the weight rows are taken as float32 (their own
// data, or widened or dequantized by the GatherBlockQuantized row kernel
// into a chunk buffer), and for more than kDirectTokens tokens they are
// multiplied with panels of the packed tokens, the products [rows][tokens]
// written back transposed.
void run_fc(const ExpertJob& j, const Fc& f, int64_t e, const float* X, int64_t n, float* Y, Scratch* sc) {
  const KernelState* st = j.st;
  const IsaKernels* k = st->k;
  const bool quant = st->op == Op::QMoE;
  const bool direct = n <= kDirectTokens;
  const int lanes = k->moe_lanes;
  const int nv = std::min(k->moe_max_nv, n >= 3 * lanes ? 4 : n > lanes ? 2 : 1);
  const int64_t nr = nv * lanes;
  const int64_t panels = direct ? 0 : (n + nr - 1) / nr;
  const bool own_rows = !quant && st->dt == kF32;
  if (!own_rows && !(quant && direct)) sc->rows.resize(static_cast<size_t>(kRowChunk * f.K));
  if (quant) {
    sc->scale.resize(static_cast<size_t>(kRowChunk * f.blocks));
    sc->zp.resize(static_cast<size_t>(kRowChunk * f.blocks));
  }
  if (!direct) {
    // the tokens, packed once for every weight row
    sc->panel.resize(static_cast<size_t>(std::max<int64_t>(1, panels * f.K * nr)));
    sc->ptrs.resize(static_cast<size_t>(nr));
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t cols = std::min(nr, n - p * nr);
      for (int64_t c = 0; c < cols; ++c) sc->ptrs[c] = X + (p * nr + c) * f.K;
      k->moe_pack_panel(sc->ptrs.data(), cols, f.K, nv, sc->panel.data() + p * f.K * nr);
    }
    sc->products.resize(static_cast<size_t>(kRowChunk * nr));  // one chunk against one panel
  }
  const char* we = f.w + e * f.expert_bytes;
  const size_t es = olc_dtype_size(st->dtype);
  const int fmt = f.bits == 8 ? kQU8 : f.bits == 4 ? kQP4 : kQP2;
  for (int64_t n0 = 0; n0 < f.N; n0 += kRowChunk) {
    const int64_t rows = std::min(kRowChunk, f.N - n0);
    if (quant && direct) {
      // each row dotted in its quantized form (moe_qdot): no float32 rows
      fc_params(st, f, e, n0, rows, sc->scale.data(), sc->zp.data(), false);
      for (int64_t r = 0; r < rows; ++r)
        k->moe_qdot(fmt, reinterpret_cast<const uint8_t*>(we) + (n0 + r) * f.row_bytes, sc->scale.data() + r * f.blocks,
                    sc->zp.data() + r * f.blocks, f.K, f.bs ? f.bs : f.K, X, n, Y + n0 + r, f.N);
      continue;
    }
    const float* W = reinterpret_cast<const float*>(we) + n0 * f.K;
    if (!own_rows) {
      if (quant) fc_params(st, f, e, n0, rows, sc->scale.data(), sc->zp.data(), false);
      for (int64_t r = 0; r < rows; ++r) {
        float* buf = sc->rows.data() + r * f.K;
        if (quant)
          k->dq_blocks[kF32](fmt, reinterpret_cast<const uint8_t*>(we) + (n0 + r) * f.row_bytes,
                             sc->scale.data() + r * f.blocks, sc->zp.data() + r * f.blocks, f.K, f.bs ? f.bs : f.K,
                             buf);
        else
          k->to_f32[st->dt](we + static_cast<size_t>((n0 + r) * f.K) * es, buf, f.K);
      }
      W = sc->rows.data();
    }
    if (direct) {
      for (int64_t r = 0; r < rows; ++r) k->moe_dot(W + r * f.K, X, n, f.K, Y + n0 + r, f.N);
      continue;
    }
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t cols = std::min(nr, n - p * nr);
      float* T = sc->products.data();
      k->moe_gemm(W, rows, f.K, sc->panel.data() + p * f.K * nr, nv, T, nr, cols);
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r) Y[(p * nr + c) * f.N + n0 + r] = T[r * nr + c];
    }
  }
  if (!f.bias.empty()) {
    const float* b = f.bias.data() + e * f.N;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < f.N; ++c) Y[i * f.N + c] += b[c];
  }
}

void expert_items(void* user, int64_t begin, int64_t end) {
  const ExpertJob& j = *static_cast<const ExpertJob*>(user);
  try {
    Scratch sc;
    for (int64_t it = begin; it < end; ++it) {
      const int64_t e = j.experts[it];
      const int64_t b0 = j.offsets[e], n = j.offsets[e + 1] - b0;
      sc.X.resize(static_cast<size_t>(n * j.H));
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(&sc.X[i * j.H], j.x + (j.entries[b0 + i] / j.k) * j.H, static_cast<size_t>(j.H) * 4);
      const Fc& f1 = *j.fc[0];
      sc.y1.resize(static_cast<size_t>(n * f1.N));
      run_fc(j, f1, e, sc.X.data(), n, sc.y1.data(), &sc);
      const float* y3p = nullptr;
      if (j.fc[2]->present) {
        sc.y3.resize(static_cast<size_t>(n * j.I));
        run_fc(j, *j.fc[2], e, sc.X.data(), n, sc.y3.data(), &sc);
        y3p = sc.y3.data();
      }
      sc.a.resize(static_cast<size_t>(n * j.I));
      j.st->k->moe_act(&j.st->moe_act, sc.y1.data(), f1.N, y3p, j.I, sc.a.data(), n, j.I);
      sc.y2.resize(static_cast<size_t>(n * j.H));
      run_fc(j, *j.fc[1], e, sc.a.data(), n, sc.y2.data(), &sc);
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(j.contrib + j.entries[b0 + i] * j.H, &sc.y2[i * j.H], static_cast<size_t>(j.H) * 4);
    }
  } catch (const std::bad_alloc&) {
    j.oom->store(true);
  }
}

// The shape check of a 3-D weight [E, N, cols] or 2-D [E, N] parameter.
bool dims_are(const olc_tensor& t, std::initializer_list<int64_t> want) {
  if (t.ndim != static_cast<int32_t>(want.size())) return false;
  int32_t d = 0;
  for (int64_t w : want)
    if (t.shape[d++] != w) return false;
  return true;
}

std::string dims_str(std::initializer_list<int64_t> want) {
  std::vector<int64_t> v(want);
  return shape_str(static_cast<int32_t>(v.size()), v.data());
}

}  // namespace

int32_t run_moe(Ctx& c, const olc_tensor* in, int32_t n_inputs) {
  const KernelState* st = c.st;
  const bool quant = st->op == Op::QMoE;
  auto has = [&](int i) { return i < n_inputs && st->present[i]; };
  // input positions of the two schemas
  const int iw[3] = {2, quant ? 5 : 4, quant ? 8 : 6};
  const int ib[3] = {3 + quant, quant ? 7 : 5, quant ? 10 : 7};
  const int is[3] = {3, 6, 9};
  const int iz[3] = {11, 12, 13};
  const olc_tensor& x = in[0];
  const olc_tensor& router = in[1];
  if (x.ndim != 2 && x.ndim != 3)
    return c.err("input must have rank 2 [tokens, hidden] or 3 [batch, sequence, hidden], got shape %s",
                 shape_str(x.ndim, x.shape).c_str());
  const int64_t H = x.shape[x.ndim - 1];
  const int64_t T = H > 0 ? olc_element_count(&x) / H : dims_product(x, 0, x.ndim - 1);
  if (router.ndim != 2 || router.shape[0] != T)
    return c.err("router_probs has shape %s, expected [%lld, num_experts] (one row per token of input %s)",
                 shape_str(router.ndim, router.shape).c_str(), static_cast<long long>(T),
                 shape_str(x.ndim, x.shape).c_str());
  const int64_t E = router.shape[1];
  if (st->moe_k > E)
    return c.err("k = %lld is more than the %lld experts of router_probs", static_cast<long long>(st->moe_k),
                 static_cast<long long>(E));
  const int64_t fusion = st->moe_act.layout == kMoeSeparate ? 1 : 2;
  const olc_tensor& w1 = in[iw[0]];
  if (w1.ndim != 3 || w1.shape[0] != E || w1.shape[1] % fusion != 0)
    return c.err("fc1_experts_weights has shape %s, expected [%lld, %s, ...] (the experts of router_probs)",
                 shape_str(w1.ndim, w1.shape).c_str(), static_cast<long long>(E),
                 fusion == 2 ? "2 * inter_size" : "inter_size");
  const int64_t I = w1.shape[1] / fusion;
  Fc fc[3];
  const int64_t NK[3][2] = {{fusion * I, H}, {H, I}, {I, H}};
  const size_t es = olc_dtype_size(st->dtype);
  for (int f = 0; f < 3; ++f) {
    Fc& p = fc[f];
    p.present = has(iw[f]);
    if (!p.present) continue;
    const olc_tensor& w = in[iw[f]];
    p.N = NK[f][0];
    p.K = NK[f][1];
    const char* wname = input_name(st->op, iw[f]);
    if (quant) {
      p.bits = static_cast<int>(st->fc_bits[f]);
      if ((p.K * p.bits) % 8 != 0)
        return c.err("%s rows of %lld values of %d bits do not fill whole bytes", wname, static_cast<long long>(p.K),
                     p.bits);
      p.row_bytes = p.K * p.bits / 8;
      if (!dims_are(w, {E, p.N, p.row_bytes}))
        return c.err("%s has shape %s, expected %s", wname, shape_str(w.ndim, w.shape).c_str(),
                     dims_str({E, p.N, p.row_bytes}).c_str());
      p.expert_bytes = static_cast<size_t>(p.N * p.row_bytes);
      if (!has(is[f])) return c.err("%s is required with integer weights", input_name(st->op, is[f]));
      const olc_tensor& s = in[is[f]];
      p.bs = st->moe_block_size;
      if (p.bs && p.K % p.bs != 0)
        return c.err("block_size %lld does not divide the %lld inputs of FC%d", static_cast<long long>(p.bs),
                     static_cast<long long>(p.K), f + 1);
      p.blocks = p.bs ? p.K / p.bs : 1;
      const bool s_ok = p.bs ? dims_are(s, {E, p.N, p.blocks}) : dims_are(s, {E, p.N});
      if (!s_ok)
        return c.err("%s has shape %s, expected %s", input_name(st->op, is[f]), shape_str(s.ndim, s.shape).c_str(),
                     (p.bs ? dims_str({E, p.N, p.blocks}) : dims_str({E, p.N})).c_str());
      p.scales = static_cast<const char*>(s.data);
      p.scales_dt = s.dtype == OLC_DTYPE_FLOAT ? kF32 : s.dtype == OLC_DTYPE_FLOAT16 ? kF16 : kBF16;
      if (has(iz[f])) {
        const olc_tensor& z = in[iz[f]];
        const int64_t zb = p.bs ? (p.blocks * p.bits + 7) / 8 : (p.N * p.bits + 7) / 8;
        const bool z_ok = p.bs ? dims_are(z, {E, p.N, zb}) : dims_are(z, {E, zb});
        if (!z_ok)
          return c.err("%s has shape %s, expected %s", input_name(st->op, iz[f]), shape_str(z.ndim, z.shape).c_str(),
                       (p.bs ? dims_str({E, p.N, zb}) : dims_str({E, zb})).c_str());
        p.zp = static_cast<const uint8_t*>(z.data);
        p.zp_row_bytes = p.bs ? zb : 0;
        p.zp_expert_bytes = p.bs ? p.N * zb : zb;
      }
    } else {
      if (!dims_are(w, {E, p.N, p.K}))
        return c.err("%s has shape %s, expected %s", wname, shape_str(w.ndim, w.shape).c_str(),
                     dims_str({E, p.N, p.K}).c_str());
      p.expert_bytes = static_cast<size_t>(p.N * p.K) * es;
    }
    p.w = static_cast<const char*>(w.data);
    if (has(ib[f])) {
      const olc_tensor& b = in[ib[f]];
      if (!dims_are(b, {E, p.N}))
        return c.err("%s has shape %s, expected %s", input_name(st->op, ib[f]), shape_str(b.ndim, b.shape).c_str(),
                     dims_str({E, p.N}).c_str());
    }
  }
  if (!fc[1].present) return c.err("fc2_experts_weights is required");
  const bool has_rw = quant && has(14);
  if (has_rw && !same_shape(in[14], router))
    return c.err("router_weights has shape %s, expected the shape of router_probs %s",
                 shape_str(in[14].ndim, in[14].shape).c_str(), shape_str(router.ndim, router.shape).c_str());
  void* y = g_api->allocate_output(c.ctx, 0, st->dtype, x.ndim, x.shape);
  if (!y && T * H > 0) return OLC_ERROR;
  g_api->record_usage_detail(c.ctx, st->isa);
  if (T * H == 0) return OLC_OK;
  // Widen the activations, the router and the biases (the naive kernel with
  // its own conversions).
  const int64_t k = st->moe_k;
  auto widen = [&](const olc_tensor& t, std::vector<float>* out) {
    const int64_t n = olc_element_count(&t);
    out->resize(static_cast<size_t>(n));
    if (st->naive) naive::widen(st->dt, t.data, n, out->data());
    else if (st->dt == kF32) std::memcpy(out->data(), t.data, static_cast<size_t>(n) * 4);
    else st->k->to_f32[st->dt](t.data, out->data(), n);
  };
  std::vector<float> xf, rf, rw;
  widen(router, &rf);
  if (has_rw) widen(in[14], &rw);
  for (int f = 0; f < 3; ++f)
    if (fc[f].present && has(ib[f])) widen(in[ib[f]], &fc[f].bias);
  if (st->naive) {
    // Every expert's weights widened or dequantized by the reference's own code.
    std::vector<float> W[3];
    for (int f = 0; f < 3; ++f) {
      Fc& p = fc[f];
      if (!p.present) continue;
      W[f].resize(static_cast<size_t>(E * p.N * p.K));
      if (!quant) {
        naive::widen(st->dt, p.w, E * p.N * p.K, W[f].data());
        continue;
      }
      std::vector<float> scale(static_cast<size_t>(p.N * p.blocks));
      std::vector<int32_t> zp(scale.size());
      for (int64_t e = 0; e < E; ++e) {
        fc_params(st, p, e, 0, p.N, scale.data(), zp.data(), true);
        naive::dequant_rows(reinterpret_cast<const uint8_t*>(p.w) + e * p.expert_bytes, p.bits, p.row_bytes,
                            scale.data(), zp.data(), p.blocks, p.N, p.K, p.bs ? p.bs : p.K, &W[f][e * p.N * p.K]);
      }
    }
    auto bias = [&](int f) { return fc[f].bias.empty() ? nullptr : fc[f].bias.data(); };
    naive::moe(st->dt, x.data, T, H, I, E, k, static_cast<int>(st->normalize_routing), rf.data(),
               has_rw ? rw.data() : nullptr, &st->moe_act, W[0].data(), bias(0), W[1].data(), bias(1),
               fc[2].present ? W[2].data() : nullptr, bias(2), y);
    return OLC_OK;
  }
  widen(x, &xf);
  // Routing: the k largest router values (ties: the lower index), their
  // softmax weights over all experts, renormalized over the k if asked.
  std::vector<int64_t> sel(static_cast<size_t>(T * k));
  std::vector<float> wsel(static_cast<size_t>(T * k));
  std::vector<int64_t> count(static_cast<size_t>(E + 1), 0);
  std::vector<float> prob(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* r = &rf[t * E];
    float mx = -INFINITY;
    for (int64_t e = 0; e < E; ++e) mx = std::max(mx, r[e]);
    float total = 0.0f;
    for (int64_t e = 0; e < E; ++e) total += prob[e] = std::exp(r[e] - mx);
    for (int64_t i = 0; i < k; ++i) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e) {
        bool taken = false;
        for (int64_t q = 0; q < i; ++q) taken = taken || sel[t * k + q] == e;
        if (!taken && (best < 0 || r[e] > r[best])) best = e;
      }
      sel[t * k + i] = best;
      wsel[t * k + i] = has_rw ? rw[t * E + best] : prob[best] / total;
      ++count[best + 1];
    }
    if (st->normalize_routing) {
      float s = 0.0f;
      for (int64_t i = 0; i < k; ++i) s += wsel[t * k + i];
      if (s != 0.0f)
        for (int64_t i = 0; i < k; ++i) wsel[t * k + i] /= s;
    }
  }
  // The entries (token * k + rank) of each expert, in token order.
  for (int64_t e = 0; e < E; ++e) count[e + 1] += count[e];
  std::vector<int64_t> entries(static_cast<size_t>(T * k)), fill(count.begin(), count.end() - 1), experts;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < k; ++i) entries[fill[sel[t * k + i]]++] = t * k + i;
  for (int64_t e = 0; e < E; ++e)
    if (count[e + 1] > count[e]) experts.push_back(e);
  std::vector<float> contrib(static_cast<size_t>(T * k * H));
  std::atomic<bool> oom{false};
  ExpertJob j{st, {&fc[0], &fc[1], &fc[2]}, xf.data(), H, I, k, count.data(), entries.data(), experts.data(),
              contrib.data(), &oom};
  const int64_t work = T * k * (fc[0].N * H + H * I + (fc[2].present ? I * H : 0));
  const int64_t n_items = static_cast<int64_t>(experts.size());
  if (go_parallel(st, c.ctx, work) && n_items > 1) g_api->parallel_for(c.ctx, n_items, 1, 0, &expert_items, &j);
  else expert_items(&j, 0, n_items);
  if (oom.load()) return c.err("out of memory (expert buffers)");
  // Each token's k results weighted, in rank order.
  std::vector<float> row(static_cast<size_t>(H));
  char* yp = static_cast<char*>(y);
  for (int64_t t = 0; t < T; ++t) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int64_t i = 0; i < k; ++i) {
      const float w = wsel[t * k + i];
      const float* ci = &contrib[(t * k + i) * H];
      for (int64_t h = 0; h < H; ++h) row[h] += w * ci[h];
    }
    if (st->dt == kF32) std::memcpy(yp + t * H * 4, row.data(), static_cast<size_t>(H) * 4);
    else st->k->from_f32[st->dt](row.data(), yp + t * H * es, H);
  }
  return OLC_OK;
}

}  // namespace olc_cm
