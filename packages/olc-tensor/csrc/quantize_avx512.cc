// AVX-512 (F/BW/VL/DQ) float32 <-> 4/8/16-bit quantize and dequantize, and
// the min/max pass of DynamicQuantizeLinear. Masked tails: no load or store
// leaves the arrays. Same bits as quantize_scalar.cc.
#include <immintrin.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "quantize_kernels.h"

namespace olc_tn {
namespace avx512 {
namespace {

inline __mmask16 tail_mask(int64_t k) { return static_cast<__mmask16>((1u << k) - 1u); }

template <class Y>
struct Lim {
  static constexpr float lo = static_cast<float>(std::numeric_limits<Y>::min());
  static constexpr float hi = static_cast<float>(std::numeric_limits<Y>::max());
};
template <>
struct Lim<UInt4> {
  static constexpr float lo = UInt4::lo, hi = UInt4::hi;
};
template <>
struct Lim<Int4> {
  static constexpr float lo = Int4::lo, hi = Int4::hi;
};

// The stored element of Y: a byte for the 4-bit tags.
template <class Y>
struct Elem {
  using type = Y;
};
template <>
struct Elem<UInt4> {
  using type = uint8_t;
};
template <>
struct Elem<Int4> {
  using type = uint8_t;
};
template <class Y>
constexpr bool kNibble = std::is_same<Y, UInt4>::value || std::is_same<Y, Int4>::value;

// q -> clamped integer lanes. vmaxps returns its second operand when the
// first is NaN, so NaN lanes become qmin.
template <class Y>
inline __m512i quant16(__m512 q, __m512 zp) {
  const __m512 r = _mm512_roundscale_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 v = _mm512_add_ps(r, zp);
  v = _mm512_max_ps(v, _mm512_set1_ps(Lim<Y>::lo));
  v = _mm512_min_ps(v, _mm512_set1_ps(Lim<Y>::hi));
  const __m512i r32 = _mm512_cvtps_epi32(v);  // exact: v is an in-range integer
  if constexpr (kNibble<Y>) return _mm512_and_si512(r32, _mm512_set1_epi32(0xF));  // the nibble
  return r32;
}

// Stores 16 in-range int32 lanes as Y (a truncating narrow), under mask m.
template <class Y>
inline void store16(Y* y, __m512i v, __mmask16 m) {
  if constexpr (sizeof(Y) == 1) _mm512_mask_cvtepi32_storeu_epi8(y, m, v);
  else _mm512_mask_cvtepi32_storeu_epi16(y, m, v);
}
template <class Y>
inline void store16(Y* y, __m512i v) {
  if constexpr (sizeof(Y) == 1) _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm512_cvtepi32_epi8(v));
  else _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), _mm512_cvtepi32_epi16(v));
}

template <class Y>
void quant_u(const void* xv, int64_t n, float s, float zp, void* yv) {
  const float* x = static_cast<const float*>(xv);
  using E = typename Elem<Y>::type;
  E* y = static_cast<E*>(yv);
  const __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps(zp);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i a = quant16<Y>(_mm512_div_ps(_mm512_loadu_ps(x + i), vs), vz);
    const __m512i b = quant16<Y>(_mm512_div_ps(_mm512_loadu_ps(x + i + 16), vs), vz);
    const __m512i c = quant16<Y>(_mm512_div_ps(_mm512_loadu_ps(x + i + 32), vs), vz);
    const __m512i d = quant16<Y>(_mm512_div_ps(_mm512_loadu_ps(x + i + 48), vs), vz);
    store16(y + i, a);
    store16(y + i + 16, b);
    store16(y + i + 32, c);
    store16(y + i + 48, d);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    // Masked-off lanes divide 1 by s: no spurious NaN work, never stored.
    const __m512 xv16 = _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), m, x + i);
    store16(y + i, quant16<Y>(_mm512_div_ps(xv16, vs), vz), m);
  }
}

template <class Y>
void quant_v(const void* xv, int64_t n, const float* s, const float* zp, void* yv) {
  const float* x = static_cast<const float*>(xv);
  using E = typename Elem<Y>::type;
  E* y = static_cast<E*>(yv);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 q = _mm512_div_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(s + i));
    store16(y + i, quant16<Y>(q, _mm512_loadu_ps(zp + i)));
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 q = _mm512_div_ps(_mm512_mask_loadu_ps(one, m, x + i), _mm512_mask_loadu_ps(one, m, s + i));
    store16(y + i, quant16<Y>(q, _mm512_maskz_loadu_ps(m, zp + i)), m);
  }
}

// 4-bit: the nibble of each byte lane, sign-extended for int4.
template <class X>
inline __m512 nibbles(__m512i b) {
  if constexpr (std::is_same<X, Int4>::value) return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(b, 28), 28));
  else return _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0xF)));
}

