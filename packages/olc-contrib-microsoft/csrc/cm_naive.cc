// The plain reference kernels ("naive" registrations): each formula as one
// loop, written for reading rather than speed, and independent of the
// engine (cm_engine.inc): float64 statistics and activations (std::erfc,
// std::tanh, std::exp), and element conversions of their own built on
// frexp / ldexp. The sums input + skip + bias are float32 additions in that
// order, as the schema's float32 computation defines them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cm_common.h"

namespace olc_cm {
namespace naive {

namespace {

// A 16-bit float format: mantissa bits and minimum normal exponent.
struct Fmt {
  int mant;
  int emin;
  int emax;
};
constexpr Fmt kHalf{10, -14, 15};
constexpr Fmt kBrain{7, -126, 127};

double decode(uint16_t h, Fmt f) {
  const int ebits = 15 - f.mant;
  const int bias = f.emax;
  const bool neg = (h >> 15) != 0;
  const int e = (h >> f.mant) & ((1 << ebits) - 1);
  const int m = h & ((1 << f.mant) - 1);
  double v;
  if (e == (1 << ebits) - 1) v = m ? std::nan("") : INFINITY;
  else if (e == 0) v = std::ldexp(static_cast<double>(m), f.emin - f.mant);
  else v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.mant), e - bias);
  return neg ? -v : v;
}

uint16_t encode(double v, Fmt f) {
  const int ebits = 15 - f.mant;
  const uint16_t inf = static_cast<uint16_t>(((1 << ebits) - 1) << f.mant);
  if (std::isnan(v)) return static_cast<uint16_t>(inf | (1 << (f.mant - 1)));
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | inf;
  if (a < std::ldexp(1.0, f.emin)) {
    // subnormal: a multiple of 2^(emin - mant), rounded to nearest even
    const double q = std::nearbyint(std::ldexp(a, f.mant - f.emin));
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(q));  // q == 2^mant is the smallest normal
  }
  int e;
  std::frexp(a, &e);  // a = fr * 2^e, fr in [0.5, 1)
  e -= 1;             // a = 1.xxx * 2^e
  double m = std::nearbyint(std::ldexp(a, f.mant - e));  // in [2^mant, 2^(mant+1)]
  if (m == std::ldexp(1.0, f.mant + 1)) {
    m /= 2;
    e += 1;
  }
  if (e > f.emax) return sign | inf;
  const int mbits = static_cast<int>(m) - (1 << f.mant);
  return static_cast<uint16_t>(sign | ((e + f.emax) << f.mant) | mbits);
}

// Element i of a tensor of storage type dt, as float32 (float64 values
// come through getd).
float get(int dt, const void* p, int64_t i) {
  if (dt == kF32) return static_cast<const float*>(p)[i];
  if (dt == kF64) return static_cast<float>(static_cast<const double*>(p)[i]);
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return static_cast<float>(decode(h, dt == kF16 ? kHalf : kBrain));
}

// Stores a value rounded once to the storage type. A double is first
// rounded to float32 only for float32 storage.
void put(int dt, void* p, int64_t i, double v) {
  if (dt == kF64) {
    static_cast<double*>(p)[i] = v;
    return;
  }
  if (dt == kF32) {
    static_cast<float*>(p)[i] = static_cast<float>(v);
    return;
  }
  static_cast<uint16_t*>(p)[i] = encode(v, dt == kF16 ? kHalf : kBrain);
}

// Element i exactly as a double (float64 storage keeps its precision).
double getd(int dt, const void* p, int64_t i) {
  if (dt == kF64) return static_cast<const double*>(p)[i];
  return get(dt, p, i);
}

// A quantized element (format fmt) at logical index e.
int32_t qget(int fmt, const uint8_t* q, int64_t e) {
  switch (fmt) {
    case kQU8: return q[e];
    case kQU4: return q[e] & 0x0f;
    case kQI4: {
      const int32_t v = q[e] & 0x0f;
      return v >= 8 ? v - 16 : v;
    }
    case kQP4: return (e % 2 == 0) ? (q[e / 2] & 0x0f) : (q[e / 2] >> 4);
    default: return (q[e / 4] >> (2 * (e % 4))) & 0x03;
  }
}

