// AVX-512 (F, BW, VL, DQ) level: the engine on 16 float32 lanes; float16
// through the AVX-512F conversions, bfloat16 by integer rounding.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cm_common.h"

namespace olc_cm {
namespace avx512 {

namespace {

// Sixteen bytes (element p[0] in lane 0) as int32 lanes.
inline __m512i bytes16(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

struct V16 {
  using T = float;
  static constexpr bool kScalef = true;  // exp scaling by scalef (cm_engine.inc)
  using R = __m512;
  static constexpr int64_t W = 16;
  static constexpr int kRegs = 32;
  static R ld(const float* p) { return _mm512_loadu_ps(p); }
  static void st(float* p, R v) { _mm512_storeu_ps(p, v); }
  static R ld_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static void st_f16(uint16_t* p, R v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static R ld_bf16(const uint16_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static void st_bf16(uint16_t* p, R v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    const __m512i out = _mm512_mask_mov_epi32(r, nan, q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(out));
  }
  static R ld_u8(const uint8_t* p) { return _mm512_cvtepi32_ps(bytes16(p)); }
  static R ld_u4(const uint8_t* p) { return _mm512_cvtepi32_ps(_mm512_and_si512(bytes16(p), _mm512_set1_epi32(15))); }
  static R ld_i4(const uint8_t* p) {
    const __m512i v = _mm512_xor_si512(_mm512_and_si512(bytes16(p), _mm512_set1_epi32(15)), _mm512_set1_epi32(8));
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(v, _mm512_set1_epi32(8)));
  }
  // Elements e..e+15 of packed nibbles: the 8 bytes from e / 2, low nibble first.
  static R ld_p4(const uint8_t* p, int64_t e) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + (e >> 1)));
    const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(15));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(15));
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)));
  }
  static R ld_p2(const uint8_t* p, int64_t e) {
    int32_t w;
    std::memcpy(&w, p + (e >> 2), 4);
    const __m512i sh = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i v = _mm512_srlv_epi32(_mm512_set1_epi32(w), sh);
    return _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(3)));
  }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R sqrt(R a) { return _mm512_sqrt_ps(a); }
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static R abs(R a) { return _mm512_abs_ps(a); }
  static float hsum(R v) { return _mm512_reduce_add_ps(v); }
  static R round(R a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R exp2_biased(R b) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(b), 23)); }
  static __mmask16 less(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static R select(__mmask16 m, R a, R b) { return _mm512_mask_blend_ps(m, b, a); }
  static unsigned bits(__mmask16 m) { return static_cast<unsigned>(m); }
  static R scalef(R a, R n) { return _mm512_scalef_ps(a, n); }
};

// float64 lanes (eight).
struct VD8 {
  using T = double;
  using R = __m512d;
  static constexpr int64_t W = 8;
  static constexpr int kRegs = 32;
  static R ld(const double* p) { return _mm512_loadu_pd(p); }
  static void st(double* p, R v) { _mm512_storeu_pd(p, v); }
  static R set1(double v) { return _mm512_set1_pd(v); }
  static R add(R a, R b) { return _mm512_add_pd(a, b); }
  static R sub(R a, R b) { return _mm512_sub_pd(a, b); }
  static R mul(R a, R b) { return _mm512_mul_pd(a, b); }
  static R div(R a, R b) { return _mm512_div_pd(a, b); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_pd(a, b, c); }
  static R sqrt(R a) { return _mm512_sqrt_pd(a); }
  static R min(R a, R b) { return _mm512_min_pd(a, b); }
  static R max(R a, R b) { return _mm512_max_pd(a, b); }
  static R abs(R a) { return _mm512_abs_pd(a); }
  static double hsum(R v) { return _mm512_reduce_add_pd(v); }
  static R round(R a) { return _mm512_roundscale_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R exp2i(R n) {
    const __m512i e = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_cvtpd_epi32(n)), _mm512_set1_epi64(1023));
    return _mm512_castsi512_pd(_mm512_slli_epi64(e, 52));
  }
  static __mmask8 less(R a, R b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
  static R select(__mmask8 m, R a, R b) { return _mm512_mask_blend_pd(m, b, a); }
  static unsigned bits(__mmask8 m) { return static_cast<unsigned>(m); }
};

#include "cm_engine.inc"
#include "cm_cdist.inc"
#include "cm_dequant.inc"
#include "cm_moe.inc"

}  // namespace

const IsaKernels* kernels() {
  static const IsaKernels k = [] {
    IsaKernels t = make_kernels_rows<V16, VD8>("avx512");
    add_cdist_kernels<V16, VD8>(&t);
    add_dequant_kernels<V16>(&t);
    add_moe_kernels<V16>(&t);
    return t;
  }();
  return &k;
}

}  // namespace avx512
}  // namespace olc_cm
