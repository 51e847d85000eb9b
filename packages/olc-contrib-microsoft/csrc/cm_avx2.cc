// AVX2 + FMA + F16C level: the engine on 8 float32 lanes, F16C and
// integer-rounded bfloat16 conversions.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cm_common.h"

namespace olc_cm {
namespace avx2 {

namespace {

// Eight bytes (element p[0] in lane 0) as int32 lanes.
inline __m256i bytes8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

struct V8 {
  using T = float;
  static constexpr bool kScalef = false;  // exp scaling by scalef (cm_engine.inc)
  using R = __m256;
  static constexpr int64_t W = 8;
  static constexpr int kRegs = 16;
  static R ld(const float* p) { return _mm256_loadu_ps(p); }
  static void st(float* p, R v) { _mm256_storeu_ps(p, v); }
  static R ld_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void st_f16(uint16_t* p, R v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static R ld_bf16(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static void st_bf16(uint16_t* p, R v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, q, nan);
    r = _mm256_and_si256(r, _mm256_set1_epi32(0xffff));
    const __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(pk));
  }
  static R ld_u8(const uint8_t* p) { return _mm256_cvtepi32_ps(bytes8(p)); }
  static R ld_u4(const uint8_t* p) { return _mm256_cvtepi32_ps(_mm256_and_si256(bytes8(p), _mm256_set1_epi32(15))); }
  static R ld_i4(const uint8_t* p) {
    const __m256i v = _mm256_xor_si256(_mm256_and_si256(bytes8(p), _mm256_set1_epi32(15)), _mm256_set1_epi32(8));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(v, _mm256_set1_epi32(8)));
  }
  // Elements e..e+7 of packed nibbles: the 4 bytes from e / 2, low nibble first.
  static R ld_p4(const uint8_t* p, int64_t e) {
    int32_t w;
    std::memcpy(&w, p + (e >> 1), 4);
    const __m256i v = _mm256_set1_epi32(w);
    const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(v, sh), _mm256_set1_epi32(15)));
  }
  static R ld_p2(const uint8_t* p, int64_t e) {
    uint16_t w;
    std::memcpy(&w, p + (e >> 2), 2);
    const __m256i v = _mm256_set1_epi32(w);
    const __m256i sh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(v, sh), _mm256_set1_epi32(3)));
  }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R sqrt(R a) { return _mm256_sqrt_ps(a); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R abs(R a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static float hsum(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static R round(R a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R exp2_biased(R b) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(b), 23)); }
  static R less(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static R select(R m, R a, R b) { return _mm256_blendv_ps(b, a, m); }
  static unsigned bits(R m) { return static_cast<unsigned>(_mm256_movemask_ps(m)); }
};

// float64 lanes (four).
struct VD4 {
  using T = double;
  using R = __m256d;
  static constexpr int64_t W = 4;
  static constexpr int kRegs = 16;
  static R ld(const double* p) { return _mm256_loadu_pd(p); }
  static void st(double* p, R v) { _mm256_storeu_pd(p, v); }
  static R set1(double v) { return _mm256_set1_pd(v); }
  static R add(R a, R b) { return _mm256_add_pd(a, b); }
  static R sub(R a, R b) { return _mm256_sub_pd(a, b); }
  static R mul(R a, R b) { return _mm256_mul_pd(a, b); }
  static R div(R a, R b) { return _mm256_div_pd(a, b); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_pd(a, b, c); }
  static R sqrt(R a) { return _mm256_sqrt_pd(a); }
  static R min(R a, R b) { return _mm256_min_pd(a, b); }
  static R max(R a, R b) { return _mm256_max_pd(a, b); }
  static R abs(R a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
  static double hsum(R v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
  }
  static R round(R a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R exp2i(R n) {
    const __m256i e = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)), _mm256_set1_epi64x(1023));
    return _mm256_castsi256_pd(_mm256_slli_epi64(e, 52));
  }
  static R less(R a, R b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
  static R select(R m, R a, R b) { return _mm256_blendv_pd(b, a, m); }
  static unsigned bits(R m) { return static_cast<unsigned>(_mm256_movemask_pd(m)); }
};

#include "cm_engine.inc"
#include "cm_cdist.inc"
#include "cm_dequant.inc"
#include "cm_moe.inc"

}  // namespace

const IsaKernels* kernels() {
  static const IsaKernels k = [] {
    IsaKernels t = make_kernels_rows<V8, VD4>("avx2");
    add_cdist_kernels<V8, VD4>(&t);
    add_dequant_kernels<V8>(&t);
    add_moe_kernels<V8>(&t);
    return t;
  }();
  return &k;
}

}  // namespace avx2
}  // namespace olc_cm
