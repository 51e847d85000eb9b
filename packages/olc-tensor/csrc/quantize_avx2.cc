// AVX2 float32 <-> 4/8/16-bit quantize and dequantize, and the min/max pass
// of DynamicQuantizeLinear. Tails go through a small stack buffer, so no
// load or store leaves the arrays. Same bits as quantize_scalar.cc.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "quantize_kernels.h"

namespace olc_tn {
namespace avx2 {
namespace {

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

// vmaxps returns its second operand when the first is NaN: NaN -> qmin.
template <class Y>
inline __m256i quant8(__m256 q, __m256 zp) {
  const __m256 r = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 v = _mm256_add_ps(r, zp);
  v = _mm256_max_ps(v, _mm256_set1_ps(Lim<Y>::lo));
  v = _mm256_min_ps(v, _mm256_set1_ps(Lim<Y>::hi));
  const __m256i r32 = _mm256_cvtps_epi32(v);  // exact: an in-range integer
  if constexpr (kNibble<Y>) return _mm256_and_si256(r32, _mm256_set1_epi32(0xF));  // the nibble, 0..15
  return r32;
}

// 32 clamped int32 lanes (a..d, 8 each) -> 32 elements in order (4-bit
// lanes arrive as their nibbles 0..15 and pack as unsigned bytes).
template <class Y>
inline void store32(Y* y, __m256i a, __m256i b, __m256i c, __m256i d) {
  if constexpr (sizeof(Y) == 1) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);  // values fit int16
    const __m256i p = std::is_signed<Y>::value ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
    // Lanes hold 4-byte groups a0 b0 c0 d0 | a1 b1 c1 d1: put them in order.
    const __m256i o = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), o);
  } else {
    const __m256i ab = std::is_signed<Y>::value ? _mm256_packs_epi32(a, b) : _mm256_packus_epi32(a, b);
    const __m256i cd = std::is_signed<Y>::value ? _mm256_packs_epi32(c, d) : _mm256_packus_epi32(c, d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), _mm256_permute4x64_epi64(ab, 0xD8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + 16), _mm256_permute4x64_epi64(cd, 0xD8));
  }
}

template <class Y>
inline void quant32_u(const float* x, __m256 vs, __m256 vz, typename Elem<Y>::type* y) {
  store32(y, quant8<Y>(_mm256_div_ps(_mm256_loadu_ps(x), vs), vz),
          quant8<Y>(_mm256_div_ps(_mm256_loadu_ps(x + 8), vs), vz),
          quant8<Y>(_mm256_div_ps(_mm256_loadu_ps(x + 16), vs), vz),
          quant8<Y>(_mm256_div_ps(_mm256_loadu_ps(x + 24), vs), vz));
}

template <class Y>
inline void quant32_v(const float* x, const float* s, const float* zp, typename Elem<Y>::type* y) {
  auto one = [&](int k) {
    return quant8<Y>(_mm256_div_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(s + k)), _mm256_loadu_ps(zp + k));
  };
  store32(y, one(0), one(8), one(16), one(24));
}

template <class Y>
void quant_u(const void* xv, int64_t n, float s, float zp, void* yv) {
  const float* x = static_cast<const float*>(xv);
  using E = typename Elem<Y>::type;
  E* y = static_cast<E*>(yv);
  const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(zp);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) quant32_u<Y>(x + i, vs, vz, y + i);
  if (i < n) {
    const int64_t k = n - i;
    alignas(32) float in[32];
    alignas(32) E out[32];
    for (int j = 0; j < 32; ++j) in[j] = 1.0f;  // lanes past the tail: harmless, never stored
    std::memcpy(in, x + i, static_cast<size_t>(k) * 4);
    quant32_u<Y>(in, vs, vz, out);
    std::memcpy(y + i, out, static_cast<size_t>(k) * sizeof(E));
  }
}

template <class Y>
void quant_v(const void* xv, int64_t n, const float* s, const float* zp, void* yv) {
  const float* x = static_cast<const float*>(xv);
  using E = typename Elem<Y>::type;
  E* y = static_cast<E*>(yv);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) quant32_v<Y>(x + i, s + i, zp + i, y + i);
  if (i < n) {
    const int64_t k = n - i;
    alignas(32) float in[32], sc[32], z[32];
    alignas(32) E out[32];
    for (int j = 0; j < 32; ++j) in[j] = sc[j] = 1.0f, z[j] = 0.0f;
    std::memcpy(in, x + i, static_cast<size_t>(k) * 4);
    std::memcpy(sc, s + i, static_cast<size_t>(k) * 4);
    std::memcpy(z, zp + i, static_cast<size_t>(k) * 4);
    quant32_v<Y>(in, sc, z, out);
    std::memcpy(y + i, out, static_cast<size_t>(k) * sizeof(E));
  }
}

