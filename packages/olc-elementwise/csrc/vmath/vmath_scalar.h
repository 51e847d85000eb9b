// Scalar float32 vector-math functions (olc_s_*) and fp16/bf16 conversions.
// Same algorithms as the __m256/__m512 versions (vmath_impl.h), so scalar
// tails and the scalar level agree with the vector lanes. Needs no ISA flags;
// std::fma is a libm call without -mfma (correct, slower), an instruction
// with it.
#ifndef OLC_VMATH_SCALAR_H_
#define OLC_VMATH_SCALAR_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "vmath_impl.h"

namespace {
namespace olc_vm {

struct OpsScalar {
  typedef float V;
  typedef int32_t I;
  typedef bool M;
  enum { N = 1 };
  static constexpr bool kScalef = false;
  static OLC_VM_INLINE V f(float a) { return a; }
  static OLC_VM_INLINE I i(int32_t a) { return a; }
  static OLC_VM_INLINE V add(V a, V b) { return a + b; }
  static OLC_VM_INLINE V sub(V a, V b) { return a - b; }
  static OLC_VM_INLINE V mul(V a, V b) { return a * b; }
  static OLC_VM_INLINE V div(V a, V b) { return a / b; }
  static OLC_VM_INLINE V sqrt(V a) { return std::sqrt(a); }
  static OLC_VM_INLINE V fma(V a, V b, V c) { return std::fma(a, b, c); }
  // x86 minps/maxps semantics: the second operand when unordered or equal.
  static OLC_VM_INLINE V fms(V a, V b, V c) { return std::fma(a, b, -c); }
  static OLC_VM_INLINE V trunc(V a) { return std::trunc(a); }
  static OLC_VM_INLINE V min_(V a, V b) { return a < b ? a : b; }
  static OLC_VM_INLINE V max_(V a, V b) { return a > b ? a : b; }
  static OLC_VM_INLINE I ci(V a) { I r; std::memcpy(&r, &a, 4); return r; }
  static OLC_VM_INLINE V cf(I a) { V r; std::memcpy(&r, &a, 4); return r; }
  // Wrapping integer arithmetic (NaN lanes carry garbage exponents).
  static OLC_VM_INLINE I iadd(I a, I b) { return static_cast<I>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b)); }
  static OLC_VM_INLINE I isub(I a, I b) { return static_cast<I>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b)); }
  static OLC_VM_INLINE I iand(I a, I b) { return a & b; }
  static OLC_VM_INLINE I ior(I a, I b) { return a | b; }
  static OLC_VM_INLINE I ixor(I a, I b) { return a ^ b; }
  static OLC_VM_INLINE I imax(I a, I b) { return a > b ? a : b; }
  template <int S> static OLC_VM_INLINE I sll(I a) { return static_cast<I>(static_cast<uint32_t>(a) << S); }
  template <int S> static OLC_VM_INLINE I sra(I a) { return a >> S; }
  static OLC_VM_INLINE V cvt(I a) { return static_cast<float>(a); }
  // Only called on integer-valued floats in int range (NaN lanes carry garbage).
  static OLC_VM_INLINE I cvtti(V a) { return (a == a && std::fabs(a) < 0x1p31f) ? static_cast<I>(a) : INT32_MIN; }
  static OLC_VM_INLINE V lut16(const float* tab, I idx) { return tab[idx & 15]; }
  static OLC_VM_INLINE I cvti(V a) { return (a == a && std::fabs(a) < 0x1p31f) ? static_cast<I>(a) : INT32_MIN; }
  static OLC_VM_INLINE M lt(V a, V b) { return a < b; }
  static OLC_VM_INLINE M le(V a, V b) { return a <= b; }
  static OLC_VM_INLINE M gt(V a, V b) { return a > b; }
  static OLC_VM_INLINE M ge(V a, V b) { return a >= b; }
  static OLC_VM_INLINE M eq(V a, V b) { return a == b; }
  static OLC_VM_INLINE M unord(V a, V b) { return a != a || b != b; }
  static OLC_VM_INLINE M nge(V a, V b) { return !(a >= b); }
  static OLC_VM_INLINE M itest(I a, I b) { return (a & b) != 0; }
  static OLC_VM_INLINE M mand(M a, M b) { return a && b; }
  static OLC_VM_INLINE M mnot(M a) { return !a; }
  static OLC_VM_INLINE bool any(M a) { return a; }
  static OLC_VM_INLINE unsigned bits(M a) { return a ? 1u : 0u; }
  static OLC_VM_INLINE V sel(M m, V t, V f) { return m ? t : f; }
  static OLC_VM_INLINE V selneg(V x, V t, V f) { return std::signbit(x) ? t : f; }
  static OLC_VM_INLINE I seli(M m, I t, I f) { return m ? t : f; }
  // Materializes a so the compiler cannot contract the multiply that made
  // it into a later add (error-free transforms need the rounded product).
  static OLC_VM_INLINE V opaque(V a) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__("" : "+x"(a));
