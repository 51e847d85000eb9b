// AVX2 + FMA + F16C level: the row engine on 8 float32 lanes, masked loads
// and stores for the tails (no over-read), F16C and bfloat16 conversions.
// float64 rows use the scalar level.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "exp_consts.h"
#include "olc/avx2_tail.h"
#include "norm_common.h"

namespace olc_norm {
namespace avx2 {

namespace {

struct V8 {
  using T = float;
  using R = __m256;
  static constexpr int64_t W = 8;
  static constexpr bool kStream = true;
  // Softmax [2048, 4096] one thread 6.3-7.0 -> 3.5-3.6 ms with the whole
  // 16 KiB row ahead, 4.5-6.5 with only the first 4 KiB.
  static constexpr int64_t kAheadBytes = 16384;
  static constexpr uintptr_t kAlign = 32;
  static void stream(T* p, R v) { _mm256_stream_ps(p, v); }
  static R load(const T* p) { return _mm256_loadu_ps(p); }
  static R load_part(const T* p, int64_t k, T fill) {
    const __m256i m = olc::avx2::first_lanes(k);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store(T* p, R v) { _mm256_storeu_ps(p, v); }
  static void store_part(T* p, R v, int64_t k) { olc::avx2::store_first(p, v, k); }
  // Rows of W or more end with their last whole vector instead of masked
  // lanes (the tail rule, eng_whole_tail in row_engine.inc): vmaskmovps
  // stores are microcoded on AMD Zen.
  static constexpr bool kWholeTail = true;
  // v's last k lanes, fill in the others.
  static R last_lanes(R v, int64_t k, T fill) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                          _mm256_set1_epi32(static_cast<int>(k))),
                                         _mm256_set1_epi32(7));
    return _mm256_blendv_ps(_mm256_set1_ps(fill), v, _mm256_castsi256_ps(m));
  }
  static R set1(T v) { return _mm256_set1_ps(v); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R sqrt(R a) { return _mm256_sqrt_ps(a); }
  static R keep_if_nonzero(R v, R d) { return _mm256_and_ps(_mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_UQ), v); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R abs(R a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static T hsum(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static T hmax(R v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static R exp_nonpos(R x) {
    using namespace expc;
    const __m256 lo = _mm256_set1_ps(kLo);
    const __m256 xc = _mm256_max_ps(lo, x);  // a NaN x passes through (max returns its second operand)
    // n = round(xc log2 e) by adding 1.5 * 2^23 (one rounding of the exact
    // product): the sum's low bits hold n, whose pattern shifted left by
    // 23 is n << 23 (1.5 * 2^23 ends in 23 zero bits). No vroundps (two
    // uops on Intel) and no conversion back to integers.
    const __m256 magic = _mm256_set1_ps(kRoundMagic);
    const __m256 biased = _mm256_fmadd_ps(xc, _mm256_set1_ps(kLog2e), magic);
    const __m256 n = _mm256_sub_ps(biased, magic);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
    __m256 p = _mm256_set1_ps(kC5);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    // 2^n for n in [-126, 0] (any bits for NaN lanes, where p is NaN
    // already); a multiply, not an add to p's exponent field, so that a
    // NaN stays NaN and results just below FLT_MIN round as they should.
    const __m256i e = _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(biased), 23), _mm256_set1_epi32(127 << 23));
    const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), y);  // x < kLo (and -inf): 0
  }
  static R round_f16(R v) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  // Nearest even on the top 16 bits, as pack_bf16 below; a NaN keeps its
  // top bits and is made quiet.
  static R round_bf16(R v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_and_si256(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), hi);
    const __m256i q = _mm256_and_si256(_mm256_or_si256(x, _mm256_set1_epi32(0x00400000)), hi);
    return _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  static bool any_nonzero(R v) {
    const __m256i b = _mm256_castps_si256(v);
    return !_mm256_testz_si256(b, b);
  }
  // All ones where |(bits(v) & mask) - mid| <= kDoubtUlps.
  static __m256 near_mid(__m256 v, int mask, int mid) {
    const __m256i b = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(mask));
    const __m256i d = _mm256_abs_epi32(_mm256_sub_epi32(b, _mm256_set1_epi32(mid)));
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(expc::kDoubtUlps + 1), d));
  }
  static R doubt_f16(R e) {
    const __m256 c = _mm256_set1_ps(expc::kF16MinNormal);
    const __m256 v = _mm256_blendv_ps(e, _mm256_add_ps(e, c), _mm256_cmp_ps(e, c, _CMP_LT_OQ));
    return _mm256_and_ps(near_mid(v, 0x1fff, 0x1000), _mm256_set1_ps(1.0f));
  }
  static R doubt_bf16(R t, R e) {
    const __m256 band = _mm256_and_ps(_mm256_cmp_ps(t, _mm256_set1_ps(expc::kBF16ExpLo), _CMP_GT_OQ),
                                      _mm256_cmp_ps(t, _mm256_set1_ps(expc::kLo), _CMP_LT_OQ));
    return _mm256_and_ps(_mm256_or_ps(near_mid(e, 0xffff, 0x8000), band), _mm256_set1_ps(1.0f));
  }
};

#include "row_engine.inc"

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  if (i < n) {
    uint16_t h[8] = {0};
    float f[8];
    std::memcpy(h, x + i, static_cast<size_t>(n - i) * sizeof(uint16_t));
    _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))));
    std::memcpy(y + i, f, static_cast<size_t>(n - i) * sizeof(float));
  }
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound));
  if (i < n) {
    float f[8] = {0};
    uint16_t h[8];
    std::memcpy(f, x + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h), _mm256_cvtps_ph(_mm256_loadu_ps(f), kRound));
    std::memcpy(y + i, h, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

void bf16_to_f32(const uint16_t* x, float* y, int64_t n) {
  auto widen = [](__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  if (i < n) {
    uint16_t h[8] = {0};
    float f[8];
    std::memcpy(h, x + i, static_cast<size_t>(n - i) * sizeof(uint16_t));
    _mm256_storeu_ps(f, widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))));
    std::memcpy(y + i, f, static_cast<size_t>(n - i) * sizeof(float));
  }
}

// Round to nearest even; a NaN keeps its top bits and is made quiet.
inline __m128i pack_bf16(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i hi = _mm256_srli_epi32(x, 16);
  const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
  // 8 x 32-bit values below 2^16 -> 8 x 16-bit (packus works per 128-bit lane)
  const __m256i p = _mm256_packus_epi32(r, r);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}

void f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), pack_bf16(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float f[8] = {0};
    uint16_t h[8];
    std::memcpy(f, x + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h), pack_bf16(_mm256_loadu_ps(f)));
    std::memcpy(y + i, h, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

}  // namespace

const RowKernels* kernels() {
  static const RowKernels k = [] {
    RowKernels t{};
    t.isa = "avx2";
    t.f32 = eng_ops<V8>();
    t.convert.f16_to_f32 = &f16_to_f32;
    t.convert.f32_to_f16 = &f32_to_f16;
    t.convert.bf16_to_f32 = &bf16_to_f32;
    t.convert.f32_to_bf16 = &f32_to_bf16;
    return t;
  }();
  return &k;
}

}  // namespace avx2
}  // namespace olc_norm
