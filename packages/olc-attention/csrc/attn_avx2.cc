// AVX2 + FMA + F16C level: the engine on 8 float32 lanes, a 6 x 2-vector
// GEMM register tile, F16C and integer-rounded bfloat16 conversions.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "attn_common.h"

namespace olc_attn {
namespace avx2 {

namespace {

#include "attn_tr8.h"

struct V8 {
  using R = __m256;
  static constexpr int64_t W = 8;
  static constexpr int kMR = 6;
  static constexpr int kNV = 2;
  static constexpr bool kScalef = false;  // scalef(p, n) = p * 2^n (vscalefps)
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
    const __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    r = _mm256_and_si256(_mm256_blendv_epi8(r, q, nan), _mm256_set1_epi32(0xffff));
    const __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(pk));
  }
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static float hsum(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static void hsum4(R a, R b, R c, R d, float* out) {
    const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    const __m256 abcd = _mm256_hadd_ps(ab, cd);  // per 128-bit half: a, b, c, d partial sums
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  static float hmax(R v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static R round(R a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R exp2i(R n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static R less(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static R select(R m, R a, R b) { return _mm256_blendv_ps(b, a, m); }
  static void tr8(const float* const* rows, int64_t d0, float* out, int64_t ld) { tr8_avx(rows, d0, out, ld); }
};

#include "attn_engine.inc"

}  // namespace

const IsaKernels* kernels() {
  static const IsaKernels k = make_kernels<V8>("avx2");
  return &k;
}

}  // namespace avx2
}  // namespace olc_attn