double activation(int act, double alpha, double v) {
  switch (act) {
    case kActGeluErf: return 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    case kActGeluTanh: {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
    }
    case kActQuick: return v / (1.0 + std::exp(-alpha * v));
    default: return v;
  }
}

}  // namespace

void skip_norm(int dt, int simplified, float eps, const void* x, const void* skip, int64_t skip_rows,
               const void* gamma, const void* beta, const void* bias, int64_t rows, int64_t H, void* y, float* mean,
               float* inv, void* sum) {
  float* s = new float[H > 0 ? H : 1];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t sr = r % skip_rows;
    for (int64_t j = 0; j < H; ++j) {
      float v = get(dt, x, r * H + j) + get(dt, skip, sr * H + j);
      if (bias) v = v + get(dt, bias, j);
      s[j] = v;
    }
    double m = 0.0;
    if (!simplified) {
      for (int64_t j = 0; j < H; ++j) m += s[j];
      m /= static_cast<double>(H);
    }
    double var = 0.0;
    for (int64_t j = 0; j < H; ++j) var += (s[j] - m) * (s[j] - m);
    var /= static_cast<double>(H);
    const double iv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t j = 0; j < H; ++j) {
      double out = (s[j] - m) * iv * get(dt, gamma, j);
      if (beta && !simplified) out += get(dt, beta, j);
      put(dt, y, r * H + j, out);
      if (sum) put(dt, sum, r * H + j, s[j]);
    }
    if (mean) mean[r] = simplified ? 0.0f : static_cast<float>(m);
    if (inv) inv[r] = static_cast<float>(iv);
  }
  delete[] s;
}

void act(int dt, int act_code, float alpha, const void* x, const void* bias, int64_t H, const void* skip, void* y,
         int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = get(dt, x, i);
    if (bias) v = v + get(dt, bias, i % H);
    if (skip) v = v + get(dt, skip, i);
    put(dt, y, i, activation(act_code, alpha, v));
  }
}

void embed(int dt, float eps, const int64_t* word_ids, const int64_t* pos_ids, const int64_t* seg_ids,
           const void* word, const void* pos, const void* seg, const void* gamma, const void* beta, int64_t tokens,
           int64_t H, void* y, void* sum) {
  float* s = new float[H > 0 ? H : 1];
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < H; ++j) {
      float v = get(dt, word, word_ids[t] * H + j) + get(dt, pos, pos_ids[t] * H + j);
      if (seg) v = v + get(dt, seg, seg_ids[t] * H + j);
      s[j] = v;
    }
    double m = 0.0;
    for (int64_t j = 0; j < H; ++j) m += s[j];
    m /= static_cast<double>(H);
    double var = 0.0;
    for (int64_t j = 0; j < H; ++j) var += (s[j] - m) * (s[j] - m);
    var /= static_cast<double>(H);
    const double iv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t j = 0; j < H; ++j) {
      put(dt, y, t * H + j, (s[j] - m) * iv * get(dt, gamma, j) + get(dt, beta, j));
      if (sum) put(dt, sum, t * H + j, s[j]);
    }
  }
  delete[] s;
}

void bias_softmax(int dt, const void* x, const void* bias, int64_t rows, int64_t E, int64_t inner, int64_t outer,
                  void* y) {
  double* v = new double[E > 0 ? E : 1];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t br = inner > 0 ? r / inner : r % outer;
    // x + bias in the type's own arithmetic (float32 for the 16-bit types)
    double m = -INFINITY;
    for (int64_t j = 0; j < E; ++j) {
      if (dt == kF64) v[j] = getd(dt, x, r * E + j) + getd(dt, bias, br * E + j);
      else v[j] = get(dt, x, r * E + j) + get(dt, bias, br * E + j);
      if (v[j] > m) m = v[j];
    }
    double total = 0.0;
    for (int64_t j = 0; j < E; ++j) {
      v[j] = std::exp(v[j] - m);
      total += v[j];
    }
    for (int64_t j = 0; j < E; ++j) put(dt, y, r * E + j, v[j] / total);
  }
  delete[] v;
}

