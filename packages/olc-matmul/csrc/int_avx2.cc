// AVX2 integer microkernel: int16 pairs through vpmaddwd (exact for int8 and
// uint8 operands: no pmaddubsw saturation). Tile 6 x 16.
#include <immintrin.h>

#include <cmath>

#include "mm_common.h"

namespace olc_mm {
namespace avx2 {
namespace {

constexpr int kMR = 6, kNR = 16;

template <int M>
void tile(int64_t ng, const uint32_t* Ap, const uint32_t* Bp, int32_t* C, int64_t ldc, int nr, int first) {
  __m256i acc[M][2];
  for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < ng; ++q) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bp));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bp + 8));
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      const __m256i a = _mm256_set1_epi32(static_cast<int>(Ap[i]));
      acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(a, b0));
      acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(a, b1));
    }
    Ap += kMR;
    Bp += kNR;
  }
  for (int i = 0; i < M; ++i) {
    alignas(32) int32_t t[kNR];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), acc[i][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(t + 8), acc[i][1]);
    int32_t* c = C + i * ldc;
    for (int j = 0; j < nr; ++j)
      c[j] = first ? t[j] : static_cast<int32_t>(static_cast<uint32_t>(c[j]) + static_cast<uint32_t>(t[j]));
  }
}

void ukernel(int64_t ng, const uint32_t* Ap, const uint32_t* Bp, int32_t* C, int64_t ldc, int mr, int nr,
             int first) {
  switch (mr) {
    case 6: return tile<6>(ng, Ap, Bp, C, ldc, nr, first);
    case 5: return tile<5>(ng, Ap, Bp, C, ldc, nr, first);
    case 4: return tile<4>(ng, Ap, Bp, C, ldc, nr, first);
    case 3: return tile<3>(ng, Ap, Bp, C, ldc, nr, first);
    case 2: return tile<2>(ng, Ap, Bp, C, ldc, nr, first);
    case 1: return tile<1>(ng, Ap, Bp, C, ldc, nr, first);
    default: return;
  }
}

void quant_u8(const float* x, int64_t n, float scale, int32_t zp, uint8_t* q) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256i z = _mm256_set1_epi32(zp), lo = _mm256_setzero_si256(), hi = _mm256_set1_epi32(255);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i r = _mm256_add_epi32(_mm256_cvttps_epi32(v), z);
    r = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
    const __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packus_epi16(h, h));
  }
  for (; i < n; ++i) {
    const float r = std::nearbyint(x[i] / scale) + static_cast<float>(zp);
    q[i] = static_cast<uint8_t>(r < 0.0f ? 0.0f : r > 255.0f ? 255.0f : r);
  }
}

}  // namespace

IntKernel int_kernel() { return {"avx2", kMR, kNR, 2, &ukernel, nullptr, nullptr, &quant_u8}; }

}  // namespace avx2
}  // namespace olc_mm
