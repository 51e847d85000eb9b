// Float32 vector math: one algorithm per function, written once against a
// small "ops" interface (set1, fma, compare, select, integer bit tricks,
// scalef, a 16-entry per-lane table lookup) and
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
// C0 + t(C1 + ... t C7), t = a - k/2, C0 = 0 in piece 0; looked up per lane
// like the erf pieces. tanh rounds to 1 past 9.1.
alignas(64) constexpr float kTanhPw[8][16] = {
    {0.0f, 0x1.d9353ep-2f, 0x1.85efacp-1f, 0x1.cf6f98p-1f, 0x1.ed9506p-1f, 0x1.f92582p-1f, 0x1.fd77d2p-1f, 0x1.ff112cp-1f,
     0x1.ffa818p-1f, 0x1.ffdfa8p-1f, 0x1.fff41ap-1f, 0x1.fffbap-1f, 0x1.fffe64p-1f, 0x1.ffff68p-1f, 0x1.ffffc8p-1f, 0x1.ffffecp-1f},
    {0x1p+0f, 0x1.92a90cp-1f, 0x1.ae0cbp-2f, 0x1.7214e2p-3f, 0x1.21620cp-4f, 0x1.b3b904p-6f, 0x1.431d52p-7f, 0x1.dd8302p-9f,
     0x1.5e10a2p-10f, 0x1.001f9p-11f, 0x1.759586p-13f, 0x1.049a2ep-14f, 0x1.7cade8p-16f, 0x1.6b7cp-17f, 0x1.2b11dp-18f, 0x1.236a0cp-22f},
    {-0x1.ea9e9p-19f, -0x1.7416ep-2f, -0x1.4763eap-2f, -0x1.4ecddep-3f, -0x1.16e32ep-4f, -0x1.aefdd6p-6f, -0x1.3c190cp-7f, -0x1.e5b018p-9f,
     -0x1.30f984p-10f, -0x1.5ecb3p-12f, -0x1.2ee0acp-14f, 0x1.55a596p-14f, 0x1.27b2c8p-15f, -0x1.141c0cp-14f, -0x1.485866p-15f, 0x1.14d52ap-17f},
    {-0x1.5530f6p-2f, -0x1.853d8ap-4f, 0x1.a1b4dep-4f, 0x1.63664cp-4f, 0x1.56d94cp-5f, 0x1.247674p-6f, 0x1.2302cp-8f, 0x1.abe846p-9f,
     -0x1.3ebf08p-10f, -0x1.9a752cp-10f, -0x1.35fe2ep-10f, -0x1.c36026p-10f, -0x1.6ceebep-11f, 0x1.658a22p-11f, 0x1.c11bb6p-12f, -0x1.220b4cp-15f},
    {-0x1.c8cb54p-10f, 0x1.5bf954p-3f, 0x1.309b7ap-5f, -0x1.3779cep-6f, -0x1.0d4076p-6f, -0x1.a2897ep-7f, 0x1.1451a2p-7f, -0x1.8b9638p-8f,
     0x1.7a1a5p-7f, 0x1.5b5634p-7f, 0x1.e12ba6p-8f, 0x1.47ccacp-7f, 0x1.08578p-8f, -0x1.f6c09p-9f, -0x1.3ca93ap-9f, 0x1.067a88p-14f},
    {0x1.2558acp-3f, -0x1.6ba74ep-5f, -0x1.328956p-4f, -0x1.4642b4p-6f, 0x1.296088p-11f, 0x1.1135fap-6f, -0x1.0be566p-5f, 0x1.de5cf4p-7f,
     -0x1.1d13ccp-5f, -0x1.00b22ep-5f, -0x1.613a5ep-6f, -0x1.de8e58p-6f, -0x1.81a83ap-7f, 0x1.6dab54p-7f, 0x1.cc89e2p-8f, -0x1.e17d6p-15f},
    {-0x1.bed7b4p-6f, -0x1.680924p-6f, 0x1.008d76p-4f, 0x1.0279f8p-5f, 0x1.7b9324p-8f, -0x1.542f7p-6f, 0x1.8fab58p-5f, -0x1.51988cp-6f,
     0x1.9e41fcp-5f, 0x1.73f52ap-5f, 0x1.ff3112p-6f, 0x1.59e41p-5f, 0x1.1699ep-6f, -0x1.07f384p-6f, -0x1.4c4702p-7f, 0x1.b4db2cp-16f},
    {-0x1.6c3b1ap-6f, 0x1.68f24ap-7f, -0x1.bf03bcp-6f, -0x1.13afcep-6f, -0x1.e65e98p-9f, 0x1.79698p-7f, -0x1.c950bp-6f, 0x1.7e5f6ep-7f,
     -0x1.d779f2p-6f, -0x1.a6f14ap-6f, -0x1.227222p-6f, -0x1.88cfb8p-6f, -0x1.3c3c3cp-7f, 0x1.2b7102p-7f, 0x1.78c50ap-8f, -0x1.3738d6p-18f}};
// Beyond this tanh rounds to +-1 and exp(-2|x|) stays normal.
constexpr float kTanhClamp = 9.1f;
// tanh without table lookups (tanh_rational, the AVX2 level): on
// [0, 9], tanh(a) = a P(a^2) / Q(a^2) with P and Q of degree 4 (P0 = Q0 = 1,
// so tiny a come out exactly), a weighted least-squares fit of the
// relative error refitted after rounding each coefficient to float
// (0.35 ulp before rounding; the float evaluation of the two polynomials
// adds the rest, see docs/accuracy.md). From a = 9 on the result is 1.
constexpr float kTanhRatClamp = 9.0f;
constexpr float kTanhRP1 = 0x1.120b34p-3f, kTanhRP2 = 0x1.ca2d26p-9f, kTanhRP3 = 0x1.59c4b0p-16f,
                kTanhRP4 = 0x1.cae068p-27f;
constexpr float kTanhRQ1 = 0x1.de5ae4p-2f, kTanhRQ2 = 0x1.a7f840p-6f, kTanhRQ3 = 0x1.5886f6p-12f,
                kTanhRQ4 = 0x1.a18288p-21f;
