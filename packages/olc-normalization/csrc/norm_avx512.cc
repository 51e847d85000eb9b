// AVX-512 (F/BW/VL/DQ) level: the row engine on 16 float32 lanes with
// masked tails (no over-read) and scalef in exp; fp16 conversions from
// AVX-512F. float64 rows use the scalar level.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "exp_consts.h"
#include "norm_common.h"

namespace olc_norm {
namespace avx512 {

namespace {

inline __mmask16 first_lanes(int64_t k) { return static_cast<__mmask16>((1u << k) - 1u); }

struct V16 {
  using T = float;
  using R = __m512;
  static constexpr int64_t W = 16;
  static constexpr bool kStream = true;
  // Softmax [2048, 4096] one thread: the whole 16 KiB row ahead made it 5-10 %
  // slower (3.5 against 3.0-3.4 ms); its first 4 KiB, 2.9-3.2.
  static constexpr int64_t kAheadBytes = 4096;
  static constexpr uintptr_t kAlign = 64;
  static void stream(T* p, R v) { _mm512_stream_ps(p, v); }
  static R load(const T* p) { return _mm512_loadu_ps(p); }
  static R load_part(const T* p, int64_t k, T fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), first_lanes(k), p);
  }
  static void store(T* p, R v) { _mm512_storeu_ps(p, v); }
  static void store_part(T* p, R v, int64_t k) { _mm512_mask_storeu_ps(p, first_lanes(k), v); }
  static constexpr bool kWholeTail = false;  // masked lanes cost no more here
  static R last_lanes(R v, int64_t, T) { return v; }
  static R set1(T v) { return _mm512_set1_ps(v); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R sqrt(R a) { return _mm512_sqrt_ps(a); }
  static R keep_if_nonzero(R v, R d) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ), v);
  }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static R abs(R a) { return _mm512_abs_ps(a); }
  static T hsum(R v) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static T hmax(R v) {
    __m256 s8 = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static R exp_nonpos(R x) {
    using namespace expc;
    // A NaN x passes through (max returns its second operand); -inf and
    // anything below kLoScalef underflow to 0 in scalef.
    const __m512 xc = _mm512_max_ps(_mm512_set1_ps(kLoScalef), x);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
    __m512 p = _mm512_set1_ps(kC5);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
  }
  static R round_f16(R v) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  // Nearest even on the top 16 bits, as pack_bf16 below; a NaN keeps its
  // top bits and is made quiet.
  static R round_bf16(R v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_and_si512(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), hi);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_and_epi32(r, nan, _mm512_or_si512(x, _mm512_set1_epi32(0x00400000)), hi);
    return _mm512_castsi512_ps(r);
  }
  static bool any_nonzero(R v) {
    const __m512i b = _mm512_castps_si512(v);
    return _mm512_test_epi32_mask(b, b) != 0;
  }
  // The lanes where |(bits(v) & mask) - mid| <= kDoubtUlps.
  static __mmask16 near_mid(__m512 v, int mask, int mid) {
    const __m512i b = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(mask));
    const __m512i d = _mm512_abs_epi32(_mm512_sub_epi32(b, _mm512_set1_epi32(mid)));
    return _mm512_cmple_epi32_mask(d, _mm512_set1_epi32(expc::kDoubtUlps));
  }
  static R doubt_f16(R e) {
    const __m512 c = _mm512_set1_ps(expc::kF16MinNormal);
    const __m512 v = _mm512_mask_add_ps(e, _mm512_cmp_ps_mask(e, c, _CMP_LT_OQ), e, c);
    return _mm512_maskz_mov_ps(near_mid(v, 0x1fff, 0x1000), _mm512_set1_ps(1.0f));
  }
  static R doubt_bf16(R t, R e) {
    const __mmask16 band = _mm512_cmp_ps_mask(t, _mm512_set1_ps(expc::kBF16ExpLo), _CMP_GT_OQ) &
                           _mm512_cmp_ps_mask(t, _mm512_set1_ps(expc::kLo), _CMP_LT_OQ);
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(near_mid(e, 0xffff, 0x8000) | band), _mm512_set1_ps(1.0f));
  }
};

#include "row_engine.inc"

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  if (i < n) {
    const __mmask16 m = first_lanes(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
  }
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), kRound));
  if (i < n) {
    const __mmask16 m = first_lanes(n - i);
    _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), kRound));
  }
}

void bf16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  auto widen = [](__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); };
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  if (i < n) {
    const __mmask16 m = first_lanes(n - i);
    _mm512_mask_storeu_ps(y + i, m, widen(_mm256_maskz_loadu_epi16(m, x + i)));
  }
}

// Round to nearest even; a NaN keeps its top bits and is made quiet.
inline __m256i pack_bf16(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

void f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), pack_bf16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = first_lanes(n - i);
    _mm256_mask_storeu_epi16(y + i, m, pack_bf16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace

const RowKernels* kernels() {
  static const RowKernels k = [] {
    RowKernels t{};
    t.isa = "avx512";
    t.f32 = eng_ops<V16>();
    t.convert = {&f16_to_f32, &f32_to_f16, &bf16_to_f32, &f32_to_bf16};
    return t;
  }();
  return &k;
}

}  // namespace avx512
}  // namespace olc_norm
