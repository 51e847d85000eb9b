// AVX2+FMA float32 vector math (olc_v256_*), 8 lanes, and bf16 load/store
// with exact-length tails. Include only from translation units compiled with
// -mavx2 -mfma. Algorithms: vmath_impl.h.
#ifndef OLC_VMATH_AVX2_H_
#define OLC_VMATH_AVX2_H_

#if !defined(__AVX2__) || !defined(__FMA__)
#error "vmath_avx2.h needs -mavx2 -mfma"
#endif

// GCC 12 flags its own _mm*_undefined_* placeholders as uninitialized when
// these inline into user code; silence that in the intrinsics header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>

#include "vmath_impl.h"

namespace {
namespace olc_vm {

struct OpsV256 {
  typedef __m256 V;
  typedef __m256i I;
  typedef __m256 M;  // all-ones / all-zeros lanes
  enum { N = 8 };
  static constexpr bool kScalef = false;
  static OLC_VM_INLINE V f(float a) { return _mm256_set1_ps(a); }
  static OLC_VM_INLINE I i(int32_t a) { return _mm256_set1_epi32(a); }
  static OLC_VM_INLINE V add(V a, V b) { return _mm256_add_ps(a, b); }
  static OLC_VM_INLINE V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static OLC_VM_INLINE V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static OLC_VM_INLINE V div(V a, V b) { return _mm256_div_ps(a, b); }
  static OLC_VM_INLINE V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static OLC_VM_INLINE V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static OLC_VM_INLINE V fms(V a, V b, V c) { return _mm256_fmsub_ps(a, b, c); }
  static OLC_VM_INLINE V trunc(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
  static OLC_VM_INLINE V min_(V a, V b) { return _mm256_min_ps(a, b); }
  static OLC_VM_INLINE V max_(V a, V b) { return _mm256_max_ps(a, b); }
  static OLC_VM_INLINE I ci(V a) { return _mm256_castps_si256(a); }
  static OLC_VM_INLINE V cf(I a) { return _mm256_castsi256_ps(a); }
  static OLC_VM_INLINE I iadd(I a, I b) { return _mm256_add_epi32(a, b); }
  static OLC_VM_INLINE I isub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static OLC_VM_INLINE I iand(I a, I b) { return _mm256_and_si256(a, b); }
  static OLC_VM_INLINE I ior(I a, I b) { return _mm256_or_si256(a, b); }
  static OLC_VM_INLINE I ixor(I a, I b) { return _mm256_xor_si256(a, b); }
  static OLC_VM_INLINE I imax(I a, I b) { return _mm256_max_epi32(a, b); }
  template <int S> static OLC_VM_INLINE I sll(I a) { return _mm256_slli_epi32(a, S); }
  template <int S> static OLC_VM_INLINE I sra(I a) { return _mm256_srai_epi32(a, S); }
  static OLC_VM_INLINE V cvt(I a) { return _mm256_cvtepi32_ps(a); }
  static OLC_VM_INLINE I cvti(V a) { return _mm256_cvtps_epi32(a); }
  static OLC_VM_INLINE I cvtti(V a) { return _mm256_cvttps_epi32(a); }
  // tab[idx & 15] per lane: two 8-entry permutes, bit 3 picks the half
  static OLC_VM_INLINE V lut16(const float* tab, I idx) {
    const V lo = _mm256_permutevar8x32_ps(_mm256_load_ps(tab), idx);
    const V hi = _mm256_permutevar8x32_ps(_mm256_load_ps(tab + 8), idx);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  }
  static OLC_VM_INLINE M lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static OLC_VM_INLINE M le(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
  static OLC_VM_INLINE M gt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static OLC_VM_INLINE M ge(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
  static OLC_VM_INLINE M eq(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static OLC_VM_INLINE M unord(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_UNORD_Q); }
  static OLC_VM_INLINE M nge(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_NGE_UQ); }  // !(a >= b): NaN too
  static OLC_VM_INLINE M mnot(M a) { return _mm256_xor_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(-1))); }
  static OLC_VM_INLINE M itest(I a, I b) {
    return mnot(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(a, b), _mm256_setzero_si256())));
  }
  static OLC_VM_INLINE M mand(M a, M b) { return _mm256_and_ps(a, b); }
  static OLC_VM_INLINE bool any(M a) { return _mm256_movemask_ps(a) != 0; }
  static OLC_VM_INLINE unsigned bits(M a) { return static_cast<unsigned>(_mm256_movemask_ps(a)); }
  static OLC_VM_INLINE V sel(M m, V t, V f) { return _mm256_blendv_ps(f, t, m); }
  // t where x's sign bit is set (-0 and negative NaNs included), else f
  static OLC_VM_INLINE V selneg(V x, V t, V f) { return _mm256_blendv_ps(f, t, x); }
  static OLC_VM_INLINE I seli(M m, I t, I f) {
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(f), _mm256_castsi256_ps(t), m));
  }
  // Materializes a so the compiler cannot contract the multiply that made
  // it into a later add (error-free transforms need the rounded product).
  static OLC_VM_INLINE V opaque(V a) { __asm__("" : "+x"(a)); return a; }
  static OLC_VM_INLINE V load(const float* p) { return _mm256_loadu_ps(p); }
  static OLC_VM_INLINE void store(float* p, V v) { _mm256_storeu_ps(p, v); }
};

