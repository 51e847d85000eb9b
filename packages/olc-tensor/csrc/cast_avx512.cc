// AVX-512 bulk conversions float32 <-> float16/bfloat16 with masked tails.
#include <immintrin.h>

#include "cast_kernels.h"

namespace olc_tn {
namespace avx512 {
namespace {

inline __mmask16 tail_mask(int64_t k) { return static_cast<__mmask16>((1u << k) - 1u); }

inline __m256i bf16_round(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(x, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

}  // namespace

void f32_to_f16(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i b = _mm512_cvtps_ph(_mm512_loadu_ps(s + i + 16), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 16), b);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(d + i, m, h);
  }
}

void f32_to_f16_stream(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  // Plain stores until the destination is 32-byte aligned.
  while (i < n && (reinterpret_cast<uintptr_t>(d + i) & 31u) != 0) {
    const __mmask16 m = 1;
    _mm256_mask_storeu_epi16(d + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    ++i;
  }
  for (; i + 32 <= n; i += 32) {
    const __m256i a = _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i b = _mm512_cvtps_ph(_mm512_loadu_ps(s + i + 16), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 16), b);
  }
  _mm_sfence();
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(d + i, m, h);
  }
}

void f16_to_f32(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
    _mm512_storeu_ps(d + i + 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 16))));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    _mm512_mask_storeu_ps(d + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i)));
  }
}

void f32_to_bf16(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), bf16_round(_mm512_loadu_ps(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 16), bf16_round(_mm512_loadu_ps(s + i + 16)));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    _mm256_mask_storeu_epi16(d + i, m, bf16_round(_mm512_maskz_loadu_ps(m, s + i)));
  }
}


void f32_to_bf16_stream(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  while (i < n && (reinterpret_cast<uintptr_t>(d + i) & 31u) != 0) {
    _mm256_mask_storeu_epi16(d + i, 1, bf16_round(_mm512_maskz_loadu_ps(1, s + i)));
    ++i;
  }
  for (; i + 32 <= n; i += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), bf16_round(_mm512_loadu_ps(s + i)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 16), bf16_round(_mm512_loadu_ps(s + i + 16)));
  }
  _mm_sfence();
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(d + i, m, bf16_round(_mm512_maskz_loadu_ps(m, s + i)));
  }
}

void bf16_to_f32(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s + i));
    _mm512_mask_storeu_epi32(d + i, m, _mm512_slli_epi32(w, 16));
  }
}

void f32_to_i32(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  int32_t* d = static_cast<int32_t*>(dst);
  const __m512 hi = _mm512_set1_ps(2147483648.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, s + i);
    // vcvttps2dq gives 0x80000000 for NaN and out-of-range: fix the top and NaN.
    __m512i r = _mm512_cvttps_epi32(v);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, hi, _CMP_GE_OQ), _mm512_set1_epi32(0x7fffffff));
    r = _mm512_maskz_mov_epi32(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), r);
    _mm512_mask_storeu_epi32(d + i, m, r);
  }
}

namespace {
// NaN -> 0, clamp to [lo, hi] (both exact in float32), truncate toward zero.
inline __m512i clamp_trunc(__m512 v, __m512 lo, __m512 hi) {
  v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
  v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
  return _mm512_cvttps_epi32(v);
}

template <int kBytes>
void f32_to_small(const float* s, void* dst, int64_t n, float lo_v, float hi_v) {
  const __m512 lo = _mm512_set1_ps(lo_v), hi = _mm512_set1_ps(hi_v);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512i r = clamp_trunc(_mm512_maskz_loadu_ps(m, s + i), lo, hi);
    if constexpr (kBytes == 1)
      _mm_mask_storeu_epi8(static_cast<uint8_t*>(dst) + i, m, _mm512_cvtepi32_epi8(r));
    else
      _mm256_mask_storeu_epi16(static_cast<uint16_t*>(dst) + i, m, _mm512_cvtepi32_epi16(r));
  }
}
}  // namespace