// 16 elements of X widened to float32 (exact for 4/8/16-bit, rounded int32).
template <class X>
inline __m512 load16(const typename Elem<X>::type* x, __mmask16 m) {
  if constexpr (kNibble<X>) return nibbles<X>(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x)));
  else if constexpr (std::is_same<X, uint8_t>::value) return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x)));
  else if constexpr (std::is_same<X, int8_t>::value) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, x)));
  else if constexpr (std::is_same<X, uint16_t>::value) return _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x)));
  else if constexpr (std::is_same<X, int16_t>::value) return _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(m, x)));
  else return _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, x));
}
template <class X>
inline __m512 load16(const typename Elem<X>::type* x) {
  if constexpr (kNibble<X>) return nibbles<X>(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))));
  else if constexpr (std::is_same<X, uint8_t>::value) return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))));
  else if constexpr (std::is_same<X, int8_t>::value) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))));
  else if constexpr (std::is_same<X, uint16_t>::value) return _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))));
  else if constexpr (std::is_same<X, int16_t>::value) return _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))));
  else return _mm512_cvtepi32_ps(_mm512_loadu_si512(x));
}

template <class X>
void dequant_u(const void* xv, int64_t n, float s, float zp, void* yv) {
  using E = typename Elem<X>::type;
  const E* x = static_cast<const E*>(xv);
  float* y = static_cast<float*>(yv);
  const __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps(zp);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_sub_ps(load16<X>(x + i), vz), vs));
    _mm512_storeu_ps(y + i + 16, _mm512_mul_ps(_mm512_sub_ps(load16<X>(x + i + 16), vz), vs));
    _mm512_storeu_ps(y + i + 32, _mm512_mul_ps(_mm512_sub_ps(load16<X>(x + i + 32), vz), vs));
    _mm512_storeu_ps(y + i + 48, _mm512_mul_ps(_mm512_sub_ps(load16<X>(x + i + 48), vz), vs));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_sub_ps(load16<X>(x + i, m), vz), vs));
  }
}

template <class X>
void dequant_v(const void* xv, int64_t n, const float* s, const float* zp, void* yv) {
  using E = typename Elem<X>::type;
  const E* x = static_cast<const E*>(xv);
  float* y = static_cast<float*>(yv);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_sub_ps(load16<X>(x + i), _mm512_loadu_ps(zp + i)), _mm512_loadu_ps(s + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 d = _mm512_sub_ps(load16<X>(x + i, m), _mm512_maskz_loadu_ps(m, zp + i));
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(d, _mm512_maskz_loadu_ps(m, s + i)));
  }
}

}  // namespace

QuantUniformFn quant_uniform(int which) {
  switch (which) {
    case kQU8: return &quant_u<uint8_t>;
    case kQI8: return &quant_u<int8_t>;
    case kQU16: return &quant_u<uint16_t>;
    case kQI16: return &quant_u<int16_t>;
    case kQU4: return &quant_u<UInt4>;
    case kQI4: return &quant_u<Int4>;
    default: return nullptr;
  }
}

QuantVectorFn quant_vector(int which) {
  switch (which) {
    case kQU8: return &quant_v<uint8_t>;
    case kQI8: return &quant_v<int8_t>;
    case kQU16: return &quant_v<uint16_t>;
    case kQI16: return &quant_v<int16_t>;
    case kQU4: return &quant_v<UInt4>;
    case kQI4: return &quant_v<Int4>;
    default: return nullptr;
  }
}

DequantUniformFn dequant_uniform(int which) {
  switch (which) {
    case kDU8: return &dequant_u<uint8_t>;
    case kDI8: return &dequant_u<int8_t>;
    case kDU16: return &dequant_u<uint16_t>;
    case kDI16: return &dequant_u<int16_t>;
    case kDI32: return &dequant_u<int32_t>;
    case kDU4: return &dequant_u<UInt4>;
    case kDI4: return &dequant_u<Int4>;
    default: return nullptr;
  }
}

DequantVectorFn dequant_vector(int which) {
  switch (which) {
    case kDU8: return &dequant_v<uint8_t>;
    case kDI8: return &dequant_v<int8_t>;
    case kDU16: return &dequant_v<uint16_t>;
    case kDI16: return &dequant_v<int16_t>;
    case kDI32: return &dequant_v<int32_t>;
    case kDU4: return &dequant_v<UInt4>;
    case kDI4: return &dequant_v<Int4>;
    default: return nullptr;
  }
}

void min_max(const float* x, int64_t n, float* mn, float* mx) {
  // min/max(x, acc) return acc when x is NaN: NaN lanes are skipped.
  __m512 a0 = _mm512_set1_ps(*mn), a1 = a0, b0 = _mm512_set1_ps(*mx), b1 = b0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 u = _mm512_loadu_ps(x + i), v = _mm512_loadu_ps(x + i + 16);
    a0 = _mm512_min_ps(u, a0);
    b0 = _mm512_max_ps(u, b0);
    a1 = _mm512_min_ps(v, a1);
    b1 = _mm512_max_ps(v, b1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 u = _mm512_maskz_loadu_ps(m, x + i);
    a0 = _mm512_mask_min_ps(a0, m, u, a0);
    b0 = _mm512_mask_max_ps(b0, m, u, b0);
  }
  *mn = _mm512_reduce_min_ps(_mm512_min_ps(a0, a1));
  *mx = _mm512_reduce_max_ps(_mm512_max_ps(b0, b1));
}

}  // namespace avx512
}  // namespace olc_tn