// erf(a) on [0, 4) in 16 pieces of width 1/4: piece k = floor(4a) holds
// erf(a) = C0 + t(C1 + t(C2 + t(C3 + t(C4 + t C5)))), t = a - k/4 (exact),
// C0 = 0 in piece 0 (relative accuracy near 0). Coefficients are looked up
// per lane from one register each (vpermps), so every lane takes the same
// short path: no branches.
alignas(64) constexpr float kErfPw[6][16] = {
    {0.0f, 0x1.1af54ep-2f, 0x1.0a7ef6p-1f, 0x1.6c1c98p-1f, 0x1.af767ap-1f, 0x1.d8865ep-1f, 0x1.eea556p-1f, 0x1.f92d08p-1f,
     0x1.fd9ae2p-1f, 0x1.ff4048p-1f, 0x1.ffcaa8p-1f, 0x1.fff2dp-1f, 0x1.fffd1ap-1f, 0x1.ffff7p-1f, 0x1.ffffe8p-1f, 0x1.fffffcp-1f},
    {0x1.20dd74p+0f, 0x1.0f5d0ap+0f, 0x1.c1ef86p-1f, 0x1.492db6p-1f, 0x1.a912b6p-2f, 0x1.e46432p-3f, 0x1.e72054p-4f, 0x1.b04f32p-5f,
     0x1.528944p-6f, 0x1.d3d5dp-8f, 0x1.1e3d98p-9f, 0x1.3268cep-11f, 0x1.2d6b28p-13f, 0x1.c49d38p-16f, -0x1.19c6cep-24f, 0x1.069aaap-19f},
    {0x1.59f48cp-17f, -0x1.0f4f94p-2f, -0x1.c1d7f8p-2f, -0x1.ed9f3ap-2f, -0x1.a92d1ep-2f, -0x1.2eb394p-2f, -0x1.6d2e8ep-3f, -0x1.79eecap-4f,
     -0x1.5175c8p-5f, -0x1.0552bap-6f, -0x1.7057fep-8f, -0x1.970db4p-10f, -0x1.253ap-11f, -0x1.9df29ap-16f, 0x1.437a38p-13f, -0x1.39344ep-15f},
    {-0x1.8170b4p-2f, -0x1.3daa1p-2f, -0x1.2ef96cp-3f, 0x1.994da6p-6f, 0x1.1e0cf8p-3f, 0x1.5697aep-3f, 0x1.1a9936p-3f, 0x1.6d86fap-4f,
     0x1.7e2414p-5f, 0x1.4d6f9p-6f, 0x1.50730ap-7f, 0x1.114da2p-9f, 0x1.34cdcap-9f, -0x1.331242p-11f, -0x1.ece9aap-10f, 0x1.942a0ep-12f},
    {0x1.4dd7dap-9f, 0x1.163cacp-3f, 0x1.8d0f86p-3f, 0x1.48c496p-3f, 0x1.fd305p-5f, -0x1.cbe51ap-8f, -0x1.5d1d2p-5f, -0x1.6c4b4ep-5f,
     -0x1.bd72eap-6f, -0x1.9b89eep-7f, -0x1.183eep-6f, -0x1.2533d2p-14f, -0x1.09852p-7f, 0x1.ad43fap-9f, 0x1.1b8532p-7f, -0x1.c3a78ap-10f},
    {0x1.ad514ap-4f, 0x1.82e7d6p-5f, -0x1.e59794p-6f, -0x1.3d9886p-4f, -0x1.ba71cep-5f, -0x1.2bd258p-5f, -0x1.5ebf2ap-7f, 0x1.eb8972p-9f,
     0x1.55186ap-10f, -0x1.06af2ap-10f, 0x1.2f5ea2p-6f, -0x1.7e7c1ep-9f, 0x1.883a3ep-7f, -0x1.63de8cp-8f, -0x1.c39446p-7f, 0x1.64e7e4p-9f}};
// GELU: Phi(-a) = exp(-a^2/2) * R(a), R(a) = Phi(-a) e^(a^2/2) (slowly
// varying, 0.5 at 0 to 0.05 at 8), on [0, 8) in 16 pieces of width 1/2:
// R(a) = C0 + t(C1 + ... t C5), t = a - k/2, looked up per lane like erf.
alignas(64) constexpr float kGeluPw[6][16] = {
    {0x1.fffffcp-2f, 0x1.66027ap-2f, 0x1.0bdb2ep-2f, 0x1.a57056p-3f, 0x1.5845dcp-3f, 0x1.217252p-3f, 0x1.f1b89cp-4f, 0x1.b396fap-4f,
     0x1.82b4bcp-4f, 0x1.5b5acep-4f, 0x1.3b0fbcp-4f, 0x1.201faap-4f, 0x1.095608p-4f, 0x1.eba5fep-5f, 0x1.c9e12p-5f, 0x1.ac6292p-5f},
    {-0x1.988236p-2f, -0x1.cb0514p-3f, -0x1.195202p-3f, -0x1.71c04ap-4f, -0x1.00f94ap-4f, -0x1.75ab0cp-5f, -0x1.19cedp-5f, -0x1.b603ccp-6f,
     -0x1.5cfa26p-6f, -0x1.1be3ecp-6f, -0x1.d612c6p-7f, -0x1.8b1be8p-7f, -0x1.506664p-7f, -0x1.21ae08p-7f, -0x1.f7d2e8p-8f, -0x1.b9f82cp-8f},
    {0x1.ffa07ep-3f, 0x1.e64d7p-4f, 0x1.fca86cp-5f, 0x1.203996p-5f, 0x1.5d082ep-6f, 0x1.bf2004p-7f, 0x1.2bfec8p-7f, 0x1.a2acfap-8f,
     0x1.2e02e2p-8f, 0x1.c04a06p-9f, 0x1.53a32p-9f, 0x1.08852ep-9f, 0x1.9fc4b6p-10f, 0x1.4e60c6p-10f, 0x1.0fb906p-10f, 0x1.bfdf5ap-11f},
    {-0x1.0d3202p-3f, -0x1.be45d4p-5f, -0x1.98b324p-6f, -0x1.982daep-7f, -0x1.b354d6p-8f, -0x1.f369dcp-9f, -0x1.2dba74p-9f, -0x1.7f74bap-10f,
     -0x1.fd6d9p-11f, -0x1.61ed06p-11f, -0x1.c71e46p-12f, -0x1.73b878p-12f, -0x1.c63cp-13f, -0x1.6f869cp-13f, -0x1.04340ap-13f, -0x1.90937cp-14f},
    {0x1.ce77e2p-5f, 0x1.59099ep-6f, 0x1.1c23f6p-7f, 0x1.00c12ap-8f, 0x1.d6adcep-10f, 0x1.f3492ap-11f, 0x1.1526f2p-11f, 0x1.53dfa6p-12f,
     0x1.ccf52cp-13f, 0x1.68bf08p-13f, 0x1.c28ce6p-16f, 0x1.d3e33ep-14f, -0x1.4e39fap-16f, 0x1.9be47ap-17f, -0x1.cc6bacp-17f, -0x1.b747ecp-17f},
    {-0x1.e91352p-7f, -0x1.568834p-8f, -0x1.0720dep-9f, -0x1.c0b69p-11f, -0x1.3e496p-12f, -0x1.50fef4p-13f, -0x1.675fb2p-14f, -0x1.fc99fp-15f,
     -0x1.c220e6p-15f, -0x1.f3104ep-15f, 0x1.e9ef26p-16f, -0x1.c61cd4p-15f, 0x1.4b2d84p-15f, 0x1.ddf9f8p-18f, 0x1.82a482p-16f, 0x1.44808cp-16f}};
