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
// tanh(a) on [0, 9.1) in 16 pieces of width 1/2 (the last one 7.5..9.1):
// C0 + t(C1 + ... t C7), t = a - kTanhPwCtr[k], piece 0 centred at 0 with
// C0 = 0; looked up per lane like the erf pieces. tanh rounds to 1 past 9.1.
alignas(64) constexpr float kTanhPwCtr[16] = {0.0f, 0x1.8p-1f, 0x1.4p+0f, 0x1.cp+0f, 0x1.2p+1f, 0x1.6p+1f, 0x1.ap+1f, 0x1.ep+1f,
     0x1.1p+2f, 0x1.3p+2f, 0x1.5p+2f, 0x1.7p+2f, 0x1.9p+2f, 0x1.bp+2f, 0x1.dp+2f, 0x1.09999ap+3f};
alignas(64) constexpr float kTanhPw[8][16] = {
    {0.0f, 0x1.45323ep-1f, 0x1.b2523cp-1f, 0x1.e1fbfap-1f, 0x1.f4bfd6p-1f, 0x1.fbd50ap-1f, 0x1.fe767ap-1f, 0x1.ff6f18p-1f,
     0x1.ffcaacp-1f, 0x1.ffec62p-1f, 0x1.fff8c8p-1f, 0x1.fffd58p-1f, 0x1.ffff06p-1f, 0x1.ffffa4p-1f, 0x1.ffffdep-1f, 0x1.fffffcp-1f},
    {0x1p+0f, 0x1.3173b2p-1f, 0x1.1f2514p-2f, 0x1.d22ca2p-4f, 0x1.64108ap-5f, 0x1.09a7a6p-6f, 0x1.88ef68p-8f, 0x1.21a7aep-9f,
     0x1.aa87dp-11f, 0x1.39e784p-12f, 0x1.cdf5a2p-14f, 0x1.53e714p-15f, 0x1.f42dep-17f, 0x1.700356p-18f, 0x1.0ec4f2p-19f, 0x1.09427ap-22f},
    {-0x1.ea9e9p-19f, -0x1.84033ap-2f, -0x1.e72a62p-3f, -0x1.b6dccap-4f, -0x1.5c3016p-5f, -0x1.07895p-6f, -0x1.881b48p-8f, -0x1.21b78ap-9f,
     -0x1.a9451p-11f, -0x1.414dfp-12f, -0x1.ca0644p-14f, -0x1.46af0cp-15f, -0x1.06d00cp-16f, -0x1.71e93ep-18f, -0x1.887d2cp-21f, -0x1.8954f6p-22f},
    {-0x1.5530f6p-2f, 0x1.568384p-5f, 0x1.bba238p-4f, 0x1.01b9a2p-4f, 0x1.bbcd8cp-6f, 0x1.5997b2p-7f, 0x1.039bc4p-8f, 0x1.80f398p-10f,
     0x1.1bf742p-11f, 0x1.a2f4e2p-13f, 0x1.33bf64p-14f, 0x1.c3e226p-16f, 0x1.4eca18p-17f, 0x1.eae496p-19f, 0x1.5419fap-20f, 0x1.638bdcp-23f},
    {-0x1.c8cb54p-10f, 0x1.984c3ap-4f, -0x1.98f8d4p-7f, -0x1.7e7268p-6f, -0x1.9cb44ap-7f, -0x1.46c9b8p-8f, -0x1.c59564p-10f, -0x1.3eac06p-11f,
     -0x1.7740f2p-12f, 0x1.a29b76p-13f, -0x1.3e85b8p-14f, -0x1.4e80b6p-14f, 0x1.c362a6p-16f, -0x1.577742p-21f, -0x1.ca416ep-15f, 0x1.b933b4p-22f},
    {0x1.2558acp-3f, -0x1.069914p-4f, -0x1.399fbep-6f, 0x1.e64fp-9f, 0x1.05524ep-8f, 0x1.f1e5f8p-10f, 0x1.8a44b2p-11f, 0x1.2766ep-12f,
     0x1.df77cp-14f, 0x1.0114dp-16f, 0x1.314cb2p-16f, 0x1.8ec5dap-17f, -0x1.7287e4p-20f, 0x1.407056p-21f, 0x1.c8d4eep-18f, 0x1.ba27dcp-26f},
    {-0x1.bed7b4p-6f, -0x1.0ca164p-10f, 0x1.ca532ap-7f, 0x1.673496p-13f, 0x1.1b52eep-9f, -0x1.ca5408p-10f, -0x1.59d4e6p-9f, -0x1.6e1d8cp-10f,
     0x1.d1638p-11f, -0x1.9f9932p-9f, 0x1.ac8f2cp-12f, 0x1.6cccdap-11f, -0x1.605272p-12f, -0x1.ab4998p-17f, 0x1.2909aep-11f, -0x1.183caep-21f},
    {-0x1.6c3b1ap-6f, 0x1.6e0f6ep-6f, -0x1.48666ep-8f, -0x1.104c34p-9f, -0x1.4c2d1ep-13f, 0x1.747fa8p-13f, 0x1.0d274cp-12f, 0x1.43bfp-13f,
     -0x1.85218cp-14f, 0x1.9b4a34p-12f, -0x1.c845dp-15f, -0x1.ab56d2p-14f, 0x1.bf5866p-15f, 0x1.25fe52p-19f, -0x1.afc212p-14f, 0x1.ef174p-27f}};
