// The plain reference kernels ("naive" registrations): each formula as one
// loop, written for reading rather than speed, and independent of the
// engine (cm_engine.inc): float64 statistics and activations (std::erfc,
// std::tanh, std::exp), and element conversions of their own built on
// frexp / ldexp. The sums input + skip + bias are float32 additions in that
// order, as the schema's float32 computation defines them.
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

// Element i of a tensor of storage type dt, as float32.
float get(int dt, const void* p, int64_t i) {
  if (dt == kF32) return static_cast<const float*>(p)[i];
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return static_cast<float>(decode(h, dt == kF16 ? kHalf : kBrain));
}

// Stores a value rounded once to the storage type. A double is first
// rounded to float32 only for float32 storage.
void put(int dt, void* p, int64_t i, double v) {
  if (dt == kF32) {
    static_cast<float*>(p)[i] = static_cast<float>(v);
    return;
  }
  static_cast<uint16_t*>(p)[i] = encode(v, dt == kF16 ? kHalf : kBrain);
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

}  // namespace naive
}  // namespace olc_cm