// The same R(a) on [0, 8] as one rational function, P(a) / Q(a) with P of
// degree 4 and Q of degree 5 (Q(0) = 1), all coefficients positive: for
// levels where the 16-piece lookups are expensive (AVX2). Fit error of R
// 1.3e-9 relative; evaluated in float32 4.4 x 2^-24 (tools/fit_coeffs.py).
constexpr float kGeluRP0 = 0.5f, kGeluRP1 = 0x1.abe99ap-2f, kGeluRP2 = 0x1.590f4ap-3f, kGeluRP3 = 0x1.24e3bp-5f,
                kGeluRP4 = 0x1.bf69acp-9f;
constexpr float kGeluRQ1 = 0x1.a236f4p+0f, kGeluRQ2 = 0x1.23f3ap+0f, kGeluRQ3 = 0x1.b8eb58p-2f,
                kGeluRQ4 = 0x1.6f2694p-4f, kGeluRQ5 = 0x1.185c5cp-7f;
// erf without table lookups (erf_rational, the AVX2 level): erf(a) =
// a P(a^2) / Q(a^2) with P and Q of degree 5 (Q0 = 1), all coefficients
// positive, a fit of the relative error on [0, 3.92] (0.31 x 2^-24 before
// rounding to float; tools/fit_coeffs.py), then moved by an ulp or two on a
// search of the float32 evaluation. From kErfOne on erf rounds to 1.
constexpr float kErfRP0 = 0x1.20dd74p+0f, kErfRP1 = 0x1.85f168p-3f, kErfRP2 = 0x1.b01c88p-5f,
                kErfRP3 = 0x1.ed894p-9f, kErfRP4 = 0x1.2ab588p-12f, kErfRP5 = 0x1.1326e6p-19f;
constexpr float kErfRQ1 = 0x1.010f92p-1f, kErfRQ2 = 0x1.d361f2p-4f, kErfRQ3 = 0x1.ea7f02p-7f,
                kErfRQ4 = 0x1.30bbd2p-10f, kErfRQ5 = 0x1.3f8708p-15f;
constexpr float kErfOne = 0x1.f5a88ap+1f;  // 3.9192059: erfc below 2^-25
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
// tan(r) = r + r^3 * P(r^2), |r| <= pi/4
constexpr float kTan0 = 0x1.55556p-2f, kTan1 = 0x1.110d9ap-3f, kTan2 = 0x1.badadap-5f,
                kTan3 = 0x1.5cb2fp-6f, kTan4 = 0x1.631d02p-7f, kTan5 = 0x1.634ffp-14f,
                kTan6 = 0x1.1f09bp-8f;
// pi/4 as hi + lo (pi/2 is kPio2_1 + kPio2_2; acos takes pi as twice that).
constexpr float kPio4_1 = 0x1.921fb6p-1f, kPio4_2 = -0x1.777a5cp-26f;
// asin(s) = s + s^3 * P(s^2), s in [0, 1/2]
constexpr float kAsin0 = 0x1.5555cap-3f, kAsin1 = 0x1.330162p-4f, kAsin2 = 0x1.748c0ep-5f,
                kAsin3 = 0x1.8b970cp-6f, kAsin4 = 0x1.59effcp-5f;
// atan(t) = t + t^3 * P(t^2), |t| <= 1/2
constexpr float kAtan0 = -0x1.555512p-2f, kAtan1 = 0x1.997b0cp-3f, kAtan2 = -0x1.224a2ap-3f,
                kAtan3 = 0x1.a00126p-4f, kAtan4 = -0x1.a3ee64p-5f;
// tan(3 pi / 8): atan reduces a above it with -1 / a.
constexpr float kTan3Pio8 = 0x1.3504f4p+1f;
// asinh / acosh: from here on log(2a) (the next term, 1/(4a^2), is below
// 2e-9 relative).
constexpr float kAsinhBig = 4096.0f;
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

// Piece index for the 16-piece tables: k = floor(min(a * scale, 15)) and
// t = a - k / scale (exact: Sterbenz); scale is 2 or 4. A NaN a gives a NaN
// t (and any index).
template <class O>
OLC_VM_INLINE typename O::I piece16(typename O::V a, float scale, typename O::V* t) {
  const typename O::V kf = O::trunc(O::min_(O::f(15.0f), O::mul(a, O::f(scale))));
  *t = O::fma(kf, O::f(-1.0f / scale), a);
  return O::cvtti(kf);
}

