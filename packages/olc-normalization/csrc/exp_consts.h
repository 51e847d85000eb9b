// Constants of the family's float32 exp (see "exp accuracy" in README.md).
// Plain constexpr data, safe to include from every ISA TU.
//
// exp(x) for x <= 0: n = round(x / ln 2), r = x - n ln 2 (ln 2 split in a
// high part with trailing zero bits, so n * kLn2Hi is exact for |n| <= 126,
// and a low part), |r| <= ln(2) / 2; exp(r) = 1 + r + r^2 q(r) with q of
// degree 3 fitted here for least relative error on that interval (1.06e-7
// relative in exact arithmetic; evaluated in float32 by Horner's rule the
// polynomial is within 3.0 half-ulps over a dense grid); then scaled by
// 2^n. (Degree 4 gives 1.4 half-ulps for one more FMA; in a softmax the
// float32 rounding of x - max, up to 2^-24 |x - max|, dominates either.)
// Scalar and AVX2: x below kLo (exp(x) < FLT_MIN) gives 0, an absolute
// error under 1.2e-38, invisible in a softmax whose sum is at least 1.
// AVX-512 clamps at kLoScalef instead and lets scalef round the subnormal
// results (and underflow to 0).
#ifndef OLC_NORMALIZATION_EXP_CONSTS_H_
#define OLC_NORMALIZATION_EXP_CONSTS_H_

namespace olc_norm {
namespace expc {

constexpr float kLo = -87.33654475f;  // ln(FLT_MIN)
constexpr float kLog2e = 1.44269504088896341f;
// 1.5 * 2^23: adding it to t (|t| < 2^22) rounds t to an integer, held in
// the sum's low mantissa bits.
constexpr float kRoundMagic = 12582912.0f;
constexpr float kLn2Hi = 0.693145751953125f;     // 0x3f317200
constexpr float kLn2Lo = 1.428606820309417e-06f;  // ln 2 - kLn2Hi
constexpr float kLoScalef = -150.0f;  // exp(-150) underflows to 0 in float32
constexpr float kC5 = 0.008312417194247246f;
constexpr float kC4 = 0.04189098998904228f;
constexpr float kC3 = 0.16667118668556213f;
constexpr float kC2 = 0.4999922513961792f;

// Rows of a 16-bit type (see eng_exp_doubt in row_engine.inc): a lane's
// float32 exp e decides its rounding to the type unless e lies within
// kDoubtUlps float32 ulps of a midpoint between two values of the type
// (exp_nonpos is within 1.5 ulps of the exact value, which is within 0.5
// ulp of its float32 rounding). float16: the low 13 bits of e's float32
// pattern against 0x1000, after adding kF16MinNormal to an e below it (so
// that those bits hold e's position on the subnormal grid 2^-24, up to
// that addition's half ulp); bfloat16: the low 16 bits against 0x8000, and
// every lane whose argument is in (kBF16ExpLo, kLo), where e is below
// FLT_MIN but exp does not round to 0 in bfloat16.
constexpr int kDoubtUlps = 4;
constexpr float kF16MinNormal = 6.103515625e-05f;  // 2^-14
constexpr float kBF16ExpLo = -93.0f;               // exp(-93) < 2^-134: 0 in bfloat16

}  // namespace expc
}  // namespace olc_norm

#endif  // OLC_NORMALIZATION_EXP_CONSTS_H_
