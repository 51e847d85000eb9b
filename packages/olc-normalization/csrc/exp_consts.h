// Constants of the family's float32 exp (see "exp accuracy" in README.md).
// Plain constexpr data, safe to include from every ISA TU.
//
// exp(x) for x <= 0: n = round(x / ln 2), r = x - n ln 2 (ln 2 split in a
// high part with trailing zero bits, so n * kLn2Hi is exact for |n| <= 126,
// and a low part), |r| <= ln(2) / 2; exp(r) by its Taylor polynomial of
// degree 7 (truncation error below r^8 / 8! = 5.2e-9 relative, under 0.05
// ulp), evaluated by Horner's rule; then scaled by 2^n.
// x below kExpLo (exp(x) < FLT_MIN) gives 0: an absolute error under
// 1.2e-38, invisible in a softmax whose sum is at least 1.
#ifndef OLC_NORMALIZATION_EXP_CONSTS_H_
#define OLC_NORMALIZATION_EXP_CONSTS_H_

namespace olc_norm {
namespace expc {

constexpr float kLo = -87.33654475f;  // ln(FLT_MIN)
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;     // 0x3f317200
constexpr float kLn2Lo = 1.428606820309417e-06f;  // ln 2 - kLn2Hi
constexpr float kC7 = 1.0f / 5040.0f;
constexpr float kC6 = 1.0f / 720.0f;
constexpr float kC5 = 1.0f / 120.0f;
constexpr float kC4 = 1.0f / 24.0f;
constexpr float kC3 = 1.0f / 6.0f;
constexpr float kC2 = 0.5f;

}  // namespace expc
}  // namespace olc_norm

#endif  // OLC_NORMALIZATION_EXP_CONSTS_H_