void cdist(int dt, const void* A, const void* B, int64_t M, int64_t N, int64_t K, int euclidean, void* C) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      // float32 inputs are exact in double: the sum is computed in double
      double total = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double d = getd(dt, A, i * K + k) - getd(dt, B, j * K + k);
        total += d * d;
      }
      put(dt, C, i * N + j, euclidean ? std::sqrt(total) : total);
    }
  }
}

void gather_block_quantized(int dt, int fmt, const uint8_t* data, const int64_t* dims, int rank, const int64_t* idx,
                            int64_t n_idx, const void* scales, const uint8_t* zp, int32_t default_zp, int gather_axis,
                            int quantize_axis, int64_t block_size, void* y) {
  // Output index = (outer, n, inner): outer over dims[0..g), n over the
  // indices, inner over dims[g+1..rank). Each output element reads the data
  // element at (outer, idx[n], inner) and the scale of that element's block.
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < gather_axis; ++d) outer *= dims[d];
  for (int d = gather_axis + 1; d < rank; ++d) inner *= dims[d];
  const int64_t G = dims[gather_axis];
  // scale / zero point strides: the scales' shape is the data's with the
  // quantize axis divided into blocks
  int64_t sdims[16];
  for (int d = 0; d < rank; ++d) sdims[d] = d == quantize_axis ? (dims[d] + block_size - 1) / block_size : dims[d];
  int64_t coord[16];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t n = 0; n < n_idx; ++n) {
      int64_t g = idx[n];
      const bool valid = g >= -G && g < G;
      if (g < 0) g += G;
      for (int64_t e = 0; e < inner; ++e) {
        const int64_t out_i = (o * n_idx + n) * inner + e;
        if (!valid) {
          put(dt, y, out_i, 0.0);
          continue;
        }
        // the data coordinates of this element
        int64_t rest = o;
        for (int d = gather_axis - 1; d >= 0; --d) {
          coord[d] = rest % dims[d];
          rest /= dims[d];
        }
        coord[gather_axis] = g;
        rest = e;
        for (int d = rank - 1; d > gather_axis; --d) {
          coord[d] = rest % dims[d];
          rest /= dims[d];
        }
        int64_t di = 0, si = 0;
        for (int d = 0; d < rank; ++d) {
          di = di * dims[d] + coord[d];
          si = si * sdims[d] + (d == quantize_axis ? coord[d] / block_size : coord[d]);
        }
        const int32_t q = qget(fmt, data, di);
        int32_t z = default_zp;
        if (zp) {
          if (fmt == kQP4 || fmt == kQP2) {
            // packed zero points: the blocks of one row share bytes, the
            // row (quantize axis last) padded to whole bytes
            const int per = fmt == kQP4 ? 2 : 4;
            const int64_t nb = sdims[rank - 1];
            const int64_t row = si / nb, blk = si % nb;
            const int64_t row_bytes = (nb + per - 1) / per;
            const uint8_t byte = zp[row * row_bytes + blk / per];
            z = fmt == kQP4 ? ((blk % 2) ? byte >> 4 : byte & 0x0f) : (byte >> (2 * (blk % 4))) & 0x03;
          } else {
            z = qget(fmt, zp, si);
          }
        }
        // float(q - z) * scale, in float32 as onnxruntime computes it
        const float v = static_cast<float>(q - z) * get(dt, scales, si);
        put(dt, y, out_i, v);
      }
    }
  }
}

void widen(int dt, const void* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = get(dt, src, i);
}

void dequant_rows(const uint8_t* q, int bits, int64_t row_bytes, const float* scale, const int32_t* zp, int64_t blocks,
                  int64_t rows, int64_t K, int64_t bs, float* out) {
  const int per_byte = 8 / bits;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t byte = q[r * row_bytes + k / per_byte];
      const int32_t v = (byte >> (bits * (k % per_byte))) & ((1 << bits) - 1);
      const int64_t b = r * blocks + k / bs;
      out[r * K + k] = static_cast<float>(v - zp[b]) * scale[b];
    }
  }
}

