// AVX2 level of the fused kernel's tile primitives: 8 float32 lanes.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "fused_common.h"
#include "vmath_shim_avx2.h"

namespace olc_ew {
namespace avx2 {

namespace {
struct V {
  using R = __m256;
  static constexpr int64_t kWidth = 8;
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static void stream(float* p, R v) { _mm256_stream_ps(p, v); }
  static void fence() { _mm_sfence(); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  // Round to nearest even on the bits; a NaN keeps its top half, made quiet.
  static void store_bf16(uint16_t* p, R v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1)));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    const __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    // Values are < 2^16: an unsigned-saturating pack keeps them; lanes are
    // interleaved per 128-bit half, the permute puts them back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
};
// y = (g * sigmoid(g)) * u, 8 lanes; the tail goes through a zero-padded
// stack copy with the same vector code (no over-read, same bits).
inline __m256 swiglu8(__m256 g, __m256 u) {
  return _mm256_mul_ps(_mm256_mul_ps(g, olc_ew_vm::vm_sigmoid(g)), u);
}

void fz_swiglu(const float* g, const float* u, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // the two sigmoids interleaved (vm_sigmoid_x2): same bits as swiglu8
    const __m256 g0 = _mm256_loadu_ps(g + i), g1 = _mm256_loadu_ps(g + i + 8);
    __m256 s0 = g0, s1 = g1;
    olc_ew_vm::vm_sigmoid_x2(&s0, &s1);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(g0, s0), _mm256_loadu_ps(u + i)));
    _mm256_storeu_ps(y + i + 8, _mm256_mul_ps(_mm256_mul_ps(g1, s1), _mm256_loadu_ps(u + i + 8)));
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, swiglu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
  if (i < n) {
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
    alignas(32) float bg[8] = {}, bu[8] = {}, by[8];
    std::memcpy(bg, g + i, bytes);
    std::memcpy(bu, u + i, bytes);
    _mm256_store_ps(by, swiglu8(_mm256_load_ps(bg), _mm256_load_ps(bu)));
    std::memcpy(y + i, by, bytes);
  }
}

void fz_swiglu_bf16(const uint16_t* g, const uint16_t* u, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) V::store_bf16(y + i, swiglu8(V::load_bf16(g + i), V::load_bf16(u + i)));
  if (i < n) {
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(uint16_t);
    alignas(16) uint16_t bg[8] = {}, bu[8] = {}, by[8];
    std::memcpy(bg, g + i, bytes);
    std::memcpy(bu, u + i, bytes);
    V::store_bf16(by, swiglu8(V::load_bf16(bg), V::load_bf16(bu)));
    std::memcpy(y + i, by, bytes);
  }
}
}  // namespace

#define FZ_HAS_SWIGLU 1
#define FZ_HAS_STREAM 1
#include "fused_tile.inc"

}  // namespace avx2
}  // namespace olc_ew