// Beyond this tanh rounds to +-1 and exp(-2|x|) stays normal.
constexpr float kTanhClamp = 9.1f;
// erf(a) on [0, 4) in 16 pieces of width 1/4: piece k = floor(4a) holds
// erf(a) = C0 + t(C1 + t(C2 + t(C3 + t(C4 + t C5)))), t = a - kErfPwCtr[k]
// (piece 0 is centred at 0 with C0 = 0, so it keeps relative accuracy near
// 0). Coefficients are looked up per lane from one register each
// (vpermps), so every lane takes the same short path: no branches.
alignas(64) constexpr float kErfPwCtr[16] = {0.0f, 0x1.8p-2f, 0x1.4p-1f, 0x1.cp-1f, 0x1.2p+0f, 0x1.6p+0f, 0x1.ap+0f, 0x1.ep+0f,
     0x1.1p+1f, 0x1.3p+1f, 0x1.5p+1f, 0x1.7p+1f, 0x1.9p+1f, 0x1.bp+1f, 0x1.dp+1f, 0x1.fp+1f};
alignas(64) constexpr float kErfPw[6][16] = {
    {0.0f, 0x1.9dd0d2p-2f, 0x1.3f196ep-1f, 0x1.91724ap-1f, 0x1.c6dad2p-1f, 0x1.e5768cp-1f, 0x1.f4f694p-1f, 0x1.fbe61ep-1f,
     0x1.fea422p-1f, 0x1.ff996p-1f, 0x1.ffe514p-1f, 0x1.fff9bap-1f, 0x1.fffeb4p-1f, 0x1.ffffc4p-1f, 0x1.fffff6p-1f, 0x1.fffffep-1f},
    {0x1.20dd74p+0f, 0x1.f5f0ccp-1f, 0x1.86e96ap-1f, 0x1.0cab62p-1f, 0x1.45e99cp-2f, 0x1.5ce596p-3f, 0x1.499d48p-4f, 0x1.12ceb2p-5f,
     0x1.94624ep-7f, 0x1.06918ap-8f, 0x1.2ce898p-10f, 0x1.30539p-12f, 0x1.0f9e1cp-14f, 0x1.abe0ap-17f, 0x1.296a7p-19f, 0x1.6ce1aap-22f},
    {0x1.59f48cp-17f, -0x1.7872p-2f, -0x1.e8a31cp-2f, -0x1.d62e3ep-2f, -0x1.6ea556p-2f, -0x1.dfbb8ap-3f, -0x1.0bd2e2p-3f, -0x1.0193aap-4f,
     -0x1.adc392p-6f, -0x1.37524p-7f, -0x1.89788ep-9f, -0x1.b360dcp-11f, -0x1.aac20cp-13f, -0x1.da862ep-15f, -0x1.ba3c98p-18f, 0x1.e32d8ap-18f},
    {-0x1.8170b4p-2f, -0x1.e0fa8p-3f, -0x1.c824dep-5f, 0x1.7c9678p-4f, 0x1.4cb38p-3f, 0x1.4374c4p-3f, 0x1.d6634p-4f, 0x1.143d88p-4f,
     0x1.0ea618p-5f, 0x1.c1e31cp-7f, 0x1.406e4cp-8f, 0x1.89c4fp-10f, 0x1.a39014p-12f, 0x1.8ae936p-14f, 0x1.363f78p-16f, 0x1.224eb2p-19f},
    {0x1.4dd7dap-9f, 0x1.524cccp-3f, 0x1.67c1dp-3f, 0x1.ce0294p-4f, 0x1.c87426p-6f, -0x1.ee4c94p-6f, -0x1.926052p-5f, -0x1.60a452p-5f,
     -0x1.a9a962p-6f, -0x1.ce36f6p-7f, -0x1.939c44p-8f, -0x1.19fbfcp-9f, -0x1.02fefp-11f, 0x1.72f862p-11f, -0x1.0101ccp-13f, -0x1.1bc49cp-11f},
    {0x1.ad514ap-4f, 0x1.675698p-5f, -0x1.b4692cp-6f, -0x1.104e34p-4f, -0x1.f4e01cp-5f, -0x1.f586ep-6f, -0x1.274ef4p-9f, 0x1.769106p-7f,
     0x1.95cedp-7f, 0x1.1699ep-7f, 0x1.1d8afap-8f, 0x1.d0864p-10f, 0x1.28bd5ep-11f, -0x1.1585b6p-15f, 0x1.070c3cp-14f, 0x1.39f496p-13f}};
