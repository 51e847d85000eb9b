// The plain references of the recurrent-state operators (the "naive"
// registrations, the oracle of the tests): each token applied to the state
// as the operator's definition writes it, plain loops over the raw inputs,
// float64 state and sums, serially. The 16-bit types go through the
// family's plain conversions (attn_naive.cc).
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "attn_naive.h"
#include "linear_common.h"

namespace olc_attn {
namespace naive {

void linear_attention(const LinAttnProblem& p) {
  const int64_t B = p.B, T = p.T, dk = p.dk, dv = p.dv, Hkv = p.Hkv;
  const bool gated = (p.rule & kRuleGated) != 0, delta = (p.rule & kRuleDelta) != 0;
  const int64_t Hout = p.Hq >= Hkv ? p.Hq : Hkv;
  const int64_t state_size = B * Hkv * dk * dv;
  std::vector<double> S(static_cast<size_t>(dk * dv)), u(static_cast<size_t>(dv));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t g = 0; g < Hkv; ++g) {
      const int64_t head = (b * Hkv + g) * dk * dv;  // element offset of this head's state
      for (int64_t e = 0; e < dk * dv; ++e) S[e] = p.past ? load(p.sdt, p.past, head + e) : 0.0;
      const int64_t kh = g / (Hkv / p.Hk);
      // (query head, output slot) pairs reading this state
      std::vector<std::pair<int64_t, int64_t>> readers;
      if (p.Hq >= Hkv) {
        for (int64_t h = g * (p.Hq / Hkv); h < (g + 1) * (p.Hq / Hkv); ++h) readers.push_back({h, h});
      } else {
        readers.push_back({g / (Hkv / p.Hq), g});
      }
      if (p.window > 0)  // window slots before the call's first token
        for (int64_t j = 0; j < p.window - 1 && j < p.window - T; ++j)
          for (int64_t e = 0; e < dk * dv; ++e) store(p.sdt, p.present, j * state_size + head + e, 0.0);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t bt = b * T + t;
        auto key = [&](int64_t i) { return load(p.dt, p.k, (bt * p.Hk + kh) * dk + i); };
        auto val = [&](int64_t j) { return load(p.dt, p.v, (bt * Hkv + g) * dv + j); };
        if (gated) {
          for (int64_t i = 0; i < dk; ++i) {
            const double lg = p.decay_per_key ? load(p.dt, p.decay, (bt * Hkv + g) * dk + i)
                                              : load(p.dt, p.decay, bt * Hkv + g);
            const double a = std::exp(lg);
            for (int64_t j = 0; j < dv; ++j) S[i * dv + j] *= a;
          }
        }
        for (int64_t j = 0; j < dv; ++j) u[j] = val(j);
        if (delta) {
          const double beta = load(p.dt, p.beta, p.beta_per_head ? bt * Hkv + g : bt);
          for (int64_t j = 0; j < dv; ++j) {
            double retrieved = 0;
            for (int64_t i = 0; i < dk; ++i) retrieved += S[i * dv + j] * key(i);
            u[j] = beta * (u[j] - retrieved);
          }
        }
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += key(i) * u[j];
        for (const auto& rd : readers) {
          for (int64_t j = 0; j < dv; ++j) {
            double o = 0;
            for (int64_t i = 0; i < dk; ++i) o += load(p.dt, p.q, (bt * p.Hq + rd.first) * dk + i) * S[i * dv + j];
            store(p.dt, p.y, (bt * Hout + rd.second) * dv + j, static_cast<double>(p.scale) * o);
          }
        }
        if (p.window > 0 && t >= T - p.window && t + 1 < T)
          for (int64_t e = 0; e < dk * dv; ++e)
            store(p.sdt, p.present, (t - (T - p.window)) * state_size + head + e, S[e]);
      }
      const int64_t last = p.window > 0 ? p.window - 1 : 0;
      for (int64_t e = 0; e < dk * dv; ++e) store(p.sdt, p.present, last * state_size + head + e, S[e]);
    }
  }
}

void causal_conv(const ConvProblem& p) {
  const int64_t L = p.L, K = p.K, P = K - 1;
  for (int64_t b = 0; b < p.B; ++b) {
    for (int64_t c = 0; c < p.C; ++c) {
      const int64_t row = b * p.C + c;
      // The row padded on the left with the carried state (or zeros).
      std::vector<double> xp(static_cast<size_t>(P + L));
      for (int64_t j = 0; j < P; ++j) xp[j] = p.past ? load(p.dt, p.past, row * P + j) : 0.0;
      for (int64_t t = 0; t < L; ++t) xp[P + t] = load(p.dt, p.x, row * L + t);
      for (int64_t t = 0; t < L; ++t) {
        double acc = p.bias ? load(p.dt, p.bias, c) : 0.0;
        for (int64_t j = 0; j < K; ++j) acc += load(p.dt, p.w, c * K + j) * xp[t + j];
        if (p.silu) acc = acc / (1.0 + std::exp(-acc));
        store(p.dt, p.y, row * L + t, acc);
      }
      for (int64_t j = 0; j < P; ++j) store(p.dt, p.present, row * P + j, xp[L + j]);
    }
  }
}

}  // namespace naive
}  // namespace olc_attn
