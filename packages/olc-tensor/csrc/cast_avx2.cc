// AVX2 + F16C bulk conversions float32 <-> float16/bfloat16. Tails go
// through a small stack buffer, so no load or store leaves the arrays.
#include <immintrin.h>

#include <cstring>

#include "cast_kernels.h"

namespace olc_tn {
namespace avx2 {
namespace {

inline __m256i bf16_round(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i q = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_epi8(r, q, _mm256_castps_si256(nan));
}

}  // namespace

void f32_to_f16(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT);
    const __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(s + i + 8), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 8), b);
  }
  for (; i < n; i += 8) {
    const int64_t k = n - i < 8 ? n - i : 8;
    alignas(32) float in[8] = {};
    alignas(16) uint16_t out[8];
    std::memcpy(in, s + i, k * 4);
    _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_load_ps(in), _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(d + i, out, k * 2);
  }
}

void f16_to_f32(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
    _mm256_storeu_ps(d + i + 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 8))));
  }
  for (; i < n; i += 8) {
    const int64_t k = n - i < 8 ? n - i : 8;
    alignas(16) uint16_t in[8] = {};
    alignas(32) float out[8];
    std::memcpy(in, s + i, k * 2);
    _mm256_store_ps(out, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(in))));
    std::memcpy(d + i, out, k * 4);
  }
}

void f32_to_bf16(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  auto pack16 = [](const float* p, uint16_t* q) {
    const __m256i a = bf16_round(_mm256_loadu_ps(p));
    const __m256i b = bf16_round(_mm256_loadu_ps(p + 8));
    // packus works per 128-bit lane: [a0..3 b0..3 | a4..7 b4..7] -> reorder quads.
    const __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), pk);
  };
  for (; i + 16 <= n; i += 16) pack16(s + i, d + i);
  if (i < n) {
    const int64_t k = n - i;
    alignas(32) float in[16] = {};
    alignas(32) uint16_t out[16];
    std::memcpy(in, s + i, k * 4);
    pack16(in, out);
    std::memcpy(d + i, out, k * 2);
  }
}

void bf16_to_f32(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_slli_epi32(w, 16));
  }
  for (; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(s[i]) << 16;
    std::memcpy(d + i, &u, 4);
  }
}

void f32_to_i32(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  int32_t* d = static_cast<int32_t*>(dst);
  const __m256 hi = _mm256_set1_ps(2147483648.0f);
  auto conv = [&](__m256 v) {
    // cvttps2dq gives 0x80000000 for NaN and out-of-range: fix the top and NaN.
    __m256i r = _mm256_cvttps_epi32(v);
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fffffff), _mm256_castps_si256(_mm256_cmp_ps(v, hi, _CMP_GE_OQ)));
    return _mm256_and_si256(r, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_ORD_Q)));
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), conv(_mm256_loadu_ps(s + i)));
  if (i < n) {
    const int64_t k = n - i;
    alignas(32) float in[8] = {};
    alignas(32) int32_t out[8];
    std::memcpy(in, s + i, k * 4);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), conv(_mm256_load_ps(in)));
    std::memcpy(d + i, out, k * 4);
  }
}

}  // namespace avx2
}  // namespace olc_tn
