// AVX-512 float32 vector math (olc_v512_*), 16 lanes, and bf16 load/store.
// Include only from translation units compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512dq. Algorithms: vmath_impl.h.
#ifndef OLC_VMATH_AVX512_H_
#define OLC_VMATH_AVX512_H_

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512DQ__)
#error "vmath_avx512.h needs -mavx512f -mavx512bw -mavx512vl -mavx512dq"
#endif

// GCC 12 flags its own _mm512_undefined_* placeholders as uninitialized
// when these inline into user code; silence that in the intrinsics header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "vmath_impl.h"

namespace {
namespace olc_vm {

struct OpsV512 {
  typedef __m512 V;
  typedef __m512i I;
  typedef __mmask16 M;
  enum { N = 16 };
  static constexpr bool kScalef = true;
  static OLC_VM_INLINE V f(float a) { return _mm512_set1_ps(a); }
  static OLC_VM_INLINE I i(int32_t a) { return _mm512_set1_epi32(a); }
  static OLC_VM_INLINE V add(V a, V b) { return _mm512_add_ps(a, b); }
  static OLC_VM_INLINE V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static OLC_VM_INLINE V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static OLC_VM_INLINE V div(V a, V b) { return _mm512_div_ps(a, b); }
  static OLC_VM_INLINE V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static OLC_VM_INLINE V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static OLC_VM_INLINE V fms(V a, V b, V c) { return _mm512_fmsub_ps(a, b, c); }
  static OLC_VM_INLINE V trunc(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
  static OLC_VM_INLINE V min_(V a, V b) { return _mm512_min_ps(a, b); }
  static OLC_VM_INLINE V max_(V a, V b) { return _mm512_max_ps(a, b); }
  static OLC_VM_INLINE I ci(V a) { return _mm512_castps_si512(a); }
  static OLC_VM_INLINE V cf(I a) { return _mm512_castsi512_ps(a); }
  static OLC_VM_INLINE I iadd(I a, I b) { return _mm512_add_epi32(a, b); }
  static OLC_VM_INLINE I isub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static OLC_VM_INLINE I iand(I a, I b) { return _mm512_and_si512(a, b); }
  static OLC_VM_INLINE I ior(I a, I b) { return _mm512_or_si512(a, b); }
  static OLC_VM_INLINE I ixor(I a, I b) { return _mm512_xor_si512(a, b); }
  static OLC_VM_INLINE I imax(I a, I b) { return _mm512_max_epi32(a, b); }
  template <int S> static OLC_VM_INLINE I sll(I a) { return _mm512_slli_epi32(a, S); }
  template <int S> static OLC_VM_INLINE I sra(I a) { return _mm512_srai_epi32(a, S); }
  static OLC_VM_INLINE V cvt(I a) { return _mm512_cvtepi32_ps(a); }
  static OLC_VM_INLINE I cvti(V a) { return _mm512_cvtps_epi32(a); }
  static OLC_VM_INLINE I cvtti(V a) { return _mm512_cvttps_epi32(a); }
  // tab[idx & 15] per lane; the table load is loop-invariant once inlined
  static OLC_VM_INLINE V lut16(const float* tab, I idx) {
    return _mm512_permutexvar_ps(idx, _mm512_load_ps(tab));
  }
  // a * 2^floor(b), rounded once
  static OLC_VM_INLINE V scalef(V a, V b) { return _mm512_scalef_ps(a, b); }
  static OLC_VM_INLINE M lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static OLC_VM_INLINE M le(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
  static OLC_VM_INLINE M gt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static OLC_VM_INLINE M ge(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static OLC_VM_INLINE M eq(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static OLC_VM_INLINE M unord(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
  static OLC_VM_INLINE M itest(I a, I b) { return _mm512_test_epi32_mask(a, b); }
  static OLC_VM_INLINE M mand(M a, M b) { return static_cast<M>(a & b); }
  static OLC_VM_INLINE M mnot(M a) { return static_cast<M>(~a); }
  static OLC_VM_INLINE bool any(M a) { return a != 0; }
  static OLC_VM_INLINE unsigned bits(M a) { return a; }
  static OLC_VM_INLINE V sel(M m, V t, V f) { return _mm512_mask_blend_ps(m, f, t); }
  static OLC_VM_INLINE V selneg(V x, V t, V f) { return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), f, t); }
  static OLC_VM_INLINE I seli(M m, I t, I f) { return _mm512_mask_blend_epi32(m, f, t); }
  // Materializes a so the compiler cannot contract the multiply that made
  // it into a later add (error-free transforms need the rounded product).
  static OLC_VM_INLINE V opaque(V a) { __asm__("" : "+v"(a)); return a; }
  static OLC_VM_INLINE V load(const float* p) { return _mm512_loadu_ps(p); }
  static OLC_VM_INLINE void store(float* p, V v) { _mm512_storeu_ps(p, v); }
};

// Two __m512 per value: every primitive issues two independent
// instructions back to back, so one call interleaves two vectors'
// dependency chains (the out-of-order window covers only part of them).
// Lane results are exactly those of OpsV512.
struct OpsV512x2 {
  struct V { __m512 a, b; };
  struct I { __m512i a, b; };
  typedef __mmask32 M;  // low 16 bits: a, high 16: b
  enum { N = 32 };
  static constexpr bool kScalef = true;
  typedef OpsV512 B;
#define OLC_X2_F(NAME) \
  static OLC_VM_INLINE V NAME(V x, V y) { return {B::NAME(x.a, y.a), B::NAME(x.b, y.b)}; }
#define OLC_X2_I(NAME) \
  static OLC_VM_INLINE I NAME(I x, I y) { return {B::NAME(x.a, y.a), B::NAME(x.b, y.b)}; }
#define OLC_X2_M(NAME) \
  static OLC_VM_INLINE M NAME(V x, V y) { return join(B::NAME(x.a, y.a), B::NAME(x.b, y.b)); }
  static OLC_VM_INLINE M join(__mmask16 lo, __mmask16 hi) {
    return static_cast<M>(static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16));
  }
  static OLC_VM_INLINE __mmask16 lo(M m) { return static_cast<__mmask16>(m); }
  static OLC_VM_INLINE __mmask16 hi(M m) { return static_cast<__mmask16>(m >> 16); }
  static OLC_VM_INLINE V f(float c) { const __m512 v = B::f(c); return {v, v}; }
  static OLC_VM_INLINE I i(int32_t c) { const __m512i v = B::i(c); return {v, v}; }
  OLC_X2_F(add) OLC_X2_F(sub) OLC_X2_F(mul) OLC_X2_F(div) OLC_X2_F(min_) OLC_X2_F(max_)
  static OLC_VM_INLINE V sqrt(V x) { return {B::sqrt(x.a), B::sqrt(x.b)}; }
  OLC_X2_F(scalef)
  OLC_X2_I(iadd) OLC_X2_I(isub) OLC_X2_I(iand) OLC_X2_I(ior) OLC_X2_I(ixor) OLC_X2_I(imax)
  OLC_X2_M(lt) OLC_X2_M(le) OLC_X2_M(gt) OLC_X2_M(ge) OLC_X2_M(eq) OLC_X2_M(unord)
#undef OLC_X2_F
#undef OLC_X2_I
#undef OLC_X2_M
  static OLC_VM_INLINE V fma(V x, V y, V z) { return {B::fma(x.a, y.a, z.a), B::fma(x.b, y.b, z.b)}; }
  static OLC_VM_INLINE I ci(V x) { return {B::ci(x.a), B::ci(x.b)}; }
  static OLC_VM_INLINE V cf(I x) { return {B::cf(x.a), B::cf(x.b)}; }
  template <int S> static OLC_VM_INLINE I sll(I x) { return {B::template sll<S>(x.a), B::template sll<S>(x.b)}; }
  template <int S> static OLC_VM_INLINE I sra(I x) { return {B::template sra<S>(x.a), B::template sra<S>(x.b)}; }
  static OLC_VM_INLINE V cvt(I x) { return {B::cvt(x.a), B::cvt(x.b)}; }
  static OLC_VM_INLINE I cvti(V x) { return {B::cvti(x.a), B::cvti(x.b)}; }
  static OLC_VM_INLINE I cvtti(V x) { return {B::cvtti(x.a), B::cvtti(x.b)}; }
  static OLC_VM_INLINE V trunc(V x) { return {B::trunc(x.a), B::trunc(x.b)}; }
  static OLC_VM_INLINE V fms(V x, V y, V z) { return {B::fms(x.a, y.a, z.a), B::fms(x.b, y.b, z.b)}; }
  static OLC_VM_INLINE V lut16(const float* tab, I idx) { return {B::lut16(tab, idx.a), B::lut16(tab, idx.b)}; }
  static OLC_VM_INLINE M itest(I x, I y) { return join(B::itest(x.a, y.a), B::itest(x.b, y.b)); }
  static OLC_VM_INLINE M mand(M x, M y) { return static_cast<M>(x & y); }
  static OLC_VM_INLINE M mnot(M x) { return static_cast<M>(~x); }
  static OLC_VM_INLINE bool any(M x) { return x != 0; }
  static OLC_VM_INLINE unsigned bits(M x) { return x; }
  static OLC_VM_INLINE V sel(M m, V t, V f) { return {B::sel(lo(m), t.a, f.a), B::sel(hi(m), t.b, f.b)}; }
  static OLC_VM_INLINE V selneg(V x, V t, V f) { return {B::selneg(x.a, t.a, f.a), B::selneg(x.b, t.b, f.b)}; }
  static OLC_VM_INLINE I seli(M m, I t, I f) { return {B::seli(lo(m), t.a, f.a), B::seli(hi(m), t.b, f.b)}; }
  static OLC_VM_INLINE V opaque(V x) { return {B::opaque(x.a), B::opaque(x.b)}; }
  static OLC_VM_INLINE V load(const float* p) { return {B::load(p), B::load(p + 16)}; }
  static OLC_VM_INLINE void store(float* p, V v) { B::store(p, v.a); B::store(p + 16, v.b); }
};

// f32 -> bf16 bits in the low half of each 32-bit lane: round to nearest
// even, NaN forced quiet (a NaN whose payload sits in the low 16 bits must
// not round or truncate to inf).
static OLC_VM_INLINE __m512i f32_to_bf16_lanes(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i qnan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_blend_epi32(nan, rounded, qnan);
}

}  // namespace olc_vm
}  // namespace

static inline __m512 olc_v512_exp(__m512 x) { return olc_vm::exp<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_expm1(__m512 x) { return olc_vm::expm1<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_log(__m512 x) { return olc_vm::log<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_log1p(__m512 x) { return olc_vm::log1p<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_tanh(__m512 x) { return olc_vm::tanh<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_sigmoid(__m512 x) { return olc_vm::sigmoid<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_erf(__m512 x) { return olc_vm::erf<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_sin(__m512 x) { return olc_vm::sin<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_cos(__m512 x) { return olc_vm::cos<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_softplus(__m512 x) { return olc_vm::softplus<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_gelu_erf(__m512 x) { return olc_vm::gelu_erf<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_gelu_tanh(__m512 x) { return olc_vm::gelu_tanh<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_mish(__m512 x) { return olc_vm::mish<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_tan(__m512 x) { return olc_vm::tan<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_asin(__m512 x) { return olc_vm::asin<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_acos(__m512 x) { return olc_vm::acos<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_atan(__m512 x) { return olc_vm::atan<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_sinh(__m512 x) { return olc_vm::sinh<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_cosh(__m512 x) { return olc_vm::cosh<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_asinh(__m512 x) { return olc_vm::asinh<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_acosh(__m512 x) { return olc_vm::acosh<olc_vm::OpsV512>(x); }
static inline __m512 olc_v512_atanh(__m512 x) { return olc_vm::atanh<olc_vm::OpsV512>(x); }

// Two vectors per call, interleaved: the same lane results as the single
// forms. The unrolled drivers use these where they measured faster on Zen 4
// (tanh, erf, sigmoid, exp: 2-8%); the longer functions lose to register
// pressure.
#define OLC_V512X2(NAME)                                                          \
  static inline void olc_v512x2_##NAME(__m512& a, __m512& b) {                  \
    const olc_vm::OpsV512x2::V r = olc_vm::NAME<olc_vm::OpsV512x2>({a, b});     \
    a = r.a;                                                                     \
    b = r.b;                                                                     \
  }
OLC_V512X2(exp) OLC_V512X2(tanh) OLC_V512X2(sigmoid) OLC_V512X2(erf)
#undef OLC_V512X2

// 16 bf16 -> 16 float
static inline __m512 olc_v512_load_bf16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
// Lanes off in m read no memory (fault-suppressed) and come back as +0.
static inline __m512 olc_v512_load_bf16_mask(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
static inline void olc_v512_store_bf16(uint16_t* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                      _mm512_cvtepi32_epi16(olc_vm::f32_to_bf16_lanes(v)));
}
// Lanes off in m write no memory.
static inline void olc_v512_store_bf16_mask(uint16_t* p, __m512 v, __mmask16 m) {
  _mm512_mask_cvtepi32_storeu_epi16(p, m, olc_vm::f32_to_bf16_lanes(v));
}

#endif  // OLC_VMATH_AVX512_H_
