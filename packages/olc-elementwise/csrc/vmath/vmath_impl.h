// Float32 vector math: one algorithm per function, written once against a
// small "ops" interface (set1, fma, compare, select, integer bit tricks) and
// instantiated for __m512 (vmath_avx512.h), __m256 (vmath_avx2.h) and float
// (vmath_scalar.h). Writing each algorithm once is what keeps the scalar
// level and scalar tails bit-identical to the vector lanes.
//
// Everything here is in an anonymous namespace: the same header is compiled
// under different -m flags in different translation units, and any inline
// function with external linkage could be merged across them by the linker
// (an AVX-512 body reaching a machine without AVX-512).
//
// Coefficients: tools/fit_coeffs.py (near-minimax, float32-rounded).
// Accuracy and the measured bounds: docs/accuracy.md.
//
// Do not compile with -ffast-math: the algorithms rely on IEEE NaN and
// signed-zero behaviour and on the exact order of the explicit FMAs.
#ifndef OLC_VMATH_IMPL_H_
#define OLC_VMATH_IMPL_H_

#include <cmath>
#include <cstdint>

#define OLC_VM_INLINE inline __attribute__((always_inline))

namespace {
namespace olc_vm {

// Constants (hex floats so the exact value is visible).
constexpr float kLog2e = 0x1.715476p+0f;
constexpr float kLn2Hi = 0x1.62e430p-1f;
constexpr float kLn2Lo = -0x1.05c610p-29f;
// Adding then subtracting 1.5*2^23 rounds to the nearest integer (ties to
// even) for |v| < 2^22 and leaves that integer in the low mantissa bits.
constexpr float kRound = 0x1.8p23f;
constexpr int32_t kRoundBits = 0x4b400000;
constexpr float kMinNormal = 0x1p-126f;
// sqrt(0.5) as bits: log splits x = 2^e * m with m in [sqrt(0.5), sqrt(2)).
constexpr int32_t kSqrtHalfBits = 0x3f3504f3;
constexpr int32_t kSignBit = static_cast<int32_t>(0x80000000u);
constexpr int32_t kAbsMask = 0x7fffffff;

// exp(r) = 1 + r + r^2 * P(r), |r| <= ln2/2
constexpr float kExp0 = 0x1.fffffcp-2f, kExp1 = 0x1.55548cp-3f, kExp2 = 0x1.5558bap-5f,
                kExp3 = 0x1.123e5cp-7f, kExp4 = 0x1.6a4b98p-10f;
// expm1(r) = r + r^2/2 + r^3 * P(r), |r| <= ln2/2
constexpr float kEm0 = 0x1.555554p-3f, kEm1 = 0x1.5554f4p-5f, kEm2 = 0x1.1112cep-7f,
                kEm3 = 0x1.6d4050p-10f, kEm4 = 0x1.9e8f4ep-13f;
// log(1+f) = f - f^2/2 + f^3 * P(f), f in [sqrt(0.5)-1, sqrt(2)-1]
constexpr float kLog0 = 0x1.555554p-2f, kLog1 = -0x1.000228p-2f, kLog2 = 0x1.99a026p-3f,
                kLog3 = -0x1.54720ap-3f, kLog4 = 0x1.22d7bep-3f, kLog5 = -0x1.0d858ap-3f,
                kLog6 = 0x1.056b30p-3f, kLog7 = -0x1.38d8f4p-4f;
// Beyond this tanh rounds to +-1 and exp(-2|x|) stays normal.
constexpr float kTanhClamp = 9.1f;
// erf(x) = x * P(x^2), |x| < 0.921875
constexpr float kErfSmall = 0.921875f;
constexpr float kErf0 = 0x1.20dd76p+0f, kErf1 = -0x1.812882p-2f, kErf2 = 0x1.ce7056p-4f,
                kErf3 = -0x1.bd23b0p-6f, kErf4 = 0x1.821d3ep-8f, kErf5 = -0x1.902e00p-10f,
                kErf6 = 0x1.796926p-12f;
// log(erfc(x)) = -x^2 + P(x), x in [0.921875, 4]; erf rounds to 1 past 4.
constexpr float kErfcClamp = 4.0f;
constexpr float kErfc0 = 0x1.5f1292p-12f, kErfc1 = -0x1.215c52p+0f, kErfc2 = 0x1.7933aep-2f,
                kErfc3 = -0x1.c3dadap-4f, kErfc4 = 0x1.b3dae0p-6f, kErfc5 = -0x1.3dbae0p-8f,
                kErfc6 = 0x1.47650ap-11f, kErfc7 = -0x1.af2c7ep-15f, kErfc8 = 0x1.29d1f4p-19f,
                kErfc9 = -0x1.d516a0p-26f;
// log(erfc(x)) = -x^2 + P(x - kErfcgMid), x in [0.921875, 5], for GELU
// (Phi(x) for x >= -7.07; below, Phi < 8e-13 and GELU is flushed to -0).
constexpr float kErfcgClamp = 5.0f, kErfcgMid = 2.9609375f;
constexpr float kErfcg0 = -0x1.b55bd0p+0f, kErfcg1 = -0x1.3a7cbcp-2f, kErfcg2 = 0x1.643e94p-5f,
                kErfcg3 = -0x1.f3e03cp-8f, kErfcg4 = 0x1.6f9e5cp-10f, kErfcg5 = -0x1.0bffc6p-12f,
                kErfcg6 = 0x1.797e52p-15f, kErfcg7 = -0x1.0126e0p-17f, kErfcg8 = 0x1.3823e0p-20f,
                kErfcg9 = -0x1.bb27b2p-24f;
// sin(r) = r + r^3 * S(r^2), cos(r) = 1 - r^2/2 + r^4 * C(r^2), |r| <= pi/4
constexpr float kSin0 = -0x1.555556p-3f, kSin1 = 0x1.111174p-7f, kSin2 = -0x1.a05968p-13f,
                kSin3 = 0x1.7c367ap-19f;
constexpr float kCos0 = 0x1.555556p-5f, kCos1 = -0x1.6c175ep-10f, kCos2 = 0x1.a071b6p-16f,
                kCos3 = -0x1.36147cp-22f;
// pi/2 in three float parts for Cody-Waite reduction with FMA.
constexpr float kTwoOverPi = 0x1.45f306p-1f;
constexpr float kPio2_1 = 0x1.921fb6p+0f, kPio2_2 = -0x1.777a5cp-25f, kPio2_3 = -0x1.ee59dap-50f;
// |x| above this takes the exact (double libm) lane path; measured accurate
// up to here, see docs/accuracy.md.
constexpr float kTrigFastMax = 131072.0f;
constexpr float kRsqrt2 = 0x1.6a09e6p-1f;
constexpr float kGeluC = 0x1.988454p-1f;   // sqrt(2/pi)
constexpr float kGeluK = 0x1.2444f2p-5f;   // sqrt(2/pi) * 0.044715

template <class O>
OLC_VM_INLINE typename O::V vabs(typename O::V x) {
  return O::cf(O::iand(O::ci(x), O::i(kAbsMask)));
}
template <class O>
OLC_VM_INLINE typename O::V vsign(typename O::V x) {
  return O::cf(O::iand(O::ci(x), O::i(kSignBit)));
}
template <class O>
OLC_VM_INLINE typename O::V vor(typename O::V a, typename O::V b) {
  return O::cf(O::ior(O::ci(a), O::ci(b)));
}
template <class O>
OLC_VM_INLINE typename O::V vxor(typename O::V a, typename O::V b) {
  return O::cf(O::ixor(O::ci(a), O::ci(b)));
}
// max(lo, min(hi, x)) that lets NaN through (x86 min/max return the second
// operand when either is NaN; the scalar ops copy that rule).
template <class O>
OLC_VM_INLINE typename O::V vclamp(typename O::V x, float lo, float hi) {
  return O::max_(O::f(lo), O::min_(O::f(hi), x));
}
// 2^n for integer n in [-126, 127]
template <class O>
OLC_VM_INLINE typename O::V pow2i(typename O::I n) {
  return O::cf(O::template sll<23>(O::iadd(n, O::i(127))));
}

// p * 2^n for integer-valued n in [-151, 129], rounded once: subnormal
// results and overflow to inf come out as a single correctly rounded
// multiply. AVX-512 has this as one instruction (vscalefps); the other
// levels build 2^n in the exponent field and take two normal steps when n
// is outside the normal range, which gives the same bits.
template <class O>
OLC_VM_INLINE typename O::V scale2(typename O::V p, typename O::V n) {
  typedef typename O::V V;
  typedef typename O::I I;
  if constexpr (O::kScalef) {
    return O::scalef(p, n);
  } else {
    const I ni = O::cvti(n);
    V y = O::mul(p, pow2i<O>(ni));
    const typename O::M wide = O::gt(vabs<O>(n), O::f(126.0f));
    if (O::any(wide)) {
      const I n1 = O::template sra<1>(ni);
      const I n2 = O::isub(ni, n1);
      y = O::sel(wide, O::mul(O::mul(p, pow2i<O>(n1)), pow2i<O>(n2)), y);
    }
    return y;
  }
}

// p * 2^n where the caller guarantees |n| <= 126 and a normal result.
template <class O>
OLC_VM_INLINE typename O::V scale2_normal(typename O::V p, typename O::V n) {
  if constexpr (O::kScalef) {
    return O::scalef(p, n);
  } else {
    return O::mul(p, pow2i<O>(O::cvti(n)));
  }
}

// Reduce x = n*ln2 + r and return e^r (in [0.7, 1.42]) and n (as a float).
// Needs |x| small enough that n fits comfortably (callers clamp to ~[-104, 89]).
template <class O>
OLC_VM_INLINE typename O::V exp_reduced(typename O::V x, typename O::V* n_out) {
  typedef typename O::V V;
  const V n = O::sub(O::fma(x, O::f(kLog2e), O::f(kRound)), O::f(kRound));
  V r = O::fma(n, O::f(-kLn2Hi), x);
  r = O::fma(n, O::f(-kLn2Lo), r);
  // Plain Horner, 1 + r(1 + r(c0 + r(c1 + ...))): one FMA per term; the
  // dependency chain is hidden by the drivers' independent vectors.
  V q = O::fma(r, O::f(kExp4), O::f(kExp3));
  q = O::fma(r, q, O::f(kExp2));
  q = O::fma(r, q, O::f(kExp1));
  q = O::fma(r, q, O::f(kExp0));
  q = O::fma(r, q, O::f(1.0f));
  *n_out = n;
  return O::fma(r, q, O::f(1.0f));
}

// exp for arguments whose result is a normal float (about [-87.3, 88.3]).
template <class O>
OLC_VM_INLINE typename O::V exp_normal(typename O::V x) {
  typename O::V n;
  const typename O::V p = exp_reduced<O>(x, &n);
  return scale2_normal<O>(p, n);
}

template <class O>
OLC_VM_INLINE typename O::V exp(typename O::V x) {
  // Past these bounds the result is 0 / +inf anyway; NaN passes the clamp.
  typename O::V n;
  const typename O::V p = exp_reduced<O>(vclamp<O>(x, -104.0f, 89.0f), &n);
  return scale2<O>(p, n);
}

template <class O>
OLC_VM_INLINE typename O::V expm1(typename O::V x) {
  typedef typename O::V V;
  // Below -25 the result is -1 after rounding; above 88 it equals exp(x).
  const V xc = vclamp<O>(x, -25.0f, 88.0f);
  const V n = O::sub(O::fma(xc, O::f(kLog2e), O::f(kRound)), O::f(kRound));
  V r = O::fma(n, O::f(-kLn2Hi), xc);
  r = O::fma(n, O::f(-kLn2Lo), r);
  const V r2 = O::mul(r, r);
  V q = O::fma(r, O::f(kEm4), O::f(kEm3));
  q = O::fma(r, q, O::f(kEm2));
  q = O::fma(r, q, O::f(kEm1));
  q = O::fma(r, q, O::f(kEm0));
  const V p = O::fma(r2, O::fma(r, q, O::f(0.5f)), r);  // expm1(r)
  // expm1(x) = 2^n * p + (2^n - 1); 2^n - 1 is exact for |n| <= 24 and the
  // FMA rounds once.
  const V s = scale2_normal<O>(O::f(1.0f), n);
  V y = O::fma(p, s, O::sub(s, O::f(1.0f)));
  y = vor<O>(y, vsign<O>(x));  // expm1 has the sign of x: keeps -0
  const typename O::M big = O::gt(x, O::f(88.0f));
  if (O::any(big)) y = O::sel(big, exp<O>(x), y);
  return y;
}

// log(1+f) - f for the reduced argument: -f^2/2 + f^3 * P(f), returned as
// the full log(1+f) = f + f^2 * (-1/2 + f * P(f)).
template <class O>
OLC_VM_INLINE typename O::V log1p_reduced(typename O::V f) {
  typedef typename O::V V;
  const V f2 = O::mul(f, f);
  // Estrin on the degree-7 P to shorten the dependency chain.
  const V a01 = O::fma(f, O::f(kLog1), O::f(kLog0));
  const V a23 = O::fma(f, O::f(kLog3), O::f(kLog2));
  const V a45 = O::fma(f, O::f(kLog5), O::f(kLog4));
  const V a67 = O::fma(f, O::f(kLog7), O::f(kLog6));
  const V f4 = O::mul(f2, f2);
  const V a03 = O::fma(f2, a23, a01);
  const V a47 = O::fma(f2, a67, a45);
  const V pp = O::fma(f4, a47, a03);
  const V q = O::fma(f, pp, O::f(-0.5f));
  return O::fma(f2, q, f);
}

// log for positive normal finite x; eadj is added to the exponent (used to
// undo the pre-scaling of subnormal inputs).
template <class O>
OLC_VM_INLINE typename O::V log_normal(typename O::V x, typename O::I eadj) {
  typedef typename O::V V;
  typedef typename O::I I;
  const I xi = O::ci(x);
  const I e = O::template sra<23>(O::isub(xi, O::i(kSqrtHalfBits)));
  const V m = O::cf(O::isub(xi, O::template sll<23>(e)));
  const V f = O::sub(m, O::f(1.0f));  // exact (Sterbenz)
  const V ef = O::cvt(O::iadd(e, eadj));
  const V y = log1p_reduced<O>(f);
  return O::fma(ef, O::f(kLn2Hi), O::fma(ef, O::f(kLn2Lo), y));
}

template <class O>
OLC_VM_INLINE typename O::V log(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::M M;
  const M ok = O::mand(O::ge(x, O::f(kMinNormal)), O::lt(x, O::f(INFINITY)));
  if (!O::any(O::mnot(ok))) return log_normal<O>(x, O::i(0));
  // Slow path only when some lane is subnormal, zero, negative, inf or NaN.
  const M sub = O::mand(O::gt(x, O::f(0.0f)), O::lt(x, O::f(kMinNormal)));
  const V xs = O::sel(sub, O::mul(x, O::f(0x1p23f)), x);
  V y = log_normal<O>(xs, O::seli(sub, O::i(-23), O::i(0)));
  y = O::sel(O::eq(x, O::f(0.0f)), O::f(-INFINITY), y);
  y = O::sel(O::lt(x, O::f(0.0f)), O::f(NAN), y);
  y = O::sel(O::eq(x, O::f(INFINITY)), x, y);
  y = O::sel(O::unord(x, x), O::add(x, x), y);
  return y;
}

// log1p without special-value handling (x > -1, finite or NaN).
template <class O>
OLC_VM_INLINE typename O::V log1p_core(typename O::V x, typename O::V u) {
  typedef typename O::V V;
  typedef typename O::I I;
  const I ui = O::ci(u);
  const I e = O::template sra<23>(O::isub(ui, O::i(kSqrtHalfBits)));
  const V m = O::cf(O::isub(ui, O::template sll<23>(e)));
  const V f = O::sub(m, O::f(1.0f));
  // c = rounding error of u = 1 + x; log1p(x) = log(u) + c/u to first order.
  // c/u = c * 2^-e / m, and 1/m = 1 - f + f^2 - f^3 is plenty: c/u is at most
  // ~2 ulp of the result.
  const V c = O::sub(x, O::sub(u, O::f(1.0f)));
  const V sc = O::cf(O::template sll<23>(O::imax(O::isub(O::i(127), e), O::i(1))));
  const V g = O::fma(f, O::fma(f, O::sub(O::f(1.0f), f), O::f(-1.0f)), O::f(1.0f));
  const V corr = O::mul(O::mul(c, sc), g);
  const V ef = O::cvt(e);
  const V y = log1p_reduced<O>(f);
  return O::fma(ef, O::f(kLn2Hi), O::add(y, O::fma(ef, O::f(kLn2Lo), corr)));
}

template <class O>
OLC_VM_INLINE typename O::V log1p(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::M M;
  const V u = O::add(x, O::f(1.0f));
  V y = log1p_core<O>(x, u);
  // u > 0 implies u >= 2^-24 (normal), so only u <= 0, inf and NaN are special.
  const M ok = O::mand(O::gt(u, O::f(0.0f)), O::lt(u, O::f(INFINITY)));
  if (O::any(O::mnot(ok))) {
    y = O::sel(O::eq(u, O::f(0.0f)), O::f(-INFINITY), y);
    y = O::sel(O::lt(u, O::f(0.0f)), O::f(NAN), y);
    y = O::sel(O::eq(u, O::f(INFINITY)), u, y);
    y = O::sel(O::unord(x, x), O::add(x, x), y);
  }
  return vor<O>(y, vsign<O>(x));  // log1p has the sign of x: keeps -0
}

// expm1 for x in [-25, 0] (no clamp, no overflow case, -0 not kept).
template <class O>
OLC_VM_INLINE typename O::V expm1_neg(typename O::V x) {
  typedef typename O::V V;
  const V n = O::sub(O::fma(x, O::f(kLog2e), O::f(kRound)), O::f(kRound));
  V r = O::fma(n, O::f(-kLn2Hi), x);
  r = O::fma(n, O::f(-kLn2Lo), r);
  const V r2 = O::mul(r, r);
  V q = O::fma(r, O::f(kEm4), O::f(kEm3));
  q = O::fma(r, q, O::f(kEm2));
  q = O::fma(r, q, O::f(kEm1));
  q = O::fma(r, q, O::f(kEm0));
  const V p = O::fma(r2, O::fma(r, q, O::f(0.5f)), r);
  const V s = scale2_normal<O>(O::f(1.0f), n);
  return O::fma(p, s, O::sub(s, O::f(1.0f)));
}

template <class O>
OLC_VM_INLINE typename O::V tanh(typename O::V x) {
  typedef typename O::V V;
  // tanh(a) = -e / (2 + e), e = expm1(-2a) in (-1, 0]: one path for every
  // a, no cancellation (expm1 keeps relative accuracy near 0), one division.
  // Past 9.1 tanh rounds to 1; NaN passes the min.
  const V a = O::min_(O::f(kTanhClamp), vabs<O>(x));
  const V e = expm1_neg<O>(O::mul(a, O::f(-2.0f)));
  const V y = O::div(vabs<O>(e), O::add(O::f(2.0f), e));
  return vor<O>(y, vsign<O>(x));
}

template <class O>
OLC_VM_INLINE typename O::V sigmoid(typename O::V x) {
  typedef typename O::V V;
  // e = exp(-|x|) never overflows; x >= 0: 1/(1+e), x < 0: e/(1+e), so
  // large negative x keeps full relative accuracy down to subnormals.
  const V e = exp<O>(O::sub(O::f(0.0f), vabs<O>(x)));
  const V num = O::sel(O::lt(x, O::f(0.0f)), e, O::f(1.0f));
  return O::div(num, O::add(O::f(1.0f), e));
}

// erf(a) for a = |x| < 0.921875
template <class O>
OLC_VM_INLINE typename O::V erf_small(typename O::V a) {
  typedef typename O::V V;
  const V a2 = O::mul(a, a);
  V p = O::fma(a2, O::f(kErf6), O::f(kErf5));
  p = O::fma(a2, p, O::f(kErf4));
  p = O::fma(a2, p, O::f(kErf3));
  p = O::fma(a2, p, O::f(kErf2));
  p = O::fma(a2, p, O::f(kErf1));
  p = O::fma(a2, p, O::f(kErf0));
  return O::mul(a, p);
}

// erfc(a) for a in [0.921875, 4] (a clamped to 4 by the caller).
template <class O>
OLC_VM_INLINE typename O::V erfc_mid(typename O::V a) {
  typedef typename O::V V;
  V p = O::fma(a, O::f(kErfc9), O::f(kErfc8));
  p = O::fma(a, p, O::f(kErfc7));
  p = O::fma(a, p, O::f(kErfc6));
  p = O::fma(a, p, O::f(kErfc5));
  p = O::fma(a, p, O::f(kErfc4));
  p = O::fma(a, p, O::f(kErfc3));
  p = O::fma(a, p, O::f(kErfc2));
  p = O::fma(a, p, O::f(kErfc1));
  p = O::fma(a, p, O::f(kErfc0));
  return exp_normal<O>(O::fma(O::sub(O::f(0.0f), a), a, p));
}

template <class O>
OLC_VM_INLINE typename O::V erf(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::M M;
  const V a = vabs<O>(x);
  V y = erf_small<O>(a);
  const M big = O::mnot(O::lt(a, O::f(kErfSmall)));
  if (O::any(big)) {
    const V yb = O::sub(O::f(1.0f), erfc_mid<O>(O::min_(O::f(kErfcClamp), a)));
    y = O::sel(big, yb, y);
  }
  return vor<O>(y, vsign<O>(x));
}

// hi + lo = a + b exactly (Knuth's TwoSum; no ordering assumption).
template <class O>
OLC_VM_INLINE typename O::V two_sum(typename O::V a, typename O::V b, typename O::V* lo) {
  typedef typename O::V V;
  const V s = O::add(a, b);
  const V bb = O::sub(s, a);
  *lo = O::add(O::sub(a, O::sub(s, bb)), O::sub(b, bb));
  return s;
}

// e^(hi + lo) for small lo: e^hi * (1 + lo). Carrying lo matters where
// hi is large: e^t turns a relative error d of t into an error t*d.
template <class O>
OLC_VM_INLINE typename O::V exp_hilo(typename O::V hi, typename O::V lo) {
  const typename O::V e = exp<O>(hi);
  return O::fma(e, lo, e);
}

template <class O>
OLC_VM_INLINE typename O::V gelu_erf(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::M M;
  const V z = O::mul(x, O::f(kRsqrt2));
  const V a = vabs<O>(z);
  const V es = erf_small<O>(a);
  // Phi(x) = 0.5 * (1 + erf(z)); for z <= -0.92 use 0.5 * erfc(|z|) directly
  // so the negative side keeps relative accuracy instead of cancelling.
  V cdf = O::fma(O::f(0.5f), vor<O>(es, vsign<O>(z)), O::f(0.5f));
  const M big = O::mnot(O::lt(a, O::f(kErfSmall)));
  if (O::any(big)) {
    // erfc(a) = exp(-x^2/2 + P(a)); -x^2/2 carried as hi + lo (from x, not
    // the rounded z) so the exponent is exact to ~2^-40 relative.
    const V x2 = O::mul(x, x);
    const V x2lo = O::fma(x, x, O::sub(O::f(0.0f), x2));
    const V nh = O::mul(x2, O::f(-0.5f));
    const V t = O::sub(O::min_(O::f(kErfcgClamp), a), O::f(kErfcgMid));
    V p = O::fma(t, O::f(kErfcg9), O::f(kErfcg8));
    p = O::fma(t, p, O::f(kErfcg7));
    p = O::fma(t, p, O::f(kErfcg6));
    p = O::fma(t, p, O::f(kErfcg5));
    p = O::fma(t, p, O::f(kErfcg4));
    p = O::fma(t, p, O::f(kErfcg3));
    p = O::fma(t, p, O::f(kErfcg2));
    p = O::fma(t, p, O::f(kErfcg1));
    p = O::fma(t, p, O::f(kErfcg0));
    V lo;
    // clamp: lanes past a = 5 are 1 - tiny or flushed below; |x| >= 16
    // would overflow x*x and needs no lo term.
    const V hi = vclamp<O>(two_sum<O>(nh, p, &lo), -30.0f, 0.0f);
    lo = O::sel(O::lt(vabs<O>(x), O::f(16.0f)), O::fma(x2lo, O::f(-0.5f), lo), O::f(0.0f));
    const V ec = exp_hilo<O>(hi, lo);
    V cb = O::sel(O::lt(z, O::f(0.0f)), O::mul(ec, O::f(0.5f)),
                  O::fma(ec, O::f(-0.5f), O::f(1.0f)));
    cdf = O::sel(big, cb, cdf);
  }
  // Flush the far tail (|result| < 5.5e-12) to -0; also gives Gelu(-inf) = -0.
  return O::sel(O::lt(z, O::f(-kErfcgClamp)), O::f(-0.0f), O::mul(x, cdf));
}

template <class O>
OLC_VM_INLINE typename O::V gelu_tanh(typename O::V x) {
  typedef typename O::V V;
  // 0.5x(1 + tanh(u)) = x * sigmoid(2u) = x / (1 + e^-2u): no cancellation
  // on the negative side. v = 2u = 2x(C + K x^2) is carried as hi + lo
  // because e^-|v| multiplies v's rounding error by |v|.
  const V x2 = O::mul(x, x);
  const V x2lo = O::fma(x, x, O::sub(O::f(0.0f), x2));
  const V pk = O::opaque(O::mul(x2, O::f(kGeluK)));
  const V pklo = O::fma(x2, O::f(kGeluK), O::sub(O::f(0.0f), pk));
  V wlo;
  const V w = two_sum<O>(pk, O::f(kGeluC), &wlo);
  wlo = O::add(wlo, O::fma(x2lo, O::f(kGeluK), pklo));
  const V vh = O::mul(x, w);
  const V vlo = O::fma(x, wlo, O::fma(x, w, O::sub(O::f(0.0f), vh)));
  const V v = O::mul(vh, O::f(2.0f));
  // e^-|v + l| = e^-|v| (1 - sign(v) l); |x| >= 16 needs no correction
  // (and x*x may overflow there).
  V l = vxor<O>(O::mul(vlo, O::f(-2.0f)), vsign<O>(v));
  l = O::sel(O::lt(vabs<O>(x), O::f(16.0f)), l, O::f(0.0f));
  const V e = exp_hilo<O>(O::sub(O::f(0.0f), vabs<O>(v)), l);
  const V num = O::sel(O::lt(v, O::f(0.0f)), O::mul(x, e), x);
  const V y = O::div(num, O::add(O::f(1.0f), e));
  return O::sel(O::eq(x, O::f(-INFINITY)), O::f(-0.0f), y);
}

template <class O>
OLC_VM_INLINE typename O::V softplus(typename O::V x) {
  typedef typename O::V V;
  // log(1 + e^x) = max(x, 0) + log1p(e^-|x|); e^-|x| in [0, 1], so no
  // overflow and the subnormal tail of e^x is kept for large negative x.
  const V e = exp<O>(O::sub(O::f(0.0f), vabs<O>(x)));
  const V l = log1p_core<O>(e, O::add(e, O::f(1.0f)));
  // max_(x, 0) gives 0 for NaN x, so a NaN comes only from l: the result
  // bits then do not depend on which operand order the compiler picks.
  return O::add(O::max_(x, O::f(0.0f)), l);
}

// Shared by sin and cos: q_add = 0 gives sin, 1 gives cos.
template <class O>
OLC_VM_INLINE typename O::V sincos(typename O::V x, int32_t q_add) {
  typedef typename O::V V;
  typedef typename O::I I;
  typedef typename O::M M;
  const V t = O::fma(x, O::f(kTwoOverPi), O::f(kRound));
  const V q = O::sub(t, O::f(kRound));
  const I qi = O::iadd(O::isub(O::ci(t), O::i(kRoundBits)), O::i(q_add));
  V r = O::fma(q, O::f(-kPio2_1), x);
  r = O::fma(q, O::f(-kPio2_2), r);
  r = O::fma(q, O::f(-kPio2_3), r);
  const V r2 = O::mul(r, r);
  V s = O::fma(r2, O::f(kSin3), O::f(kSin2));
  s = O::fma(r2, s, O::f(kSin1));
  s = O::fma(r2, s, O::f(kSin0));
  s = O::fma(O::mul(r2, r), s, r);
  V c = O::fma(r2, O::f(kCos3), O::f(kCos2));
  c = O::fma(r2, c, O::f(kCos1));
  c = O::fma(r2, c, O::f(kCos0));
  c = O::fma(O::mul(r2, r2), c, O::fma(r2, O::f(-0.5f), O::f(1.0f)));
  V y = O::sel(O::itest(qi, O::i(1)), c, s);
  y = vxor<O>(y, O::cf(O::template sll<30>(O::iand(qi, O::i(2)))));
  // Large |x|, inf and NaN: exact reduction in double libm, lane by lane.
  const M slow = O::mnot(O::le(vabs<O>(x), O::f(kTrigFastMax)));
  if (O::any(slow)) {
    float xs[O::N], ys[O::N];
    O::store(xs, x);
    O::store(ys, y);
    const unsigned bits = O::bits(slow);
    for (int k = 0; k < O::N; ++k) {
      if (bits & (1u << k)) {
        const double d = static_cast<double>(xs[k]);
        ys[k] = static_cast<float>(q_add ? std::cos(d) : std::sin(d));
      }
    }
    y = O::load(ys);
  }
  return y;
}

template <class O>
OLC_VM_INLINE typename O::V sin(typename O::V x) {
  const typename O::V y = sincos<O>(x, 0);
  return O::sel(O::eq(x, O::f(0.0f)), x, y);  // sin(-0) = -0
}

template <class O>
OLC_VM_INLINE typename O::V cos(typename O::V x) {
  return sincos<O>(x, 1);
}

}  // namespace olc_vm
}  // namespace

#endif  // OLC_VMATH_IMPL_H_