// Reduce x = n*ln2 + r and return e^r (in [0.7, 1.42]) and n (as a float).
// Needs |x| small enough that n fits comfortably (callers clamp to ~[-104, 89]).
// biased_out (optional): n + 1.5 * 2^23, whose low bits hold n as an integer
// (see scale2_biased).
template <class O>
OLC_VM_INLINE typename O::V exp_reduced(typename O::V x, typename O::V* n_out, typename O::V* biased_out = nullptr) {
  typedef typename O::V V;
  const V biased = O::fma(x, O::f(kLog2e), O::f(kRound));
  if (biased_out) *biased_out = biased;
  const V n = O::sub(biased, O::f(kRound));
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

// p * 2^n for a normal result, n taken from exp_reduced's biased value:
// since 1.5 * 2^23's bit pattern ends in 23 zero bits, biased's bits
// shifted left by 23 are n << 23, which added to p's bits moves p's
// exponent by n. Exact (the same bits as the multiply by 2^n) whenever
// the result is normal; two integer operations instead of a conversion,
// two integer operations and a multiply.
template <class O>
OLC_VM_INLINE typename O::V scale2_biased(typename O::V p, typename O::V biased) {
  return O::cf(O::iadd(O::ci(p), O::template sll<23>(O::ci(biased))));
}

// exp for arguments whose result is a normal float (about [-87.3, 88.3]);
// not NaN (the exponent-field scaling would not keep it a NaN).
template <class O>
OLC_VM_INLINE typename O::V exp_normal(typename O::V x) {
  typename O::V n, biased;
  const typename O::V p = exp_reduced<O>(x, &n, &biased);
  if constexpr (O::kScalef) {
    return O::scalef(p, n);
  } else {
    return scale2_biased<O>(p, biased);
  }
}

template <class O>
OLC_VM_INLINE typename O::V exp(typename O::V x) {
  // Past these bounds the result is 0 / +inf anyway; NaN passes the clamp.
  typename O::V n, biased;
  const typename O::V p = exp_reduced<O>(vclamp<O>(x, -104.0f, 89.0f), &n, &biased);
  if constexpr (!O::kScalef) {
    // p is in [0.7, 1.42] (exponent field 126 or 127): for n in [-125,
    // 125] p * 2^n is normal. Only vectors with a lane outside need the
    // general scaling (subnormal results, overflow, NaN).
    if (!O::any(O::nge(O::f(125.0f), vabs<O>(n)))) return scale2_biased<O>(p, biased);
  }
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

// log1p without special-value handling (x > -1, finite or NaN): log(u)
// with u = 1 + x as rounded, corrected by the rounding error x - (u - 1).
// eadj is added to u's exponent (asinh/acosh take log(2a) as log(a) with
// eadj = 1, so 2a never overflows).
template <class O>
OLC_VM_INLINE typename O::V log1p_core(typename O::V x, typename O::V u, typename O::I eadj) {
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
  const V ef = O::cvt(O::iadd(e, eadj));
  const V y = log1p_reduced<O>(f);
  return O::fma(ef, O::f(kLn2Hi), O::add(y, O::fma(ef, O::f(kLn2Lo), corr)));
}

template <class O>
OLC_VM_INLINE typename O::V log1p_core(typename O::V x, typename O::V u) {
  return log1p_core<O>(x, u, O::i(0));
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
  V t;
  const I k = piece16<O>(a, 2.0f, &t);
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

// The numerator and denominator of a rational function, P(x) and Q(x) by
// Horner's rule with the two (independent) chains interleaved step by
// step; coefficients from the highest degree down, at least two each.
template <class O, int NP, int NQ>
OLC_VM_INLINE void horner2(typename O::V x, const float (&P)[NP], const float (&Q)[NQ], typename O::V* p,
                           typename O::V* q) {
  static_assert(NP >= 2 && NQ >= 2, "degree 1 at least");
  typename O::V pv = O::fma(x, O::f(P[0]), O::f(P[1]));
  typename O::V qv = O::fma(x, O::f(Q[0]), O::f(Q[1]));
#pragma GCC unroll 16
  for (int i = 2; i < (NP > NQ ? NP : NQ); ++i) {
    if (i < NP) pv = O::fma(x, pv, O::f(P[i]));
    if (i < NQ) qv = O::fma(x, qv, O::f(Q[i]));
  }
  *p = pv;
  *q = qv;
}

// tanh for levels where a 16-entry lookup is expensive (AVX2: two vpermps
// and a blend for each of the eight coefficients): two degree-4
// polynomials and one division, no lookups. NaN passes the clamp.
template <class O>
OLC_VM_INLINE typename O::V tanh_rational(typename O::V x) {
  typedef typename O::V V;
  const V a = O::min_(O::f(kTanhRatClamp), vabs<O>(x));
  const V u = O::mul(a, a);
  V p, q;
  horner2<O>(u, {kTanhRP4, kTanhRP3, kTanhRP2, kTanhRP1, 1.0f}, {kTanhRQ4, kTanhRQ3, kTanhRQ2, kTanhRQ1, 1.0f}, &p, &q);
  const V y = O::div(O::mul(a, p), q);
  return vor<O>(y, vsign<O>(x));
}

template <class O>
OLC_VM_INLINE typename O::V sigmoid(typename O::V x) {
  typedef typename O::V V;
  // e = exp(-|x|) never overflows; x >= 0: 1/(1+e), x < 0: e/(1+e), so
  // large negative x keeps full relative accuracy down to subnormals.
  // Without vscalefps the full exp's range handling costs a sixth of the
  // function: take it only for a vector that reaches past -87 (e subnormal).
  const V na = vor<O>(x, O::f(-0.0f));  // -|x|
  V e;
  if constexpr (O::kScalef) {
    e = exp<O>(na);
  } else {
    // x < -87 (e subnormal) or NaN: exp_normal's exponent-field scaling
    // cannot take those; one unordered compare finds both.
    if (O::any(O::nge(na, O::f(-87.0f)))) {
      e = exp<O>(na);
    } else {
      e = exp_normal<O>(na);
    }
  }
  // e where x's sign is set: for -0 e is 1 anyway, and a NaN gives NaN
  // either way (no compare needed).
  const V num = O::selneg(x, e, O::f(1.0f));
  return O::div(num, O::add(O::f(1.0f), e));
}

template <class O>
OLC_VM_INLINE typename O::V erf(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::I I;
  const V a = vabs<O>(x);
  V t;
  const I k = piece16<O>(a, 4.0f, &t);
  V y = O::fma(t, O::lut16(kErfPw[5], k), O::lut16(kErfPw[4], k));
  y = O::fma(t, y, O::lut16(kErfPw[3], k));
  y = O::fma(t, y, O::lut16(kErfPw[2], k));
  y = O::fma(t, y, O::lut16(kErfPw[1], k));
  y = O::fma(t, y, O::lut16(kErfPw[0], k));
  // erf rounds to 1 from 3.86 on; the pieces end at 4
  y = O::sel(O::ge(a, O::f(4.0f)), O::f(1.0f), y);
  return vor<O>(y, vsign<O>(x));
}

// erf for levels where a 16-entry lookup is expensive (AVX2: two vpermps
// and a blend for each of the six coefficients): two degree-5 polynomials
// in a^2 and one division. Past kErfOne (inf included) the result is 1,
// which also hides the overflow of a^2 for huge a; NaN propagates.
template <class O>
OLC_VM_INLINE typename O::V erf_rational(typename O::V x) {
  typedef typename O::V V;
  const V a = vabs<O>(x);
  const V u = O::mul(a, a);
  V p, q;
  horner2<O>(u, {kErfRP5, kErfRP4, kErfRP3, kErfRP2, kErfRP1, kErfRP0},
             {kErfRQ5, kErfRQ4, kErfRQ3, kErfRQ2, kErfRQ1, 1.0f}, &p, &q);
  V y = O::div(O::mul(a, p), q);
  y = O::sel(O::ge(a, O::f(kErfOne)), O::f(1.0f), y);
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

// GELU from a = min(|x|, 8) and r = R(a) (see kGeluPw): x * Phi(x) with
// E = Phi(-|x|) = exp(-a^2/2) R(a): Phi(x) = E for x < 0 and 1 - E for
// x >= 0, so the negative side keeps relative accuracy. a is clamped to 8
// (Phi(-8) = 6e-16, so 1 - E = 1 there; inf stays out). NaN x gives a = 8:
// the NaN then reaches the result only through x, so its bits do not depend
// on the operand order the compiler picks.
template <class O>
OLC_VM_INLINE typename O::V gelu_from_r(typename O::V x, typename O::V a, typename O::V r) {
  typedef typename O::V V;
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
OLC_VM_INLINE typename O::V gelu_erf(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::I I;
  const V a = O::min_(vabs<O>(x), O::f(8.0f));
  V t;
  const I k = piece16<O>(a, 2.0f, &t);
  V r = O::fma(t, O::lut16(kGeluPw[5], k), O::lut16(kGeluPw[4], k));
  r = O::fma(t, r, O::lut16(kGeluPw[3], k));
  r = O::fma(t, r, O::lut16(kGeluPw[2], k));
  r = O::fma(t, r, O::lut16(kGeluPw[1], k));
  r = O::fma(t, r, O::lut16(kGeluPw[0], k));
  return gelu_from_r<O>(x, a, r);
}

// gelu_erf with R(a) as the rational kGeluRP / kGeluRQ: no lookups (the
// 16-piece table costs two vpermps and a blend per coefficient at AVX2),
// one division; about 40 % less time there.
template <class O>
OLC_VM_INLINE typename O::V gelu_erf_rational(typename O::V x) {
  typedef typename O::V V;
  const V a = O::min_(vabs<O>(x), O::f(8.0f));
  V p, q;
  horner2<O>(a, {kGeluRP4, kGeluRP3, kGeluRP2, kGeluRP1, kGeluRP0},
             {kGeluRQ5, kGeluRQ4, kGeluRQ3, kGeluRQ2, kGeluRQ1, 1.0f}, &p, &q);
  return gelu_from_r<O>(x, a, O::div(p, q));
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

// x = q pi/2 + r, |r| <= pi/4 (Cody-Waite, three parts of pi/2, for
// |x| <= kTrigFastMax); returns r, and q + q_add in *qi.
template <class O>
OLC_VM_INLINE typename O::V trig_reduce(typename O::V x, int32_t q_add, typename O::I* qi) {
  typedef typename O::V V;
  const V t = O::fma(x, O::f(kTwoOverPi), O::f(kRound));
  const V q = O::sub(t, O::f(kRound));
  *qi = O::iadd(O::isub(O::ci(t), O::i(kRoundBits)), O::i(q_add));
  V r = O::fma(q, O::f(-kPio2_1), x);
  r = O::fma(q, O::f(-kPio2_2), r);
  return O::fma(q, O::f(-kPio2_3), r);
}

// sin(r) and cos(r) for |r| <= pi/4, r2 = r * r.
template <class O>
OLC_VM_INLINE typename O::V sin_poly(typename O::V r, typename O::V r2) {
  typedef typename O::V V;
  V s = O::fma(r2, O::f(kSin3), O::f(kSin2));
  s = O::fma(r2, s, O::f(kSin1));
  s = O::fma(r2, s, O::f(kSin0));
  return O::fma(O::mul(r2, r), s, r);
}
template <class O>
OLC_VM_INLINE typename O::V cos_poly(typename O::V r2) {
  typedef typename O::V V;
  V c = O::fma(r2, O::f(kCos3), O::f(kCos2));
  c = O::fma(r2, c, O::f(kCos1));
  c = O::fma(r2, c, O::f(kCos0));
  return O::fma(O::mul(r2, r2), c, O::fma(r2, O::f(-0.5f), O::f(1.0f)));
}

// Lanes with |x| > kTrigFastMax, inf or NaN: y = f(x) in double libm
// (exact reduction), lane by lane. kind: 0 sin, 1 cos, 2 tan.
template <class O>
OLC_VM_INLINE typename O::V trig_slow_lanes(typename O::V x, typename O::V y, int kind) {
  const typename O::M slow = O::mnot(O::le(vabs<O>(x), O::f(kTrigFastMax)));
  if (O::any(slow)) {
    float xs[O::N], ys[O::N];
    O::store(xs, x);
    O::store(ys, y);
    const unsigned bits = O::bits(slow);
    for (int k = 0; k < O::N; ++k) {
      if (bits & (1u << k)) {
        const double d = static_cast<double>(xs[k]);
        ys[k] = static_cast<float>(kind == 0 ? std::sin(d) : kind == 1 ? std::cos(d) : std::tan(d));
      }
    }
    y = O::load(ys);
  }
  return y;
}

// Shared by sin and cos: q_add = 0 gives sin, 1 gives cos.
template <class O>
OLC_VM_INLINE typename O::V sincos(typename O::V x, int32_t q_add) {
  typedef typename O::V V;
  typedef typename O::I I;
  I qi;
  const V r = trig_reduce<O>(x, q_add, &qi);
  const V r2 = O::mul(r, r);
  const V s = sin_poly<O>(r, r2);
  const V c = cos_poly<O>(r2);
  V y = O::sel(O::itest(qi, O::i(1)), c, s);
  y = vxor<O>(y, O::cf(O::template sll<30>(O::iand(qi, O::i(2)))));
  return trig_slow_lanes<O>(x, y, q_add);
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

// tan(r + q pi/2) = tan(r) for even q, -1/tan(r) for odd q; tan(r) from
// its own polynomial.
template <class O>
OLC_VM_INLINE typename O::V tan(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::I I;
  I qi;
  const V r = trig_reduce<O>(x, 0, &qi);
  const V z = O::mul(r, r);
  V p = O::fma(z, O::f(kTan6), O::f(kTan5));
  p = O::fma(z, p, O::f(kTan4));
  p = O::fma(z, p, O::f(kTan3));
  p = O::fma(z, p, O::f(kTan2));
  p = O::fma(z, p, O::f(kTan1));
  p = O::fma(z, p, O::f(kTan0));
  const V t = O::fma(O::mul(z, r), p, r);
  V y = O::sel(O::itest(qi, O::i(1)), O::div(O::f(-1.0f), t), t);
  y = trig_slow_lanes<O>(x, y, 2);
  return O::sel(O::eq(x, O::f(0.0f)), x, y);  // tan(-0) = -0 (the reduction gives +0)
}

// ---- inverse trigonometric ----

// asin(s) = s + s z P(z): s in [0, 1/2] with z = s^2, or s = sqrt(z).
template <class O>
OLC_VM_INLINE typename O::V asin_poly(typename O::V s, typename O::V z) {
  typedef typename O::V V;
  V p = O::fma(z, O::f(kAsin4), O::f(kAsin3));
  p = O::fma(z, p, O::f(kAsin2));
  p = O::fma(z, p, O::f(kAsin1));
  p = O::fma(z, p, O::f(kAsin0));
  return O::fma(O::mul(s, z), p, s);
}

// a = |x| (or NaN). For a <= 1/2 returns asin(a); above, sets *big and
// returns r = asin(sqrt((1 - a) / 2)), so that asin(a) = pi/2 - 2r
// ((1 - a) / 2 is exact there, one FMA; a > 1 gives a NaN r). The square
// root takes that operand directly, not the selected z, so it starts as
// early as it can.
template <class O>
OLC_VM_INLINE typename O::V asin_reduced(typename O::V a, typename O::M* big) {
  typedef typename O::V V;
  const typename O::M b = O::gt(a, O::f(0.5f));
  const V zb = O::fma(a, O::f(-0.5f), O::f(0.5f));
  const V z = O::sel(b, zb, O::mul(a, a));
  const V s = O::sel(b, O::sqrt(zb), a);
  *big = b;
  return asin_poly<O>(s, z);
}

template <class O>
OLC_VM_INLINE typename O::V asin(typename O::V x) {
  typedef typename O::V V;
  typename O::M big;
  const V r = asin_reduced<O>(vabs<O>(x), &big);
  // pi/2 - 2r: the first subtraction is exact where the result is small
  // (2r >= pi/4, Sterbenz); the low part of pi/2 is added after.
  const V yb = O::add(O::fma(r, O::f(-2.0f), O::f(kPio2_1)), O::f(kPio2_2));
  return vor<O>(O::sel(big, yb, r), vsign<O>(x));
}

// |x| <= 1/2: pi/2 - asin(x); x > 1/2: 2r; x < -1/2: pi - 2r. All three
// are k pi/2 + m r, the low part of k pi/2 added to the exact m r first:
// (k, m) = (1, -sign(x)), (0, 2), (2, -2). pi = 2 (pi/2) in both parts, so
// k pi/2 is exact, and the results are >= pi/3 wherever k != 0. One
// expression instead of three selected keeps the operation count (what
// bounds this loop on AVX2) low.
template <class O>
OLC_VM_INLINE typename O::V acos(typename O::V x) {
  typedef typename O::V V;
  const V a = vabs<O>(x);
  typename O::M big;
  const V r = asin_reduced<O>(a, &big);
  const V m = vxor<O>(O::sel(big, O::f(2.0f), O::f(-1.0f)), vxor<O>(x, a));  // sign(x) flips m
  const V k = O::sel(big, O::fma(m, O::f(-0.5f), O::f(1.0f)), O::f(1.0f));
  return O::fma(k, O::f(kPio2_1), O::fma(r, m, O::mul(k, O::f(kPio2_2))));
}

template <class O>
OLC_VM_INLINE typename O::V atan(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::M M;
  const V a = vabs<O>(x);
  // atan(a) = off + atan(t): a <= 1/2: t = a; up to tan(3pi/8):
  // t = (a - 1)/(a + 1), off = pi/4; beyond: t = -1/a, off = pi/2. One
  // division either way, |t| <= 1/2. NaN takes the first branch.
  const M m1 = O::gt(a, O::f(0.5f));
  const M m2 = O::gt(a, O::f(kTan3Pio8));
  const V num = O::sel(m2, O::f(-1.0f), O::sel(m1, O::sub(a, O::f(1.0f)), a));
  const V den = O::sel(m2, a, O::sel(m1, O::add(a, O::f(1.0f)), O::f(1.0f)));
  const V off_hi = O::sel(m2, O::f(kPio2_1), O::sel(m1, O::f(kPio4_1), O::f(0.0f)));
  const V off_lo = O::sel(m2, O::f(kPio2_2), O::sel(m1, O::f(kPio4_2), O::f(0.0f)));
  const V t = O::div(num, den);
  const V z = O::mul(t, t);
  V p = O::fma(z, O::f(kAtan4), O::f(kAtan3));
  p = O::fma(z, p, O::f(kAtan2));
  p = O::fma(z, p, O::f(kAtan1));
  p = O::fma(z, p, O::f(kAtan0));
  const V lo = O::fma(O::mul(t, z), p, off_lo);
  const V y = O::add(off_hi, O::add(t, lo));
  return vor<O>(y, vsign<O>(x));
}

// ---- hyperbolic ----

template <class O>
OLC_VM_INLINE typename O::V sinh(typename O::V x) {
  typedef typename O::V V;
  const V a = vabs<O>(x);
  // (e^a - e^-a)/2 = (m + m/(m + 1))/2 with m = e^a - 1: no cancellation
  // near 0. NaN passes the min.
  const V m = expm1<O>(O::min_(O::f(88.0f), a));
  V y = O::mul(O::add(m, O::div(m, O::add(m, O::f(1.0f)))), O::f(0.5f));
  // Past 88 e^a overflows before sinh does (at 89.42): e^a/2 = p 2^(n-1),
  // rounded once.
  const typename O::M big = O::gt(a, O::f(88.0f));
  if (O::any(big)) {
    V n;
    const V p = exp_reduced<O>(O::min_(O::f(90.0f), a), &n);
    y = O::sel(big, scale2<O>(p, O::sub(n, O::f(1.0f))), y);
  }
  return vor<O>(y, vsign<O>(x));
}

template <class O>
OLC_VM_INLINE typename O::V cosh(typename O::V x) {
  typedef typename O::V V;
  // h = e^a/2 = p 2^(n-1) (finite up to a = 89.42); cosh = h + (1/4)/h.
  V n;
  const V p = exp_reduced<O>(O::min_(O::f(90.0f), vabs<O>(x)), &n);
  const V h = scale2<O>(p, O::sub(n, O::f(1.0f)));
  return O::add(h, O::div(O::f(0.25f), h));
}

template <class O>
OLC_VM_INLINE typename O::V asinh(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::M M;
  const V a = vabs<O>(x);
  // a < 2^12: log1p(a + a^2/(1 + sqrt(1 + a^2))) (exact in form, no
  // cancellation, relative accuracy near 0). From 2^12: log(2a), taken as
  // log1p_core(a - 1, a) with one more in the exponent (a - 1 is exact below
  // 2^24 and the correction term is 0 above).
  const M big = O::ge(a, O::f(kAsinhBig));
  const V a2 = O::mul(a, a);
  const V v = O::add(a, O::div(a2, O::add(O::f(1.0f), O::sqrt(O::add(O::f(1.0f), a2)))));
  const V xs = O::sel(big, O::sub(a, O::f(1.0f)), v);
  const V us = O::sel(big, a, O::add(v, O::f(1.0f)));
  V y = log1p_core<O>(xs, us, O::seli(big, O::i(1), O::i(0)));
  y = O::sel(O::lt(a, O::f(INFINITY)), y, a);  // inf stays inf, NaN stays NaN
  return vor<O>(y, vsign<O>(x));
}

template <class O>
OLC_VM_INLINE typename O::V acosh(typename O::V x) {
  typedef typename O::V V;
  typedef typename O::M M;
  // t = x - 1 is exact for x in [1, 2^24]. Below 2^12:
  // log1p(t + sqrt(t^2 + 2t)) (no cancellation near 1); from 2^12 log(2x)
  // as in asinh.
  const V t = O::sub(x, O::f(1.0f));
  const M big = O::ge(x, O::f(kAsinhBig));
  const V v = O::add(t, O::sqrt(O::fma(t, t, O::add(t, t))));
  const V xs = O::sel(big, t, v);
  const V us = O::sel(big, x, O::add(v, O::f(1.0f)));
  V y = log1p_core<O>(xs, us, O::seli(big, O::i(1), O::i(0)));
  y = O::sel(O::lt(x, O::f(1.0f)), O::f(NAN), y);
  y = O::sel(O::eq(x, O::f(INFINITY)), x, y);
  return O::sel(O::unord(x, x), O::add(x, x), y);
}

template <class O>
OLC_VM_INLINE typename O::V atanh(typename O::V x) {
  typedef typename O::V V;
  const V a = vabs<O>(x);
  // atanh(a) = log1p(w)/2, w = 2a/(1 - a). Below 1/2, where 1 - a rounds,
  // w = 2a + a q (q = 2a/(1 - a), one rounding) keeps the leading 2a exact.
  // a = 1 gives w = inf, a > 1 a w below -1 (NaN from log1p).
  const V q = O::div(O::add(a, a), O::sub(O::f(1.0f), a));
  const V w = O::sel(O::lt(a, O::f(0.5f)), O::fma(a, q, O::add(a, a)), q);
  const V y = O::mul(log1p<O>(w), O::f(0.5f));
  return vor<O>(y, vsign<O>(x));
}

// mish(x) = x tanh(log(1 + e^x)) = x n/(n + 2) with n = e^x (e^x + 2): no
// tanh, no log. e^x is taken at x clamped to [-80, 20]: from 9.1 on the
// ratio rounds to 1, so x passes through (inf too). A NaN x is clamped to
// 20 (exp_normal needs a normal result); the NaN reaches y through x.
template <class O>
OLC_VM_INLINE typename O::V mish(typename O::V x) {
  typedef typename O::V V;
  const V e = exp_normal<O>(O::max_(O::min_(x, O::f(20.0f)), O::f(-80.0f)));
  const V n = O::fma(e, e, O::add(e, e));  // e^2 + 2e, one rounding
  V y = O::mul(x, O::div(n, O::add(n, O::f(2.0f))));
  // Below -80 mish(x) = x e^x to float precision (e^x < 2e-35): x p 2^k with
  // e^x = p 2^k, rounded once, so results near and below the subnormal
  // range keep their bits. x is clamped at -110 (the result rounds to -0
  // there; -inf gives -0, the limit); 2^k then needs the two-step scale of
  // scale2 with k down to -159, which it handles since x p stays above 56.
  const typename O::M tail = O::lt(x, O::f(-80.0f));
  if (O::any(tail)) {
    const V xt = O::max_(x, O::f(-110.0f));
    V k;
    const V p = exp_reduced<O>(xt, &k);
    y = O::sel(tail, scale2<O>(O::mul(xt, p), k), y);
  }
  return y;
}

// Two vectors per operation: OpsPair<O> is an ops interface whose vector is
// a pair of O's, each operation issued for both halves back to back. Every
// function above then runs on two vectors with their instructions
// interleaved. On cores whose out-of-order window cannot see past one
// vector's dependency chain (exp + division, a polynomial per piece), two
// chains side by side fill the pipes. A per-vector branch (any) takes the
// slow side when either half needs it; the slow sides give the same bits
// on the lanes that did not need them, so the results do not change.
// Functions that read lanes one by one (bits: the trigonometric slow path)
// do not compile against it.
template <class O>
struct OpsPair {
  struct V { typename O::V a, b; };
  struct I { typename O::I a, b; };
  struct M { typename O::M a, b; };
  enum { N = 2 * O::N };
  static constexpr bool kScalef = O::kScalef;
  static OLC_VM_INLINE V f(float x) { const typename O::V v = O::f(x); return {v, v}; }
  static OLC_VM_INLINE I i(int32_t x) { const typename O::I v = O::i(x); return {v, v}; }
#define OLC_VM_PAIR_1(R, name, A) \
  static OLC_VM_INLINE R name(A a) { return {O::name(a.a), O::name(a.b)}; }
#define OLC_VM_PAIR_2(R, name, A, B) \
  static OLC_VM_INLINE R name(A a, B b) { return {O::name(a.a, b.a), O::name(a.b, b.b)}; }
#define OLC_VM_PAIR_3(R, name, A, B, C) \
  static OLC_VM_INLINE R name(A a, B b, C c) { return {O::name(a.a, b.a, c.a), O::name(a.b, b.b, c.b)}; }
  OLC_VM_PAIR_2(V, add, V, V) OLC_VM_PAIR_2(V, sub, V, V) OLC_VM_PAIR_2(V, mul, V, V) OLC_VM_PAIR_2(V, div, V, V)
  OLC_VM_PAIR_1(V, sqrt, V) OLC_VM_PAIR_3(V, fma, V, V, V) OLC_VM_PAIR_3(V, fms, V, V, V) OLC_VM_PAIR_1(V, trunc, V)
  OLC_VM_PAIR_2(V, min_, V, V) OLC_VM_PAIR_2(V, max_, V, V) OLC_VM_PAIR_1(I, ci, V) OLC_VM_PAIR_1(V, cf, I)
  OLC_VM_PAIR_2(I, iadd, I, I) OLC_VM_PAIR_2(I, isub, I, I) OLC_VM_PAIR_2(I, iand, I, I)
  OLC_VM_PAIR_2(I, ior, I, I) OLC_VM_PAIR_2(I, ixor, I, I) OLC_VM_PAIR_2(I, imax, I, I)
  OLC_VM_PAIR_1(V, cvt, I) OLC_VM_PAIR_1(I, cvti, V) OLC_VM_PAIR_1(I, cvtti, V)
  OLC_VM_PAIR_2(M, lt, V, V) OLC_VM_PAIR_2(M, le, V, V) OLC_VM_PAIR_2(M, gt, V, V) OLC_VM_PAIR_2(M, ge, V, V)
  OLC_VM_PAIR_2(M, eq, V, V) OLC_VM_PAIR_2(M, unord, V, V) OLC_VM_PAIR_2(M, nge, V, V) OLC_VM_PAIR_1(M, mnot, M)
  OLC_VM_PAIR_2(M, itest, I, I) OLC_VM_PAIR_2(M, mand, M, M) OLC_VM_PAIR_3(V, sel, M, V, V)
  OLC_VM_PAIR_3(V, selneg, V, V, V) OLC_VM_PAIR_3(I, seli, M, I, I) OLC_VM_PAIR_1(V, opaque, V)
  OLC_VM_PAIR_2(V, scalef, V, V)
#undef OLC_VM_PAIR_1
#undef OLC_VM_PAIR_2
#undef OLC_VM_PAIR_3
  template <int S> static OLC_VM_INLINE I sll(I a) { return {O::template sll<S>(a.a), O::template sll<S>(a.b)}; }
  template <int S> static OLC_VM_INLINE I sra(I a) { return {O::template sra<S>(a.a), O::template sra<S>(a.b)}; }
  static OLC_VM_INLINE V lut16(const float* tab, I idx) { return {O::lut16(tab, idx.a), O::lut16(tab, idx.b)}; }
  static OLC_VM_INLINE bool any(M m) { return O::any(m.a) || O::any(m.b); }
};

}  // namespace olc_vm
}  // namespace

#endif  // OLC_VMATH_IMPL_H_