// 8 elements of X widened to float32 (4-bit: the nibble, sign-extended
// for int4 by a shift up and an arithmetic shift down).
template <class X>
inline __m256 load8(const typename Elem<X>::type* x) {
  if constexpr (kNibble<X>) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x)));
    if constexpr (std::is_same<X, Int4>::value)
      return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(b, 28), 28));
    else
      return _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0xF)));
  } else if constexpr (std::is_same<X, uint8_t>::value)
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x))));
  else if constexpr (std::is_same<X, int8_t>::value)
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x))));
  else if constexpr (std::is_same<X, uint16_t>::value)
    return _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))));
  else if constexpr (std::is_same<X, int16_t>::value)
    return _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))));
  else
    return _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}

template <class X>
void dequant_u(const void* xv, int64_t n, float s, float zp, void* yv) {
  using E = typename Elem<X>::type;
  const E* x = static_cast<const E*>(xv);
  float* y = static_cast<float*>(yv);
  const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(zp);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(load8<X>(x + i), vz), vs));
    _mm256_storeu_ps(y + i + 8, _mm256_mul_ps(_mm256_sub_ps(load8<X>(x + i + 8), vz), vs));
    _mm256_storeu_ps(y + i + 16, _mm256_mul_ps(_mm256_sub_ps(load8<X>(x + i + 16), vz), vs));
    _mm256_storeu_ps(y + i + 24, _mm256_mul_ps(_mm256_sub_ps(load8<X>(x + i + 24), vz), vs));
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(load8<X>(x + i), vz), vs));
  if (i < n) {
    const int64_t k = n - i;
    alignas(32) E in[8] = {};
    alignas(32) float out[8];
    std::memcpy(in, x + i, static_cast<size_t>(k) * sizeof(E));
    _mm256_store_ps(out, _mm256_mul_ps(_mm256_sub_ps(load8<X>(in), vz), vs));
    std::memcpy(y + i, out, static_cast<size_t>(k) * 4);
  }
}

template <class X>
void dequant_v(const void* xv, int64_t n, const float* s, const float* zp, void* yv) {
  using E = typename Elem<X>::type;
  const E* x = static_cast<const E*>(xv);
  float* y = static_cast<float*>(yv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(load8<X>(x + i), _mm256_loadu_ps(zp + i)), _mm256_loadu_ps(s + i)));
  if (i < n) {
    const int64_t k = n - i;
    alignas(32) E in[8] = {};
    alignas(32) float sc[8] = {}, z[8] = {}, out[8];
    std::memcpy(in, x + i, static_cast<size_t>(k) * sizeof(E));
    std::memcpy(sc, s + i, static_cast<size_t>(k) * 4);
    std::memcpy(z, zp + i, static_cast<size_t>(k) * 4);
    _mm256_store_ps(out, _mm256_mul_ps(_mm256_sub_ps(load8<X>(in), _mm256_load_ps(z)), _mm256_load_ps(sc)));
    std::memcpy(y + i, out, static_cast<size_t>(k) * 4);
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
  __m256 a0 = _mm256_set1_ps(*mn), a1 = a0, b0 = _mm256_set1_ps(*mx), b1 = b0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 u = _mm256_loadu_ps(x + i), v = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_min_ps(u, a0);
    b0 = _mm256_max_ps(u, b0);
    a1 = _mm256_min_ps(v, a1);
    b1 = _mm256_max_ps(v, b1);
  }
  alignas(32) float lo[8], hi[8];
  _mm256_store_ps(lo, _mm256_min_ps(a0, a1));
  _mm256_store_ps(hi, _mm256_max_ps(b0, b1));
  float a = *mn, b = *mx;
  for (int j = 0; j < 8; ++j) {
    if (lo[j] < a) a = lo[j];
    if (hi[j] > b) b = hi[j];
  }
  for (; i < n; ++i) {
    if (x[i] < a) a = x[i];
    if (x[i] > b) b = x[i];
  }
  *mn = a;
  *mx = b;
}

}  // namespace avx2
}  // namespace olc_tn
