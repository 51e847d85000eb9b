// The plain reference kernels: every operator from its definition, one
// output element at a time, float64 arithmetic, their own float16 /
// bfloat16 conversions (frexp / ldexp, nearest even), serial. Written for
// reading; independent of the engine (attn_engine.inc) and its driver.
#include "attn_naive.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace olc_attn {
namespace naive {

namespace {

// A 16-bit float format: mantissa bits, exponent bias, smallest normal exponent.
struct Fmt {
  int mant;
  int bias;
  int emin;
};
constexpr Fmt kHalf{10, 15, -14};
constexpr Fmt kBrain{7, 127, -126};

double decode16(uint16_t h, Fmt f) {
  const int ebits = 15 - f.mant;
  const bool neg = (h >> 15) != 0;
  const int e = (h >> f.mant) & ((1 << ebits) - 1);
  const int m = h & ((1 << f.mant) - 1);
  double v;
  if (e == (1 << ebits) - 1) v = m ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else if (e == 0) v = std::ldexp(static_cast<double>(m), f.emin - f.mant);
  else v = std::ldexp(static_cast<double>(m + (1 << f.mant)), e - f.bias - f.mant);
  return neg ? -v : v;
}

// v rounded to the format, nearest even (overflow to infinity).
uint16_t encode16(double v, Fmt f) {
  const int ebits = 15 - f.mant;
  const uint16_t inf = static_cast<uint16_t>(((1 << ebits) - 1) << f.mant);
  if (std::isnan(v)) return static_cast<uint16_t>(inf | (1 << (f.mant - 1)));
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | inf;
  if (a < std::ldexp(1.0, f.emin)) {
    const double q = std::nearbyint(std::ldexp(a, f.mant - f.emin));  // a multiple of the subnormal step
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(q));  // q == 2^mant is the smallest normal
  }
  int e;
  std::frexp(a, &e);
  e -= 1;  // a = 1.xxx * 2^e
  double m = std::nearbyint(std::ldexp(a, f.mant - e));  // in [2^mant, 2^(mant + 1)]
  if (m == std::ldexp(1.0, f.mant + 1)) {
    m /= 2;
    e += 1;
  }
  if (e > f.bias) return sign | inf;
  return static_cast<uint16_t>(sign | ((e + f.bias) << f.mant) | (static_cast<int>(m) - (1 << f.mant)));
}

}  // namespace

double load(int dt, const void* p, int64_t i) {
  if (dt == 0) return static_cast<const float*>(p)[i];
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return decode16(h, dt == 1 ? kHalf : kBrain);
}

void store(int dt, void* p, int64_t i, double v) {
  if (dt == 0) {
    static_cast<float*>(p)[i] = static_cast<float>(v);
    return;
  }
  // The result rounds once from float32, as the optimized kernels and
  // numpy's casts do (float32 accumulation, then the storage type).
  const double f = static_cast<float>(v);
  static_cast<uint16_t*>(p)[i] = encode16(f, dt == 1 ? kHalf : kBrain);
}

// ---------------------------------------------------------------- Attention