// GELU: Phi(-a) = exp(-a^2/2) * R(a), R(a) = Phi(-a) e^(a^2/2) (slowly
// varying, 0.5 at 0 to 0.05 at 8), on [0, 8) in 16 pieces of width 1/2:
// R(a) = C0 + t(C1 + ... t C5), t = a - kGeluPwCtr[floor(2a)], looked up
// per lane like the erf pieces.
alignas(64) constexpr float kGeluPwCtr[16] = {0x1p-2f, 0x1.8p-1f, 0x1.4p+0f, 0x1.cp+0f, 0x1.2p+1f, 0x1.6p+1f, 0x1.ap+1f, 0x1.ep+1f,
     0x1.1p+2f, 0x1.3p+2f, 0x1.5p+2f, 0x1.7p+2f, 0x1.9p+2f, 0x1.bp+2f, 0x1.dp+2f, 0x1.fp+2f};
alignas(64) constexpr float kGeluPw[6][16] = {
    {0x1.a7f80ap-2f, 0x1.337024p-2f, 0x1.d898dep-3f, 0x1.7b5abep-3f, 0x1.3aaddep-3f, 0x1.0bb968p-3f, 0x1.d0b31cp-4f, 0x1.99c2b6p-4f,
     0x1.6e040ap-4f, 0x1.4a724ap-4f, 0x1.2d01fep-4f, 0x1.1445a6p-4f, 0x1.fe6e5ep-5f, 0x1.da2caep-5f, 0x1.baa644p-5f, 0x1.9eff96p-5f},
    {-0x1.2e864cp-2f, -0x1.63e07p-3f, -0x1.c4932p-4f, -0x1.3253b8p-4f, -0x1.b405ccp-5f, -0x1.432b18p-5f, -0x1.ef2cc8p-6f, -0x1.85dc7cp-6f,
     -0x1.3a0094p-6f, -0x1.01c9bep-6f, -0x1.ae369ap-7f, -0x1.6c06bap-7f, -0x1.37c334p-7f, -0x1.0dd422p-7f, -0x1.d76972p-8f, -0x1.9f2e78p-8f},
    {0x1.5c5076p-3f, 0x1.5bf44ep-4f, 0x1.7b77b6p-5f, 0x1.bd411ap-6f, 0x1.15a9ap-6f, 0x1.6c63dcp-7f, 0x1.f2f57p-8f, 0x1.622674p-8f,
     0x1.0316d8p-8f, 0x1.85247ap-9f, 0x1.2aee54p-9f, 0x1.d40002p-10f, 0x1.74d8a8p-10f, 0x1.2d6016p-10f, 0x1.edd0bcp-11f, 0x1.99539ep-11f},
    {-0x1.59514p-4f, -0x1.2c8486p-5f, -0x1.1f34bep-6f, -0x1.295e6ap-7f, -0x1.49bb1cp-8f, -0x1.839466p-9f, -0x1.dec43ep-10f, -0x1.34a9f8p-10f,
     -0x1.9cc568p-11f, -0x1.1cfb42p-11f, -0x1.94a6dep-12f, -0x1.26196cp-12f, -0x1.b512aap-13f, -0x1.4ab358p-13f, -0x1.fd39b4p-14f, -0x1.8deddep-14f},
    {0x1.35650cp-5f, 0x1.dbc73p-7f, 0x1.9366aap-8f, 0x1.766e86p-9f, 0x1.730aeap-10f, 0x1.838494p-11f, 0x1.b979c2p-12f, 0x1.fadf04p-13f,
     0x1.481f1cp-13f, 0x1.a481a4p-14f, 0x1.e89ea2p-15f, 0x1.9d99a4p-15f, 0x1.ebabp-16f, 0x1.91b5dcp-16f, 0x1.0e5b76p-16f, 0x1.784768p-17f},
    {-0x1.eed9a6p-7f, -0x1.55f6dep-8f, -0x1.04b628p-9f, -0x1.b7c2bcp-11f, -0x1.88abd8p-12f, -0x1.72fd9p-13f, -0x1.8633acp-14f, -0x1.94e26ap-15f,
     -0x1.f39388p-16f, -0x1.25a6d2p-16f, -0x1.21c3a6p-17f, -0x1.0a5264p-17f, -0x1.04752ep-18f, -0x1.e71ac8p-19f, -0x1.16b902p-19f, -0x1.5357ep-20f}};
