// bfloat16 microkernel with AVX512_BF16: vdpbf16ps multiplies pairs of
// bfloat16 (two consecutive k) and accumulates in float32, two products per
// lane per instruction. Tile 12 x 32: 24 zmm accumulators. Compiled with
// -mavx512bf16; entered only when cpu_features() reports AVX512_BF16.
#include <immintrin.h>

#include "mm_common.h"

namespace olc_mm {
namespace avx512bf16 {
namespace {

constexpr int kMR = 12;
constexpr int kNR = 32;

template <int M>
void tile(int64_t kc2, const uint16_t* Ap16, const uint16_t* Bp, float* C, int64_t ldc, int nr, int flags,
          const Epi<float>* ep) {
  const uint32_t* Ap = reinterpret_cast<const uint32_t*>(Ap16);
  __m512 acc[M][2];
#pragma GCC unroll 12
  for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < kc2; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(Bp);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(Bp + 32);
#pragma GCC unroll 12
    for (int i = 0; i < M; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(Ap[i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, b1);
    }
    Bp += 2 * kNR;
    Ap += kMR;
  }
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xffff) : __mmask16((1u << nr) - 1u);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xffff) : nr > 16 ? __mmask16((1u << (nr - 16)) - 1u) : __mmask16(0);
  const bool first = flags & kFirst, last = flags & kLast;
  const __m512 alpha = _mm512_set1_ps(last ? ep->alpha : 1.0f);
  const __m512 beta = _mm512_set1_ps(last ? ep->beta : 0.0f);
#pragma GCC unroll 12
  for (int i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    __m512 r0 = acc[i][0], r1 = acc[i][1];
    if (!first) {
      r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, c));
      r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, c + 16));
    }
    if (last) {
      r0 = _mm512_mul_ps(r0, alpha);
      r1 = _mm512_mul_ps(r1, alpha);
      if (ep->bias) {
        const float* bp = ep->bias + i * ep->bias_rs;
        __m512 c0, c1;
        if (ep->bias_cs) {
          c0 = _mm512_maskz_loadu_ps(m0, bp);
          c1 = _mm512_maskz_loadu_ps(m1, bp + 16);
        } else {
          c0 = c1 = _mm512_set1_ps(bp[0]);
        }
        r0 = _mm512_fmadd_ps(c0, beta, r0);
        r1 = _mm512_fmadd_ps(c1, beta, r1);
      }
    }
    _mm512_mask_storeu_ps(c, m0, r0);
    _mm512_mask_storeu_ps(c + 16, m1, r1);
  }
}

void ukernel(int64_t kc2, const uint16_t* Ap, const uint16_t* Bp, float* C, int64_t ldc, int mr, int nr, int flags,
             const Epi<float>* ep) {
  switch (mr) {
    case 12: return tile<12>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 11: return tile<11>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 10: return tile<10>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 9: return tile<9>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 8: return tile<8>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 7: return tile<7>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 6: return tile<6>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 5: return tile<5>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 4: return tile<4>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 3: return tile<3>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 2: return tile<2>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    case 1: return tile<1>(kc2, Ap, Bp, C, ldc, nr, flags, ep);
    default: return;
  }
}

}  // namespace

UKernelBf16 uk_bf16(int* mr, int* nr) {
  *mr = kMR;
  *nr = kNR;
  return &ukernel;
}

}  // namespace avx512bf16
}  // namespace olc_mm