void onnx_attention(const OnnxAttention& a) {
  const double ninf = -std::numeric_limits<double>::infinity();
  const int64_t T = a.P + a.L;
  const int64_t group = a.Hq / a.Hkv;
  auto q_at = [&](int64_t b, int64_t h, int64_t i, int64_t d) {
    const int64_t idx = a.rank == 4 ? ((b * a.Hq + h) * a.Sq + i) * a.D + d : (b * a.Sq + i) * (a.Hq * a.D) + h * a.D + d;
    return load(a.dt, a.q, idx);
  };
  // Key / value row t of kv head g: the past rows first, then the new ones.
  auto kv_at = [&](bool value, int64_t b, int64_t g, int64_t t, int64_t d) {
    const int64_t width = value ? a.Dv : a.D;
    if (t < a.P) return load(a.dt, value ? a.past_v : a.past_k, ((b * a.Hkv + g) * a.P + t) * width + d);
    const int64_t j = t - a.P;
    const int64_t idx =
        a.rank == 4 ? ((b * a.Hkv + g) * a.L + j) * width + d : (b * a.L + j) * (a.Hkv * width) + g * width + d;
    return load(a.dt, value ? a.v : a.k, idx);
  };
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t g = 0; g < a.Hkv; ++g)
      for (int64_t t = 0; t < T; ++t) {
        if (a.present_k)
          for (int64_t d = 0; d < a.D; ++d) store(a.dt, a.present_k, ((b * a.Hkv + g) * T + t) * a.D + d, kv_at(false, b, g, t, d));
        if (a.present_v)
          for (int64_t d = 0; d < a.Dv; ++d)
            store(a.dt, a.present_v, ((b * a.Hkv + g) * T + t) * a.Dv + d, kv_at(true, b, g, t, d));
      }

  // sqrt(scale) in the input type, applied to Q and to K.
  const double scale = a.has_scale ? a.scale : 1.0 / std::sqrt(static_cast<double>(a.D));
  uint32_t buf = 0;
  store(a.dt, &buf, 0, std::sqrt(scale));
  const double sq = load(a.dt, &buf, 0);

  std::vector<double> raw(static_cast<size_t>(T)), biased(static_cast<size_t>(T)), prob(static_cast<size_t>(T));
  for (int64_t b = 0; b < a.B; ++b) {
    const int64_t offset = a.P > 0 ? a.P : (a.nonpad ? a.nonpad[b] - a.Sq : 0);
    for (int64_t h = 0; h < a.Hq; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < a.Sq; ++i) {
        bool any = false;
        for (int64_t t = 0; t < T; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < a.D; ++d) dot += (q_at(b, h, i, d) * sq) * (kv_at(false, b, g, t, d) * sq);
          raw[t] = dot;
          double s = a.softcap > 0 ? a.softcap * std::tanh(dot / a.softcap) : dot;
          const double capped = s;
          bool allowed = true;
          if (a.mask) {
            // (b, h, i, t) against the mask's right-aligned dims.
            const int64_t coord[4] = {b, h, i, t};
            const int64_t cols = a.mask_shape[a.mask_rank - 1];
            if (t >= cols) {
              allowed = false;
            } else {
              int64_t idx = 0;
              for (int k = 0; k < a.mask_rank; ++k) {
                const int64_t dim = a.mask_shape[k];
                const int64_t c = coord[4 - a.mask_rank + k];
                idx = idx * dim + (dim == 1 ? 0 : c);
              }
              if (a.mask_dt < 0) {
                allowed = static_cast<const uint8_t*>(a.mask)[idx] != 0;
              } else {
                const double mv = load(a.mask_dt, a.mask, idx);
                if (mv == ninf) allowed = false;
                s += mv;
              }
            }
          }
          const int64_t pos = offset + i;
          if (a.causal && t > pos) allowed = false;
          if (a.left >= 0 && pos - t > a.left) allowed = false;
          if (a.right >= 0 && t - pos > a.right) allowed = false;
          if (a.nonpad && t >= a.nonpad[b]) allowed = false;
          biased[t] = allowed ? s : ninf;
          any = any || allowed;
          if (a.qk && a.qk_mode < 3) {
            const double out = a.qk_mode == 0 ? raw[t] : a.qk_mode == 1 ? capped : biased[t];
            store(a.dt, a.qk, ((b * a.Hq + h) * a.Sq + i) * T + t, out);
          }
        }
        double mx = ninf;
        for (int64_t t = 0; t < T; ++t)
          if (biased[t] > mx || std::isnan(biased[t])) mx = biased[t];
        double sum = 0;
        for (int64_t t = 0; t < T; ++t) {
          prob[t] = any ? std::exp(biased[t] - mx) : 0.0;
          sum += prob[t];
        }
        for (int64_t t = 0; t < T; ++t) prob[t] = any ? prob[t] / sum : 0.0;
        if (a.qk && a.qk_mode == 3)
          for (int64_t t = 0; t < T; ++t) store(a.dt, a.qk, ((b * a.Hq + h) * a.Sq + i) * T + t, prob[t]);
        for (int64_t c = 0; c < a.Dv; ++c) {
          double acc = 0;
          if (any)
            for (int64_t t = 0; t < T; ++t) acc += prob[t] * kv_at(true, b, g, t, c);
          const int64_t idx = a.rank == 4 ? ((b * a.Hq + h) * a.Sq + i) * a.Dv + c
                                          : (b * a.Sq + i) * (a.Hq * a.Dv) + h * a.Dv + c;
          store(a.dt, a.y, idx, acc);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- RotaryEmbedding

void rotary(const Rotary& a) {
  const int64_t half = a.rot / 2;
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t s = 0; s < a.S; ++s) {
      int64_t row;
      if (a.position_ids) row = a.position_ids[(a.pos_batch == 1 ? 0 : b) * a.S + s];
      else if (a.start_pos) row = *a.start_pos + s;
      else row = (a.cache_b == 1 ? 0 : b) * a.cache_s + (a.cache_s == 1 ? 0 : s);
      for (int64_t h = 0; h < a.H; ++h) {
        const int64_t base = a.rank == 4 ? ((b * a.H + h) * a.S + s) * a.hd : (b * a.S + s) * (a.H * a.hd) + h * a.hd;
        for (int64_t d = a.rot; d < a.hd; ++d) store(a.dt, a.y, base + d, load(a.dt, a.x, base + d));
        for (int64_t k = 0; k < half; ++k) {
          const double c = load(a.dt, a.cos, row * a.cache_cols + k);
          const double sn = load(a.dt, a.sin, row * a.cache_cols + k);
          const int64_t i1 = a.interleaved ? 2 * k : k;
          const int64_t i2 = a.interleaved ? 2 * k + 1 : k + half;
          const double x1 = load(a.dt, a.x, base + i1), x2 = load(a.dt, a.x, base + i2);
          store(a.dt, a.y, base + i1, x1 * c - x2 * sn);
          store(a.dt, a.y, base + i2, x1 * sn + x2 * c);
        }
      }
    }
}

// ---------------------------------------------------------------- GroupQueryAttention

void gqa(const Gqa& a) {
  const double ninf = -std::numeric_limits<double>::infinity();
  const bool packed = a.k == nullptr;
  const int64_t qw = packed ? (a.Hq + 2 * a.Hkv) * a.D : a.Hq * a.D;  // row width of the query input
  const int64_t kw = a.Hkv * a.D;
  const bool first = a.S == a.total;
  const int64_t half = a.rot / 2;
  // Element d of head h at token s of batch b, from the query input's
  // column `col0` onwards (packed: Q, then K, then V), or from x.
  auto at = [&](const void* x, int64_t width, int64_t col0, int64_t b, int64_t s, int64_t h, int64_t d) {
    return load(a.dt, x, (b * a.S + s) * width + col0 + h * a.D + d);
  };
  auto q_el = [&](int64_t b, int64_t s, int64_t h, int64_t d) { return at(a.q, qw, 0, b, s, h, d); };
  auto k_el = [&](int64_t b, int64_t s, int64_t g, int64_t d) {
    return packed ? at(a.q, qw, a.Hq * a.D, b, s, g, d) : at(a.k, kw, 0, b, s, g, d);
  };
  auto v_el = [&](int64_t b, int64_t s, int64_t g, int64_t d) {
    return packed ? at(a.q, qw, (a.Hq + a.Hkv) * a.D, b, s, g, d) : at(a.v, kw, 0, b, s, g, d);
  };
  // A head row, rotated at `pos` when do_rotary.
  auto rotated = [&](std::vector<double>& x, int64_t pos) {
    if (a.rot == 0) return;
    std::vector<double> out = x;
    for (int64_t k = 0; k < half; ++k) {
      const double c = load(a.dt, a.cos, pos * half + k), sn = load(a.dt, a.sin, pos * half + k);
      const int64_t i1 = a.interleaved ? 2 * k : k, i2 = a.interleaved ? 2 * k + 1 : k + half;
      out[i1] = x[i1] * c - x[i2] * sn;
      out[i2] = x[i1] * sn + x[i2] * c;
    }
    x = out;
  };
  const double scale = a.scale != 0 ? a.scale : 1.0 / std::sqrt(static_cast<double>(a.D));
  const int64_t G = a.Hq / a.Hkv;
  std::vector<double> row(static_cast<size_t>(a.D));
  for (int64_t b = 0; b < a.B; ++b) {
    const int64_t tl = a.seqlens[b] + 1;
    const int64_t past = first ? 0 : tl - a.S;
    auto position = [&](int64_t s) {
      if (a.position_ids) return first ? a.position_ids[0] + s : a.position_ids[b * a.S + s];
      return past + s;
    };
    // The present caches: past rows, the new (rotated) rows, then the rest
    // of the past buffer, zero beyond it.
    std::vector<double> pk(static_cast<size_t>(a.Hkv * a.Tp * a.D)), pv(pk.size());
    for (int64_t g = 0; g < a.Hkv; ++g)
      for (int64_t t = 0; t < a.Tp; ++t) {
        const int64_t s = t - past;
        for (int64_t d = 0; d < a.D; ++d) {
          double kv = 0, vv = 0;
          if (t < past || (s >= a.S && t < a.P)) {
            kv = load(a.dt, a.past_k, ((b * a.Hkv + g) * a.P + t) * a.D + d);
            vv = load(a.dt, a.past_v, ((b * a.Hkv + g) * a.P + t) * a.D + d);
          } else if (s < a.S) {
            kv = k_el(b, s, g, d);
            vv = v_el(b, s, g, d);
          }
          pk[static_cast<size_t>((g * a.Tp + t) * a.D + d)] = kv;
          pv[static_cast<size_t>((g * a.Tp + t) * a.D + d)] = vv;
        }
        if (s >= 0 && s < a.S && a.rot) {
          for (int64_t d = 0; d < a.D; ++d) row[static_cast<size_t>(d)] = pk[static_cast<size_t>((g * a.Tp + t) * a.D + d)];
          rotated(row, position(s));
          for (int64_t d = 0; d < a.D; ++d) pk[static_cast<size_t>((g * a.Tp + t) * a.D + d)] = row[static_cast<size_t>(d)];
        }
      }
    for (int64_t g = 0; g < a.Hkv; ++g)
      for (int64_t t = 0; t < a.Tp; ++t)
        for (int64_t d = 0; d < a.D; ++d) {
          const int64_t o = ((b * a.Hkv + g) * a.Tp + t) * a.D + d;
          if (a.present_k) store(a.dt, a.present_k, o, pk[static_cast<size_t>((g * a.Tp + t) * a.D + d)]);
          if (a.present_v) store(a.dt, a.present_v, o, pv[static_cast<size_t>((g * a.Tp + t) * a.D + d)]);
        }
    // The keys as the cache holds them (rounded to the type).
    auto key = [&](int64_t g, int64_t t, int64_t d) {
      uint32_t buf = 0;
      store(a.dt, &buf, 0, pk[static_cast<size_t>((g * a.Tp + t) * a.D + d)]);
      return load(a.dt, &buf, 0);
    };
    for (int64_t h = 0; h < a.Hq; ++h) {
      const int64_t g = h / G;
      for (int64_t s = 0; s < a.S; ++s) {
        for (int64_t d = 0; d < a.D; ++d) row[static_cast<size_t>(d)] = q_el(b, s, h, d);
        rotated(row, position(s));
        const int64_t p = past + s;
        std::vector<double> score(static_cast<size_t>(tl), ninf);
        double mx = ninf;
        for (int64_t t = 0; t < tl; ++t) {
          if (a.causal && t > p) continue;
          if (a.local > 0 && t <= p - a.local) continue;
          double dot = 0;
          for (int64_t d = 0; d < a.D; ++d) dot += row[static_cast<size_t>(d)] * key(g, t, d);
          double sc = dot * scale;
          if (a.softcap > 0) sc = a.softcap * std::tanh(sc / a.softcap);
          if (a.bias)
            sc += load(a.dt, a.bias,
                       (((a.bias_b == 1 ? 0 : b) * a.bias_h + (a.bias_h == 1 ? 0 : h)) * a.S + s) * a.bias_t + t);
          score[static_cast<size_t>(t)] = sc;
          if (sc > mx) mx = sc;
        }
        const bool with_sink = a.sink || a.smooth;
        const double sink = a.sink ? load(a.dt, a.sink, h) : 0.0;
        if (with_sink && sink > mx) mx = sink;
        double den = with_sink ? std::exp(sink - mx) : 0.0;
        for (int64_t t = 0; t < tl; ++t)
          if (score[static_cast<size_t>(t)] != ninf) den += std::exp(score[static_cast<size_t>(t)] - mx);
        for (int64_t c = 0; c < a.D; ++c) {
          double acc = 0;
          for (int64_t t = 0; t < tl; ++t)
            if (score[static_cast<size_t>(t)] != ninf)
              acc += std::exp(score[static_cast<size_t>(t)] - mx) / den * pv[static_cast<size_t>((g * a.Tp + t) * a.D + c)];
          store(a.dt, a.y, (b * a.S + s) * a.Hq * a.D + h * a.D + c, mx == ninf ? 0.0 : acc);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- MultiHeadAttention, Attention

namespace {

// 0 for a key the mask keeps, its filter value for one it masks.
double key_mask_add(const KeyMask& m, int64_t B, int64_t S, int64_t T, int64_t b, int64_t i, int64_t t) {
  if (!m.data) return 0;
  bool keep;
  if (m.rank == 1 && m.shape[0] == B) keep = t < m.data[b];
  else if (m.rank == 1) keep = t >= m.data[B + b] && t < m.data[b];
  else if (m.rank == 2) keep = m.data[b * T + t] > 0;
  else keep = m.data[(b * S + i) * T + t] > 0;
  return keep ? 0.0 : m.filter;
}

// Multi-head attention over element accessors (double): q(b, h, s, d),
// k(b, h, t, d), v(b, h, t, d) for t in [0, T); y(b, h, s, d) stored.
template <class Q, class K, class V, class Y>
void multihead(int64_t B, int64_t N, int64_t S, int64_t T, int64_t H, int64_t Hv, int64_t P, double scale, int causal,
               const KeyMask& mask, int dt, const void* ab, int64_t ab_b, int64_t ab_h, Q q, K k, V v, Y y) {
  std::vector<double> score(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < N; ++h)
      for (int64_t i = 0; i < S; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < T; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < H; ++d) dot += q(b, h, i, d) * k(b, h, t, d);
          double sc = dot * scale + key_mask_add(mask, B, S, T, b, i, t);
          if (ab) sc += load(dt, ab, (((ab_b == 1 ? 0 : b) * ab_h + (ab_h == 1 ? 0 : h)) * S + i) * T + t);
          if (causal && t > i + P) sc = -std::numeric_limits<double>::infinity();
          score[static_cast<size_t>(t)] = sc;
          mx = std::max(mx, sc);
        }
        double den = 0;
        for (int64_t t = 0; t < T; ++t) den += std::exp(score[static_cast<size_t>(t)] - mx);
        for (int64_t c = 0; c < Hv; ++c) {
          double acc = 0;
          for (int64_t t = 0; t < T; ++t) acc += std::exp(score[static_cast<size_t>(t)] - mx) / den * v(b, h, t, c);
          y(b, h, i, c, acc);
        }
      }
}

}  // namespace

void mha(const Mha& a) {
  const int64_t T = a.P + a.L, N = a.N, H = a.H, Hv = a.Hv;
  // The new keys / values / queries with their biases, rounded to the type
  // (the projection's output type).
  auto rounded = [&](double x) {
    uint32_t buf = 0;
    store(a.dt, &buf, 0, x);
    return load(a.dt, &buf, 0);
  };
  auto bias = [&](int part, int64_t h, int64_t d) {
    if (!a.bias || (part > 0 && a.layout == 3)) return 0.0;
    const int64_t off = part == 0 ? 0 : part == 1 ? N * H : 2 * N * H;
    return load(a.dt, a.bias, off + h * (part == 2 ? Hv : H) + d);
  };
  auto q = [&](int64_t b, int64_t h, int64_t s, int64_t d) {
    const int64_t idx = a.layout == 1 ? (((b * a.S + s) * N + h) * 3 + 0) * H + d : (b * a.S + s) * N * H + h * H + d;
    const double x = load(a.dt, a.q, idx);
    return a.bias ? rounded(x + bias(0, h, d)) : x;
  };
  auto kv = [&](int part, int64_t b, int64_t h, int64_t t, int64_t d) {
    const int64_t w = part == 1 ? H : Hv;
    if (t < a.P) return load(a.dt, part == 1 ? a.past_k : a.past_v, ((b * N + h) * a.P + t) * w + d);
    const int64_t j = t - a.P;
    int64_t idx;
    const void* src = part == 1 ? a.k : a.v;
    switch (a.layout) {
      case 1: idx = (((b * a.S + j) * N + h) * 3 + part) * H + d; src = a.q; break;
      case 2: idx = (((b * a.L + j) * N + h) * 2 + part - 1) * H + d; src = a.k; break;
      case 3: idx = ((b * N + h) * a.L + j) * w + d; break;
      default: idx = (b * a.L + j) * N * w + h * w + d; break;
    }
    const double x = load(a.dt, src, idx);
    return a.bias && a.layout != 3 ? rounded(x + bias(part, h, d)) : x;
  };
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < N; ++h)
      for (int64_t t = 0; t < T; ++t) {
        if (a.present_k)
          for (int64_t d = 0; d < H; ++d) store(a.dt, a.present_k, ((b * N + h) * T + t) * H + d, kv(1, b, h, t, d));
        if (a.present_v)
          for (int64_t d = 0; d < Hv; ++d) store(a.dt, a.present_v, ((b * N + h) * T + t) * Hv + d, kv(2, b, h, t, d));
      }
  const double scale = a.scale != 0 ? a.scale : 1.0 / std::sqrt(static_cast<double>(H));
  multihead(
      a.B, N, a.S, T, H, Hv, a.P, scale, a.causal, a.mask, a.dt, a.attn_bias, a.ab_b, a.ab_h, q,
      [&](int64_t b, int64_t h, int64_t t, int64_t d) { return kv(1, b, h, t, d); },
      [&](int64_t b, int64_t h, int64_t t, int64_t d) { return kv(2, b, h, t, d); },
      [&](int64_t b, int64_t h, int64_t i, int64_t c, double val) {
        store(a.dt, a.y, (b * a.S + i) * N * Hv + h * Hv + c, val);
      });
}

void ms_attention(const MsAttention& a) {
  const int64_t W = a.dq + a.dk + a.dv, M = a.B * a.S;
  // The projection x . W + bias in float64 (without weights: x is the
  // product, x + bias), each result rounded to the type.
  std::vector<double> qkv(static_cast<size_t>(M * W));
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < W; ++c) {
      double acc = a.bias ? load(a.dt, a.bias, c) : 0.0;
      if (!a.w) acc += load(a.dt, a.x, r * W + c);
      else
        for (int64_t i = 0; i < a.Din; ++i) acc += load(a.dt, a.x, r * a.Din + i) * load(a.dt, a.w, i * W + c);
      uint32_t buf = 0;
      store(a.dt, &buf, 0, acc);
      qkv[static_cast<size_t>(r * W + c)] = load(a.dt, &buf, 0);
    }
  const int64_t N = a.N, H = a.dq / N, Hv = a.dv / N, T = a.P + a.S;
  auto proj = [&](int64_t col0, int64_t w, int64_t b, int64_t h, int64_t s, int64_t d) {
    return qkv[static_cast<size_t>((b * a.S + s) * W + col0 + h * w + d)];
  };
  auto kv = [&](int part, int64_t b, int64_t h, int64_t t, int64_t d) {
    if (t < a.P) return load(a.dt, a.past, (((part - 1) * a.B + b) * N + h) * a.P * H + t * H + d);
    return part == 1 ? proj(a.dq, a.dk / N, b, h, t - a.P, d) : proj(a.dq + a.dk, Hv, b, h, t - a.P, d);
  };
  if (a.present)
    for (int part = 1; part <= 2; ++part)
      for (int64_t b = 0; b < a.B; ++b)
        for (int64_t h = 0; h < N; ++h)
          for (int64_t t = 0; t < T; ++t)
            for (int64_t d = 0; d < H; ++d)
              store(a.dt, a.present, ((((part - 1) * a.B + b) * N + h) * T + t) * H + d, kv(part, b, h, t, d));
  const double scale = a.scale != 0 ? a.scale : 1.0 / std::sqrt(static_cast<double>(H));
  multihead(
      a.B, N, a.S, T, H, Hv, a.P, scale, a.causal, a.mask, a.dt, a.attn_bias, a.ab_b, a.ab_h,
      [&](int64_t b, int64_t h, int64_t s, int64_t d) { return proj(0, H, b, h, s, d); },
      [&](int64_t b, int64_t h, int64_t t, int64_t d) { return kv(1, b, h, t, d); },
      [&](int64_t b, int64_t h, int64_t t, int64_t d) { return kv(2, b, h, t, d); },
      [&](int64_t b, int64_t h, int64_t i, int64_t c, double val) {
        store(a.dt, a.y, (b * a.S + i) * N * Hv + h * Hv + c, val);
      });
}

// ---------------------------------------------------------------- TensorScatter

void tensor_scatter(const Scatter& a) {
  int64_t total = 1;
  for (int d = 0; d < a.rank; ++d) total *= a.shape[d];
  if (a.out != a.past) std::memcpy(a.out, a.past, static_cast<size_t>(total * a.elem));
  // Walk every element of the update by its multi-index.
  std::vector<int64_t> ushape(a.shape, a.shape + a.rank);
  ushape[static_cast<size_t>(a.axis)] = a.seq;
  int64_t n = 1;
  for (int64_t d : ushape) n *= d;
  std::vector<int64_t> idx(static_cast<size_t>(a.rank));
  for (int64_t u = 0; u < n; ++u) {
    int64_t rem = u;
    for (int d = a.rank - 1; d >= 0; --d) {
      idx[static_cast<size_t>(d)] = rem % ushape[static_cast<size_t>(d)];
      rem /= ushape[static_cast<size_t>(d)];
    }
    const int64_t M = a.shape[a.axis];
    int64_t t = a.write_indices[idx[0]] + idx[static_cast<size_t>(a.axis)];
    if (a.circular) t = ((t % M) + M) % M;
    int64_t dst = 0;
    for (int d = 0; d < a.rank; ++d) dst = dst * a.shape[d] + (d == a.axis ? t : idx[static_cast<size_t>(d)]);
    std::memcpy(static_cast<char*>(a.out) + dst * a.elem, static_cast<const char*>(a.update) + u * a.elem,
                static_cast<size_t>(a.elem));
  }
}

}  // namespace naive
}  // namespace olc_attn