#else
    volatile V v = a;
    a = v;
#endif
    return a;
  }
  static OLC_VM_INLINE V load(const float* p) { return *p; }
  static OLC_VM_INLINE void store(float* p, V v) { *p = v; }
};

}  // namespace olc_vm
}  // namespace

static inline float olc_s_exp(float x) { return olc_vm::exp<olc_vm::OpsScalar>(x); }
static inline float olc_s_expm1(float x) { return olc_vm::expm1<olc_vm::OpsScalar>(x); }
static inline float olc_s_log(float x) { return olc_vm::log<olc_vm::OpsScalar>(x); }
static inline float olc_s_log1p(float x) { return olc_vm::log1p<olc_vm::OpsScalar>(x); }
static inline float olc_s_tanh(float x) { return olc_vm::tanh<olc_vm::OpsScalar>(x); }
// The AVX2 level's lookup-free tanh (olc_v256_tanh), for its scalar checks.
static inline float olc_s_tanh_rational(float x) { return olc_vm::tanh_rational<olc_vm::OpsScalar>(x); }
static inline float olc_s_erf_rational(float x) { return olc_vm::erf_rational<olc_vm::OpsScalar>(x); }
static inline float olc_s_gelu_erf_rational(float x) { return olc_vm::gelu_erf_rational<olc_vm::OpsScalar>(x); }
static inline float olc_s_sigmoid(float x) { return olc_vm::sigmoid<olc_vm::OpsScalar>(x); }
static inline float olc_s_erf(float x) { return olc_vm::erf<olc_vm::OpsScalar>(x); }
static inline float olc_s_sin(float x) { return olc_vm::sin<olc_vm::OpsScalar>(x); }
static inline float olc_s_cos(float x) { return olc_vm::cos<olc_vm::OpsScalar>(x); }
static inline float olc_s_softplus(float x) { return olc_vm::softplus<olc_vm::OpsScalar>(x); }
static inline float olc_s_gelu_erf(float x) { return olc_vm::gelu_erf<olc_vm::OpsScalar>(x); }
static inline float olc_s_gelu_tanh(float x) { return olc_vm::gelu_tanh<olc_vm::OpsScalar>(x); }
static inline float olc_s_mish(float x) { return olc_vm::mish<olc_vm::OpsScalar>(x); }
static inline float olc_s_tan(float x) { return olc_vm::tan<olc_vm::OpsScalar>(x); }
static inline float olc_s_asin(float x) { return olc_vm::asin<olc_vm::OpsScalar>(x); }
static inline float olc_s_acos(float x) { return olc_vm::acos<olc_vm::OpsScalar>(x); }
static inline float olc_s_atan(float x) { return olc_vm::atan<olc_vm::OpsScalar>(x); }
static inline float olc_s_sinh(float x) { return olc_vm::sinh<olc_vm::OpsScalar>(x); }
static inline float olc_s_cosh(float x) { return olc_vm::cosh<olc_vm::OpsScalar>(x); }
static inline float olc_s_asinh(float x) { return olc_vm::asinh<olc_vm::OpsScalar>(x); }
static inline float olc_s_acosh(float x) { return olc_vm::acosh<olc_vm::OpsScalar>(x); }
static inline float olc_s_atanh(float x) { return olc_vm::atanh<olc_vm::OpsScalar>(x); }

// ---- bf16 / fp16 conversions (portable; no F16C needed) ----

static inline float olc_s_bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays NaN (forced quiet, sign and top payload kept).
static inline uint16_t olc_s_f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

static inline float olc_s_f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  uint32_t u;
  if (e == 0) {
    // zero or subnormal: m * 2^-24 is exact in float
    const float v = static_cast<float>(m) * 0x1p-24f;
    std::memcpy(&u, &v, 4);
    u |= sign;
  } else if (e == 31) {
    u = sign | 0x7f800000u | (m << 13);  // inf, or NaN with its payload
  } else {
    u = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE half, round to nearest even, overflow to inf, subnormals, NaN quiet.
static inline uint16_t olc_s_f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (x >= 0x38800000u) {  // normal half: rebias and round the 13 dropped bits
    x += 0xfffu + ((x >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((x - 0x38000000u) >> 13));
  }
  if (x <= 0x33000000u) return sign;  // <= 2^-25 rounds to zero (the tie goes to even)
  // subnormal half: value / 2^-24 = mant * 2^(e-126), rounded to nearest even
  const uint32_t e = x >> 23;
  const uint32_t mant = (x & 0x7fffffu) | 0x800000u;
  const uint32_t s = 126u - e;  // 14..24
  uint32_t r = mant >> s;
  const uint32_t rem = mant & ((1u << s) - 1u);
  const uint32_t half = 1u << (s - 1u);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

#endif  // OLC_VMATH_SCALAR_H_
