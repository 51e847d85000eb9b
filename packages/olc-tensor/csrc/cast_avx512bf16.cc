// float32 -> bfloat16 with AVX512_BF16's vcvtneps2bf16. The instruction
// rounds to nearest even and quiets NaN like the other levels, but treats
// subnormal inputs as zero; those lanes are redone with the integer
// rounding so the bits match every other level.
#include <immintrin.h>

#include "cast_kernels.h"

namespace olc_tn {
namespace avx512bf16 {
namespace {

inline __m256i convert16(__m512 v) {
  __m256i r = (__m256i)_mm512_cvtneps_pbh(v);
  const __m512i x = _mm512_castps_si512(v);
  const __m512i ex = _mm512_and_si512(x, _mm512_set1_epi32(0x7f800000));
  const __m512i mant = _mm512_and_si512(x, _mm512_set1_epi32(0x007fffff));
  const __mmask16 sub = _mm512_cmpeq_epi32_mask(ex, _mm512_setzero_si512()) &
                        _mm512_cmpneq_epi32_mask(mant, _mm512_setzero_si512());
  if (sub) {
    const __m512i hi = _mm512_srli_epi32(x, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i e = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    r = _mm256_mask_mov_epi16(r, sub, _mm512_cvtepi32_epi16(e));
  }
  return r;
}

}  // namespace

void f32_to_bf16(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), convert16(_mm512_loadu_ps(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 16), convert16(_mm512_loadu_ps(s + i + 16)));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(d + i, m, convert16(_mm512_maskz_loadu_ps(m, s + i)));
  }
}


void f32_to_bf16_stream(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  while (i < n && (reinterpret_cast<uintptr_t>(d + i) & 31u) != 0) {
    _mm256_mask_storeu_epi16(d + i, 1, convert16(_mm512_maskz_loadu_ps(1, s + i)));
    ++i;
  }
  for (; i + 32 <= n; i += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), convert16(_mm512_loadu_ps(s + i)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 16), convert16(_mm512_loadu_ps(s + i + 16)));
  }
  _mm_sfence();
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(d + i, m, convert16(_mm512_maskz_loadu_ps(m, s + i)));
  }
}

}  // namespace avx512bf16
}  // namespace olc_tn
