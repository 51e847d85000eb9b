// AVX512_VNNI integer microkernel: vpdpbusd (u8 x s8, four k per lane,
// non-saturating). Operands are brought to u8 x s8 by the driver (offset
// trick with row/column-sum compensation), so every sign mix is exact. Tile 12 x 32.
#include <immintrin.h>

#include "mm_common.h"

namespace olc_mm {
namespace avx512vnni {
namespace {

constexpr int kMR = 12, kNR = 32;

template <int M, bool DA>
void tile(int64_t ng, const uint32_t* Ap, const uint8_t* A, int64_t lda, const uint32_t* Bp, int32_t* C, int64_t ldc,
          int nr, int first) {
  __m512i acc[M][2];
#pragma GCC unroll 12
  for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
  for (int64_t q = 0; q < ng; ++q) {
    __m512i b[2];
    b[0] = _mm512_loadu_si512(Bp);
    b[1] = _mm512_loadu_si512(Bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < M; ++i) {
      int32_t av;
      if (DA) __builtin_memcpy(&av, A + i * lda + 4 * q, 4);
      else av = static_cast<int32_t>(Ap[i]);
      const __m512i a = _mm512_set1_epi32(av);
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], a, b[v]);
    }
    if (!DA) Ap += kMR;
    Bp += kNR;
  }
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xffff) : __mmask16((1u << nr) - 1u);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xffff) : nr > 16 ? __mmask16((1u << (nr - 16)) - 1u) : __mmask16(0);
#pragma GCC unroll 12
  for (int i = 0; i < M; ++i) {
    int32_t* c = C + i * ldc;
    __m512i r0 = acc[i][0], r1 = acc[i][1];
    if (!first) {
      r0 = _mm512_add_epi32(r0, _mm512_maskz_loadu_epi32(m0, c));
      r1 = _mm512_add_epi32(r1, _mm512_maskz_loadu_epi32(m1, c + 16));
    }
    _mm512_mask_storeu_epi32(c, m0, r0);
    _mm512_mask_storeu_epi32(c + 16, m1, r1);
  }
}

template <bool DA>
void dispatch(int64_t ng, const uint32_t* Ap, const uint8_t* A, int64_t lda, const uint32_t* Bp, int32_t* C,
              int64_t ldc, int mr, int nr, int first) {
  switch (mr) {
    case 12: return tile<12, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 11: return tile<11, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 10: return tile<10, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 9: return tile<9, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 8: return tile<8, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 7: return tile<7, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 6: return tile<6, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 5: return tile<5, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 4: return tile<4, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 3: return tile<3, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 2: return tile<2, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    case 1: return tile<1, DA>(ng, Ap, A, lda, Bp, C, ldc, nr, first);
    default: return;
  }
}

void ukernel(int64_t ng, const uint32_t* Ap, const uint32_t* Bp, int32_t* C, int64_t ldc, int mr, int nr,
             int first) {
  dispatch<false>(ng, Ap, nullptr, 0, Bp, C, ldc, mr, nr, first);
}

void ukernel_da(int64_t ng, const uint8_t* A, int64_t lda, const uint32_t* Bp, int32_t* C, int64_t ldc, int mr, int nr,
                int first) {
  dispatch<true>(ng, nullptr, A, lda, Bp, C, ldc, mr, nr, first);
}

}  // namespace

IntKernel int_kernel() {
  return {"avx512vnni",           kMR, kNR, 4, &ukernel, &ukernel_da, &avx512::comp_row_avx512, &avx512::quant_u8_avx512,
          &avx512::range_avx512, &avx512::float_row_avx512};
}

}  // namespace avx512vnni
}  // namespace olc_mm
