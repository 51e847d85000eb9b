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
  static OLC_VM_INLINE V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static OLC_VM_INLINE V fms(V a, V b, V c) { return _mm512_fmsub_ps(a, b, c); }
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
  static OLC_VM_INLINE I seli(M m, I t, I f) { return _mm512_mask_blend_epi32(m, f, t); }
  // Materializes a so the compiler cannot contract the multiply that made
  // it into a later add (error-free transforms need the rounded product).
  static OLC_VM_INLINE V opaque(V a) { __asm__("" : "+v"(a)); return a; }
  static OLC_VM_INLINE V load(const float* p) { return _mm512_loadu_ps(p); }
  static OLC_VM_INLINE void store(float* p, V v) { _mm512_storeu_ps(p, v); }
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
