// Scalar level: the row engine on plain float and double (one lane), the
// float32 exp of the family in scalar code, and the portable element
// conversions. Compiled without ISA flags; defines what is supported.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "exp_consts.h"
#include "norm_common.h"

namespace olc_norm {
namespace scalar {

namespace {

// ---- conversions ----

float h2f(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  uint32_t bits;
  if (e == 0x1f) {
    bits = sign | 0x7f800000u | (m << 13);
  } else if (e == 0) {
    const float f = static_cast<float>(m) * (1.0f / 16777216.0f);  // m * 2^-24, exact
    std::memcpy(&bits, &f, sizeof bits);
    bits |= sign;
  } else {
    bits = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even; NaN stays a (quiet) NaN, overflow gives inf.
uint16_t f2h(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (ax < 0x38800000u) {                                                // below 2^-14: subnormal or 0
    float v;
    std::memcpy(&v, &ax, sizeof v);
    const float q = (v * 16777216.0f + 8388608.0f) - 8388608.0f;  // round(v * 2^24), even ties
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(q));
  }
  uint32_t r = ax - 0x38000000u;
  r = (r + 0x0fffu + ((r >> 13) & 1u)) >> 13;
  return static_cast<uint16_t>(sign | r);
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = h2f(x[i]);
}
void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f2h(x[i]);
}
void bf16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(&y[i], &b, sizeof b);
  }
}
void f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, &x[i], sizeof b);
    if ((b & 0x7fffffffu) > 0x7f800000u) y[i] = static_cast<uint16_t>((b >> 16) | 0x40u);
    else y[i] = static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  }
}

// ---- exp ----

float exp_nonpos_f32(float x) {
  using namespace expc;
  if (!(x >= kLo)) return x != x ? x : 0.0f;  // NaN stays NaN; below FLT_MIN (and -inf) -> 0
  const float t = x * kLog2e;
  const float n = (t + kRoundMagic) - kRoundMagic;  // round to nearest
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kC5;
  p = p * r + kC4;
  p = p * r + kC3;
  p = p * r + kC2;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);  // in [-126, 0]
  const uint32_t bits = static_cast<uint32_t>(ni + 127) << 23;
  float s;
  std::memcpy(&s, &bits, sizeof s);
  return p * s;
}

template <class TT>
struct VS {
  using T = TT;
  using R = TT;
  static constexpr int64_t W = 1;
  static constexpr bool kStream = false;
  static constexpr int64_t kAheadBytes = 0;
  static constexpr uintptr_t kAlign = 1;
  static void stream(T* p, R v) { *p = v; }
  static R load(const T* p) { return *p; }
  static R load_part(const T* p, int64_t, T) { return *p; }  // never reached with W == 1
  static void store(T* p, R v) { *p = v; }
  static void store_part(T* p, R v, int64_t) { *p = v; }
  static constexpr bool kWholeTail = false;  // W = 1: no partial vector
  static R last_lanes(R v, int64_t, T) { return v; }
  static R set1(T v) { return v; }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R div(R a, R b) { return a / b; }
  static R sqrt(R a) { return std::sqrt(a); }
  static R keep_if_nonzero(R v, R d) { return d != T(0) ? v : T(0); }
  static R fmadd(R a, R b, R c) { return a * b + c; }
  // NaN in b wins, as the vector max(a, b) of x86.
  static R max(R a, R b) { return a > b ? a : b; }
  static R abs(R a) { return std::fabs(a); }
  static T hsum(R v) { return v; }
  static T hmax(R v) { return v; }
  static R exp_nonpos(R x);
  static R round_f16(R x);   // T = float only
  static R round_bf16(R x);  // T = float only
  static R doubt_f16(R e);    // T = float only
  static R doubt_bf16(R t, R e);
  static bool any_nonzero(R v) { return v != T(0); }  // used on 0 / 1 values only
};

template <>
float VS<float>::exp_nonpos(float x) { return exp_nonpos_f32(x); }
template <>
double VS<double>::exp_nonpos(double x) { return std::exp(x); }
template <>
float VS<float>::round_f16(float x) { return h2f(f2h(x)); }
template <>
float VS<float>::round_bf16(float x) {
  uint16_t h;
  float y;
  f32_to_bf16(&x, &h, 1);
  bf16_to_f32(&h, &y, 1);
  return y;
}

// |(bits(v) & mask) - mid| <= kDoubtUlps
bool near_mid(float v, uint32_t mask, int32_t mid) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  const int32_t d = static_cast<int32_t>(b & mask) - mid;
  return d <= expc::kDoubtUlps && d >= -expc::kDoubtUlps;
}
template <>
float VS<float>::doubt_f16(float e) {
  const float v = e < expc::kF16MinNormal ? e + expc::kF16MinNormal : e;
  return near_mid(v, 0x1fffu, 0x1000) ? 1.0f : 0.0f;
}
template <>
float VS<float>::doubt_bf16(float t, float e) {
  const bool band = t > expc::kBF16ExpLo && t < expc::kLo;
  return band || near_mid(e, 0xffffu, 0x8000) ? 1.0f : 0.0f;
}

#include "row_engine.inc"

}  // namespace

const RowKernels* kernels() {
  static const RowKernels k = [] {
    RowKernels t{};
    t.isa = "scalar";
    t.f32 = eng_ops<VS<float>>();
    t.f64 = eng_ops<VS<double>>();
    t.convert = {&f16_to_f32, &f32_to_f16, &bf16_to_f32, &f32_to_bf16};
    return t;
  }();
  return &k;
}

}  // namespace scalar
}  // namespace olc_norm