// f32 -> 8 bf16 (round to nearest even, NaN forced quiet) packed in 128 bits.
static OLC_VM_INLINE __m128i f32_to_bf16_x8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x0040));
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m256i h = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(qnan), nan));
  return _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

static OLC_VM_INLINE __m256 bf16x8_to_f32(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Dword lanes j with 2j+1 < n, i.e. the complete pairs of a tail of n.
static OLC_VM_INLINE __m128i pair_mask(size_t n) {
  return _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(n >> 1)), _mm_setr_epi32(0, 1, 2, 3));
}

}  // namespace olc_vm
}  // namespace

static inline __m256 olc_v256_exp(__m256 x) { return olc_vm::exp<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_expm1(__m256 x) { return olc_vm::expm1<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_log(__m256 x) { return olc_vm::log<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_log1p(__m256 x) { return olc_vm::log1p<olc_vm::OpsV256>(x); }
// tanh at this level is the rational form (no lookups: the 16-piece
// table costs two vpermps and a blend per coefficient here); its scalar
// twin is olc_s_tanh_rational. Accuracy: docs/accuracy.md.
static inline __m256 olc_v256_tanh(__m256 x) { return olc_vm::tanh_rational<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_sigmoid(__m256 x) { return olc_vm::sigmoid<olc_vm::OpsV256>(x); }
// erf likewise (scalar twin olc_s_erf_rational).
static inline __m256 olc_v256_erf(__m256 x) { return olc_vm::erf_rational<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_sin(__m256 x) { return olc_vm::sin<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_cos(__m256 x) { return olc_vm::cos<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_softplus(__m256 x) { return olc_vm::softplus<olc_vm::OpsV256>(x); }
// gelu_erf likewise takes R(a) as one rational function (no lookups); its
// scalar twin is olc_s_gelu_erf_rational.
static inline __m256 olc_v256_gelu_erf(__m256 x) { return olc_vm::gelu_erf_rational<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_gelu_tanh(__m256 x) { return olc_vm::gelu_tanh<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_mish(__m256 x) { return olc_vm::mish<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_tan(__m256 x) { return olc_vm::tan<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_asin(__m256 x) { return olc_vm::asin<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_acos(__m256 x) { return olc_vm::acos<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_atan(__m256 x) { return olc_vm::atan<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_sinh(__m256 x) { return olc_vm::sinh<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_cosh(__m256 x) { return olc_vm::cosh<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_asinh(__m256 x) { return olc_vm::asinh<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_acosh(__m256 x) { return olc_vm::acosh<olc_vm::OpsV256>(x); }
static inline __m256 olc_v256_atanh(__m256 x) { return olc_vm::atanh<olc_vm::OpsV256>(x); }

// Two vectors per call, their instructions interleaved (olc_vm::OpsPair),
// for the functions whose one-vector dependency chain (exp and a division,
// a long polynomial) is longer than the out-of-order window of AVX2 cores
// sees past. The same algorithm and bits as two olc_v256_<name> calls.
#define OLC_V256X2(name, algorithm)                                                        \
  static inline void olc_v256x2_##name(__m256* a, __m256* b) {                             \
    const olc_vm::OpsPair<olc_vm::OpsV256>::V r = olc_vm::algorithm<olc_vm::OpsPair<olc_vm::OpsV256>>({*a, *b}); \
    *a = r.a;                                                                              \
    *b = r.b;                                                                              \
  }
OLC_V256X2(exp, exp)
OLC_V256X2(log, log)
OLC_V256X2(tanh, tanh_rational)
OLC_V256X2(sigmoid, sigmoid)
OLC_V256X2(erf, erf_rational)
OLC_V256X2(asin, asin)
OLC_V256X2(acos, acos)
OLC_V256X2(atan, atan)
#undef OLC_V256X2

// 8 bf16 -> 8 float
static inline __m256 olc_v256_load_bf16(const uint16_t* p) {
  return olc_vm::bf16x8_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// First n (0..8) elements; lanes n.. are +0. Never reads p[n] or beyond:
// complete pairs through a masked dword load, an odd last element by itself.
static inline __m256 olc_v256_load_bf16_n(const uint16_t* p, size_t n) {
  if (n >= 8) return olc_v256_load_bf16(p);
  __m128i h = _mm_maskload_epi32(reinterpret_cast<const int*>(p), olc_vm::pair_mask(n));
  if (n & 1) {
    const __m128i last = _mm_set1_epi16(static_cast<short>(p[n - 1]));
    const __m128i at = _mm_cmpeq_epi16(_mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7),
                                       _mm_set1_epi16(static_cast<short>(n - 1)));
    h = _mm_blendv_epi8(h, last, at);
  }
  return olc_vm::bf16x8_to_f32(h);
}
static inline void olc_v256_store_bf16(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), olc_vm::f32_to_bf16_x8(v));
}
// Writes exactly the first n (0..8) elements.
static inline void olc_v256_store_bf16_n(uint16_t* p, __m256 v, size_t n) {
  if (n >= 8) {
    olc_v256_store_bf16(p, v);
    return;
  }
  const __m128i h = olc_vm::f32_to_bf16_x8(v);
  _mm_maskstore_epi32(reinterpret_cast<int*>(p), olc_vm::pair_mask(n), h);
  if (n & 1) {
    alignas(16) uint16_t t[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(t), h);
    p[n - 1] = t[n - 1];
  }
}

#endif  // OLC_VMATH_AVX2_H_
