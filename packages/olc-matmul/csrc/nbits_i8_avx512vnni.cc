// MatMulNBits int8-activation kernels with AVX512_VNNI: vpdpbusd on zmm
// (16 columns x 4 k per instruction, u8 weights x s8 activations, exact).
// Compiled with -mavx512vnni; entered only when cpu_features() reports it.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "nbits_i8.h"

namespace olc_mm {
namespace avx512vnni {
namespace {

constexpr int kLanes = 16;
constexpr int kW8Offset = 0;
constexpr int kGemvGroups = 4;
constexpr int kGemmRows = 4;
constexpr int kGemmGroups = 2;
using VI = __m512i;
using VF = __m512;

inline VI vld(const void* p) { return _mm512_loadu_si512(p); }
inline VI vbcast4(const int8_t* p) {
  int32_t x;
  std::memcpy(&x, p, 4);
  return _mm512_set1_epi32(x);
}
inline VI vset1(int32_t x) { return _mm512_set1_epi32(x); }
inline VI vand(VI a, VI b) { return _mm512_and_si512(a, b); }
template <int N>
inline VI vsrl16(VI a) { return _mm512_srli_epi16(a, N); }
inline VI vadd32(VI a, VI b) { return _mm512_add_epi32(a, b); }
inline VI vsub32(VI a, VI b) { return _mm512_sub_epi32(a, b); }
inline VI vmullo32(VI a, VI b) { return _mm512_mullo_epi32(a, b); }
inline VI vzext8(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline VI vmaxu32(VI a, VI b) { return _mm512_max_epu32(a, b); }
inline uint32_t vhmaxu32(VI a) { return _mm512_reduce_max_epu32(a); }
inline int32_t vhsum32(VI a) { return _mm512_reduce_add_epi32(a); }
using VA = __m512i;  // int32 sums: vpdpbusd never overflows a block
inline VA va_zero() { return _mm512_setzero_si512(); }
template <int BITS>
inline VA dot(VA acc, VI w, VI a) { return _mm512_dpbusd_epi32(acc, w, a); }
template <int BITS>
constexpr int kDotsPerFlush = 1 << 30;
inline VI flush(VI sum, VA acc) { return _mm512_add_epi32(sum, acc); }
inline VF vcvt(VI a) { return _mm512_cvtepi32_ps(a); }
inline __mmask16 nmask(int n) { return static_cast<__mmask16>(n >= 16 ? 0xffffu : (1u << n) - 1u); }
inline VF vldf(const float* p) { return _mm512_loadu_ps(p); }
inline VF vldf_n(const float* p, int n) { return _mm512_maskz_loadu_ps(nmask(n), p); }
inline void vstf_n(float* p, VF v, int n) { _mm512_mask_storeu_ps(p, nmask(n), v); }
inline VF vzerof() { return _mm512_setzero_ps(); }
inline VF vset1f(float x) { return _mm512_set1_ps(x); }
inline VF vmulf(VF a, VF b) { return _mm512_mul_ps(a, b); }
inline VF vaddf(VF a, VF b) { return _mm512_add_ps(a, b); }
inline VF vfma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
inline VI vcvt_rne(VF a) { return _mm512_cvt_roundps_epi32(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline void vst_i8(int8_t* p, VI v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v)); }

}  // namespace

#include "nbits_i8_kernels.inc"

NbI8Kernels nbits_i8_kernels() { return {"avx512vnni", &quantize, &run}; }

}  // namespace avx512vnni
}  // namespace olc_mm