void f32_to_i8(const void* src, void* dst, int64_t n) {
  f32_to_small<1>(static_cast<const float*>(src), dst, n, -128.0f, 127.0f);
}
void f32_to_u8(const void* src, void* dst, int64_t n) {
  f32_to_small<1>(static_cast<const float*>(src), dst, n, 0.0f, 255.0f);
}
void f32_to_i16(const void* src, void* dst, int64_t n) {
  f32_to_small<2>(static_cast<const float*>(src), dst, n, -32768.0f, 32767.0f);
}
void f32_to_u16(const void* src, void* dst, int64_t n) {
  f32_to_small<2>(static_cast<const float*>(src), dst, n, 0.0f, 65535.0f);
}

void f32_to_u32(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint32_t* d = static_cast<uint32_t*>(dst);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    __m512 v = _mm512_maskz_loadu_ps(m, s + i);
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);  // NaN -> 0
    v = _mm512_max_ps(v, zero);
    // vcvttps2udq returns 0xFFFFFFFF (the maximum) for values >= 2^32.
    _mm512_mask_storeu_epi32(d + i, m, _mm512_cvttps_epu32(v));
  }
}

// value != 0 as one byte: NaN compares unordered, so it is true; -0 is false.
void f32_to_bool(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint8_t* d = static_cast<uint8_t*>(dst);
  const __m512 zero = _mm512_setzero_ps();
  const __m512i one = _mm512_set1_epi8(1);
  auto nz = [&](const float* p) { return _mm512_cmp_ps_mask(_mm512_loadu_ps(p), zero, _CMP_NEQ_UQ); };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __mmask64 m = static_cast<__mmask64>(nz(s + i)) | (static_cast<__mmask64>(nz(s + i + 16)) << 16) |
                        (static_cast<__mmask64>(nz(s + i + 32)) << 32) | (static_cast<__mmask64>(nz(s + i + 48)) << 48);
    _mm512_storeu_si512(d + i, _mm512_maskz_mov_epi8(m, one));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __mmask16 t = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, s + i), zero, _CMP_NEQ_UQ);
    _mm_mask_storeu_epi8(d + i, m, _mm_maskz_mov_epi8(t, _mm_set1_epi8(1)));
  }
}

void f64_to_i32(const void* src, void* dst, int64_t n) {
  const double* s = static_cast<const double*>(src);
  int32_t* d = static_cast<int32_t*>(dst);
  const __m512d hi = _mm512_set1_pd(2147483648.0);
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 m = n - i >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << (n - i)) - 1u);
    const __m512d v = _mm512_maskz_loadu_pd(m, s + i);
    // vcvttpd2dq gives 0x80000000 for NaN and out-of-range: fix the top and NaN.
    __m256i r = _mm512_cvttpd_epi32(v);
    r = _mm256_mask_mov_epi32(r, _mm512_cmp_pd_mask(v, hi, _CMP_GE_OQ), _mm256_set1_epi32(0x7fffffff));
    r = _mm256_maskz_mov_epi32(_mm512_cmp_pd_mask(v, v, _CMP_ORD_Q), r);
    _mm256_mask_storeu_epi32(d + i, m, r);
  }
}

void f32_to_i64(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  int64_t* d = static_cast<int64_t*>(dst);
  const __m256 hi = _mm256_set1_ps(9223372036854775808.0f);
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 m = n - i >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << (n - i)) - 1u);
    const __m256 v = _mm256_maskz_loadu_ps(m, s + i);
    __m512i r = _mm512_cvttps_epi64(v);
    r = _mm512_mask_mov_epi64(r, _mm256_cmp_ps_mask(v, hi, _CMP_GE_OQ), _mm512_set1_epi64(0x7fffffffffffffffll));
    r = _mm512_maskz_mov_epi64(_mm256_cmp_ps_mask(v, v, _CMP_ORD_Q), r);
    _mm512_mask_storeu_epi64(d + i, m, r);
  }
}

}  // namespace avx512
}  // namespace olc_tn