// Below this x, |gelu(x)| < 5.5e-12 and the result is flushed to -0.
constexpr float kGeluFlush = -7.0710678f;
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

template <class O>
OLC_VM_INLINE typename O::V tanh(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::I I;
  const V a = vabs<O>(x);
  // piece index 0..15 (NaN: any index, the result stays NaN)
  const I k = O::cvtti(O::min_(O::f(15.5f), O::mul(a, O::f(2.0f))));
  const V t = O::sub(a, O::lut16(kTanhPwCtr, k));
  V y = O::fma(t, O::lut16(kTanhPw[7], k), O::lut16(kTanhPw[6], k));
  y = O::fma(t, y, O::lut16(kTanhPw[5], k));
  y = O::fma(t, y, O::lut16(kTanhPw[4], k));
  y = O::fma(t, y, O::lut16(kTanhPw[3], k));
  y = O::fma(t, y, O::lut16(kTanhPw[2], k));
  y = O::fma(t, y, O::lut16(kTanhPw[1], k));
  y = O::fma(t, y, O::lut16(kTanhPw[0], k));
  y = O::sel(O::ge(a, O::f(kTanhClamp)), O::f(1.0f), y);
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

template <class O>
OLC_VM_INLINE typename O::V erf(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::I I;
  const V a = vabs<O>(x);
  // piece index 0..15 (NaN: any index, the result stays NaN)
  const I k = O::cvtti(O::min_(O::f(15.5f), O::mul(a, O::f(4.0f))));
  const V t = O::sub(a, O::lut16(kErfPwCtr, k));
  V y = O::fma(t, O::lut16(kErfPw[5], k), O::lut16(kErfPw[4], k));
  y = O::fma(t, y, O::lut16(kErfPw[3], k));
  y = O::fma(t, y, O::lut16(kErfPw[2], k));
  y = O::fma(t, y, O::lut16(kErfPw[1], k));
  y = O::fma(t, y, O::lut16(kErfPw[0], k));
  // erf rounds to 1 from 3.86 on; the pieces end at 4
  y = O::sel(O::ge(a, O::f(4.0f)), O::f(1.0f), y);
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
  typedef typename O::I I;
  // x * Phi(x) with E = Phi(-|x|) = exp(-a^2/2) R(a): Phi(x) = E for x < 0
  // and 1 - E for x >= 0, so the negative side keeps relative accuracy.
  // a is clamped to 8 (Phi(-8) = 6e-16, so 1 - E = 1 there; inf stays out).
  // NaN x gives a = 8: the NaN then reaches the result only through x, so
  // its bits do not depend on the operand order the compiler picks.
  const V a = O::min_(vabs<O>(x), O::f(8.0f));
  const I k = O::cvtti(O::min_(O::f(15.5f), O::mul(a, O::f(2.0f))));
  const V t = O::sub(a, O::lut16(kGeluPwCtr, k));
  V r = O::fma(t, O::lut16(kGeluPw[5], k), O::lut16(kGeluPw[4], k));
  r = O::fma(t, r, O::lut16(kGeluPw[3], k));
  r = O::fma(t, r, O::lut16(kGeluPw[2], k));
  r = O::fma(t, r, O::lut16(kGeluPw[1], k));
  r = O::fma(t, r, O::lut16(kGeluPw[0], k));
  // a^2 = a2 + a2lo exactly; e^(-a^2/2) = e^(-a2/2) (1 - a2lo/2): without
  // the lo part the rounding of a^2 (up to 32) would cost ~1e-6 relative.
  const V a2 = O::mul(a, a);
  const V a2lo = O::fms(a, a, a2);
  r = O::fma(r, O::mul(a2lo, O::f(-0.5f)), r);
  const V e = O::mul(exp_normal<O>(O::mul(a2, O::f(-0.5f))), r);
  const V cdf = O::sel(O::lt(x, O::f(0.0f)), e, O::sub(O::f(1.0f), e));
  // Flush the far tail (|result| < 5.5e-12) to -0; also gives Gelu(-inf) = -0.
  return O::sel(O::lt(x, O::f(kGeluFlush)), O::f(-0.0f), O::mul(x, cdf));
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
