// AVX2 integer microkernel: int16 pairs through vpmaddwd (exact for int8 and
// uint8 operands: no pmaddubsw saturation). Tile 6 x 16.
#include <immintrin.h>

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

}  // namespace

IntKernel int_kernel() { return {"avx2", kMR, kNR, 2, &ukernel, nullptr, nullptr}; }

}  // namespace avx2
}  // namespace olc_mm
