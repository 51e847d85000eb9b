// AVX-512 (F, BW, VL, DQ) level: the engine on 16 float32 lanes, a 6 x
// 4-vector GEMM register tile (a 64-key tile row in four registers);
// float16 through the AVX-512F conversions, bfloat16 by integer rounding.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "attn_common.h"

namespace olc_attn {
namespace avx512 {

namespace {

#include "attn_tr8.h"

struct V16 {
  using R = __m512;
  static constexpr int64_t W = 16;
  static constexpr int kMR = 6;
  static constexpr int kNV = 4;
  static constexpr bool kScalef = true;  // scalef(p, n) = p * 2^n (vscalefps)
  static __m512 scalef(__m512 p, __m512 n) { return _mm512_scalef_ps(p, n); }
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
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, q)));
  }
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static float hsum(R v) { return _mm512_reduce_add_ps(v); }
  static float hmax(R v) { return _mm512_reduce_max_ps(v); }
  static void hsum4(R a, R b, R c, R d, float* out) {
    // 512 -> 256 bits each, then pairwise horizontal adds.
    auto half = [](R v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); };
    const __m256 ab = _mm256_hadd_ps(half(a), half(b)), cd = _mm256_hadd_ps(half(c), half(d));
    const __m256 abcd = _mm256_hadd_ps(ab, cd);
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  static R round(R a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R exp2i(R n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static __mmask16 less(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static R select(__mmask16 m, R a, R b) { return _mm512_mask_blend_ps(m, b, a); }
  static void tr8(const float* const* rows, int64_t d0, float* out, int64_t ld) { tr8_avx(rows, d0, out, ld); }
};

#include "attn_engine.inc"

}  // namespace

const IsaKernels* kernels() {
  static const IsaKernels k = make_kernels<V16>("avx512");
  return &k;
}

}  // namespace avx512
}  // namespace olc_attn