namespace {

double moe_activation(const MoeAct* a, double g, double l, bool gated) {
  switch (a->act) {
    case kMoeSwiglu: {
      const double G = std::min(g, static_cast<double>(a->limit));
      const double L = std::max(-static_cast<double>(a->limit), std::min(l, static_cast<double>(a->limit)));
      return G / (1.0 + std::exp(-static_cast<double>(a->alpha) * G)) * (L + a->beta);
    }
    case kMoeRelu: g = g > 0.0 ? g : (std::isnan(g) ? g : 0.0); break;
    case kMoeGelu: g = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))); break;
    case kMoeSilu: g = g / (1.0 + std::exp(-g)); break;
    default: break;
  }
  return gated ? g * l : g;
}

}  // namespace

void moe(int dt, const void* x, int64_t tokens, int64_t H, int64_t I, int64_t E, int64_t k, int normalize,
         const float* router, const float* router_weights, const MoeAct* act, const float* w1, const float* b1,
         const float* w2, const float* b2, const float* w3, const float* b3, void* y) {
  const int64_t fusion = act->layout == kMoeSeparate ? 1 : 2;
  const int64_t N1 = fusion * I;
  double* h1 = new double[N1 > 0 ? N1 : 1];
  double* h3 = new double[I > 0 ? I : 1];
  double* a = new double[I > 0 ? I : 1];
  double* out = new double[H > 0 ? H : 1];
  int64_t* sel = new int64_t[k];
  double* w = new double[k];
  for (int64_t t = 0; t < tokens; ++t) {
    const float* r = router + t * E;
    // softmax over every expert, in double
    double mx = -INFINITY, total = 0.0;
    for (int64_t e = 0; e < E; ++e) mx = std::max(mx, static_cast<double>(r[e]));
    for (int64_t e = 0; e < E; ++e) total += std::exp(r[e] - mx);
    // the k largest router values, ties to the lower index
    for (int64_t i = 0; i < k; ++i) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e) {
        bool taken = false;
        for (int64_t q = 0; q < i; ++q) taken = taken || sel[q] == e;
        if (!taken && (best < 0 || r[e] > r[best])) best = e;
      }
      sel[i] = best;
      w[i] = router_weights ? router_weights[t * E + best] : std::exp(r[best] - mx) / total;
    }
    if (normalize) {
      double s = 0.0;
      for (int64_t i = 0; i < k; ++i) s += w[i];
      if (s != 0.0)
        for (int64_t i = 0; i < k; ++i) w[i] /= s;
    }
    for (int64_t h = 0; h < H; ++h) out[h] = 0.0;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t e = sel[i];
      for (int64_t n = 0; n < N1; ++n) {
        double s = b1 ? b1[e * N1 + n] : 0.0;
        for (int64_t j = 0; j < H; ++j) s += static_cast<double>(w1[(e * N1 + n) * H + j]) * get(dt, x, t * H + j);
        h1[n] = s;
      }
      if (w3) {
        for (int64_t n = 0; n < I; ++n) {
          double s = b3 ? b3[e * I + n] : 0.0;
          for (int64_t j = 0; j < H; ++j) s += static_cast<double>(w3[(e * I + n) * H + j]) * get(dt, x, t * H + j);
          h3[n] = s;
        }
      }
      for (int64_t n = 0; n < I; ++n) {
        double g = h1[n], l = 1.0;
        if (act->layout == kMoeInterleaved) {
          g = h1[2 * n];
          l = h1[2 * n + 1];
        } else if (act->layout == kMoeConcatenated) {
          l = h1[I + n];
        } else if (w3) {
          l = h3[n];
        }
        a[n] = moe_activation(act, g, l, w3 != nullptr);
      }
      for (int64_t h = 0; h < H; ++h) {
        double s = b2 ? b2[e * H + h] : 0.0;
        for (int64_t n = 0; n < I; ++n) s += static_cast<double>(w2[(e * H + h) * I + n]) * a[n];
        out[h] += w[i] * s;
      }
    }
    for (int64_t h = 0; h < H; ++h) put(dt, y, t * H + h, out[h]);
  }
  delete[] h1;
  delete[] h3;
  delete[] a;
  delete[] out;
  delete[] sel;
  delete[] w;
}

}  // namespace naive
}  // namespace olc_cm
