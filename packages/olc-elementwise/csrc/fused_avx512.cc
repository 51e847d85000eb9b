// AVX-512 (F/BW/VL/DQ) level of the fused kernel's tile primitives: 16
// float32 lanes.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "fused_common.h"
#include "vmath_shim_avx512.h"

namespace olc_ew {
namespace avx512 {

namespace {
struct V {
  using R = __m512;
  static constexpr int64_t kWidth = 16;
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static void stream(float* p, R v) { _mm512_stream_ps(p, v); }
  static void fence() { _mm_sfence(); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R load_bf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  // Round to nearest even on the bits; a NaN keeps its top half, made quiet.
  static void store_bf16(uint16_t* p, R v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i hi = _mm512_srli_epi32(x, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1)));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }
};
// y = (g * sigmoid(g)) * u, two vectors per iteration (the paired sigmoid
// gives the same bits as two single calls, as in the unary driver); masked
// tail, no over-read.
void fz_swiglu(const float* g, const float* u, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 g0 = _mm512_loadu_ps(g + i), g1 = _mm512_loadu_ps(g + i + 16);
    __m512 s0 = g0, s1 = g1;
    olc_ew_vm::vm_sigmoid2(s0, s1);
    _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(g0, s0), _mm512_loadu_ps(u + i)));
    _mm512_storeu_ps(y + i + 16, _mm512_mul_ps(_mm512_mul_ps(g1, s1), _mm512_loadu_ps(u + i + 16)));
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 g0 = _mm512_loadu_ps(g + i);
    _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(g0, olc_ew_vm::vm_sigmoid(g0)), _mm512_loadu_ps(u + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 g0 = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 r = _mm512_mul_ps(_mm512_mul_ps(g0, olc_ew_vm::vm_sigmoid(g0)), _mm512_maskz_loadu_ps(m, u + i));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

void fz_swiglu_bf16(const uint16_t* g, const uint16_t* u, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 g0 = V::load_bf16(g + i), g1 = V::load_bf16(g + i + 16);
    __m512 s0 = g0, s1 = g1;
    olc_ew_vm::vm_sigmoid2(s0, s1);
    V::store_bf16(y + i, _mm512_mul_ps(_mm512_mul_ps(g0, s0), V::load_bf16(u + i)));
    V::store_bf16(y + i + 16, _mm512_mul_ps(_mm512_mul_ps(g1, s1), V::load_bf16(u + i + 16)));
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 g0 = V::load_bf16(g + i);
    V::store_bf16(y + i, _mm512_mul_ps(_mm512_mul_ps(g0, olc_ew_vm::vm_sigmoid(g0)), V::load_bf16(u + i)));
  }
  if (i < n) {
    // Through a zero-padded stack copy: no over-read, the same vector code.
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(uint16_t);
    alignas(32) uint16_t bg[16] = {}, bu[16] = {}, by[16];
    std::memcpy(bg, g + i, bytes);
    std::memcpy(bu, u + i, bytes);
    const __m512 g0 = V::load_bf16(bg);
    V::store_bf16(by, _mm512_mul_ps(_mm512_mul_ps(g0, olc_ew_vm::vm_sigmoid(g0)), V::load_bf16(bu)));
    std::memcpy(y + i, by, bytes);
  }
}
}  // namespace

#define FZ_HAS_SWIGLU 1
#define FZ_HAS_STREAM 1
#include "fused_tile.inc"

}  // namespace avx512
}  // namespace olc_ew
