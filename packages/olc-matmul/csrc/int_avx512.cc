// AVX-512BW integer microkernel: int16 pairs through vpmaddwd (exact for any
// int8/uint8 operands). Tile 12 x 32.
#include <immintrin.h>

#include "mm_common.h"

namespace olc_mm {
namespace avx512 {
namespace {

constexpr int kMR = 12, kNR = 32;

template <int M>
void tile(int64_t ng, const uint32_t* Ap, const uint32_t* Bp, int32_t* C, int64_t ldc, int nr, int first) {
  __m512i acc[M][2];
#pragma GCC unroll 12
  for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
  for (int64_t q = 0; q < ng; ++q) {
    __m512i b[2];
    b[0] = _mm512_loadu_si512(Bp);
    b[1] = _mm512_loadu_si512(Bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < M; ++i) {
      const __m512i a = _mm512_set1_epi32(static_cast<int>(Ap[i]));
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) acc[i][v] = _mm512_add_epi32(acc[i][v], _mm512_madd_epi16(a, b[v]));
    }
    Ap += kMR;
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

void ukernel(int64_t ng, const uint32_t* Ap, const uint32_t* Bp, int32_t* C, int64_t ldc, int mr, int nr,
             int first) {
  switch (mr) {
    case 12: return tile<12>(ng, Ap, Bp, C, ldc, nr, first);
    case 11: return tile<11>(ng, Ap, Bp, C, ldc, nr, first);
    case 10: return tile<10>(ng, Ap, Bp, C, ldc, nr, first);
    case 9: return tile<9>(ng, Ap, Bp, C, ldc, nr, first);
    case 8: return tile<8>(ng, Ap, Bp, C, ldc, nr, first);
    case 7: return tile<7>(ng, Ap, Bp, C, ldc, nr, first);
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

void comp_row_avx512(uint32_t* c, int64_t n, uint32_t rc, const uint32_t* ct) {
  const __m512i r = _mm512_set1_epi32(static_cast<int32_t>(rc));
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512i v = _mm512_loadu_si512(c + j);
    _mm512_storeu_si512(c + j, _mm512_sub_epi32(_mm512_sub_epi32(v, r), _mm512_loadu_si512(ct + j)));
  }
  if (j < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - j)) - 1u);
    const __m512i v = _mm512_maskz_loadu_epi32(m, c + j);
    _mm512_mask_storeu_epi32(c + j, m, _mm512_sub_epi32(_mm512_sub_epi32(v, r), _mm512_maskz_loadu_epi32(m, ct + j)));
  }
}

void quant_u8_avx512(const float* x, int64_t n, float scale, int32_t zp, uint8_t* q) {
  const __m512 s = _mm512_set1_ps(scale);
  const __m512i z = _mm512_set1_epi32(zp), lo = _mm512_setzero_si512(), hi = _mm512_set1_epi32(255);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), s);
    __m512i r = _mm512_add_epi32(_mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    r = _mm512_min_epi32(_mm512_max_epi32(r, lo), hi);
    _mm_mask_storeu_epi8(q + i, m, _mm512_cvtepi32_epi8(r));
  }
}

bool range_avx512(const float* x, int64_t n, float* lo, float* hi) {
  __m512 vlo = _mm512_setzero_ps(), vhi = _mm512_setzero_ps(), bad = _mm512_setzero_ps();
  int64_t i = 0;
  // Four vectors a step into their own accumulators: one min, max and add
  // chain ran at one vector per 4-cycle latency.
  if (n >= 64) {
    __m512 lo4[4], hi4[4], bad4[4];
    for (int u = 0; u < 4; ++u) lo4[u] = hi4[u] = bad4[u] = _mm512_setzero_ps();
    for (; i + 64 <= n; i += 64)
      for (int u = 0; u < 4; ++u) {
        const __m512 v = _mm512_loadu_ps(x + i + 16 * u);
        lo4[u] = _mm512_min_ps(lo4[u], v);
        hi4[u] = _mm512_max_ps(hi4[u], v);
        bad4[u] = _mm512_add_ps(bad4[u], _mm512_sub_ps(v, v));
      }
    vlo = _mm512_min_ps(_mm512_min_ps(lo4[0], lo4[1]), _mm512_min_ps(lo4[2], lo4[3]));
    vhi = _mm512_max_ps(_mm512_max_ps(hi4[0], hi4[1]), _mm512_max_ps(hi4[2], hi4[3]));
    bad = _mm512_add_ps(_mm512_add_ps(bad4[0], bad4[1]), _mm512_add_ps(bad4[2], bad4[3]));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    vlo = _mm512_min_ps(vlo, v);
    vhi = _mm512_max_ps(vhi, v);
    bad = _mm512_add_ps(bad, _mm512_sub_ps(v, v));  // NaN from an infinity or NaN, kept by the sum
  }
  *lo = _mm512_reduce_min_ps(vlo);
  *hi = _mm512_reduce_max_ps(vhi);
  return _mm512_reduce_add_ps(bad) == 0.0f;
}

void float_row_avx512(uint32_t* c, int64_t n, uint32_t ra, const uint32_t* zb, uint32_t zb0, const uint32_t* ct,
                      const float* mult, const float* bias) {
  const __m512i vra = _mm512_set1_epi32(static_cast<int>(ra));
  const __m512i rc = _mm512_set1_epi32(static_cast<int>(zb0 * ra));
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - j)) - 1u);
    __m512i v = _mm512_maskz_loadu_epi32(m, c + j);
    v = _mm512_sub_epi32(v, zb ? _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(m, zb + j), vra) : rc);
    v = _mm512_sub_epi32(v, _mm512_maskz_loadu_epi32(m, ct + j));
    const __m512 y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_maskz_loadu_ps(m, mult + j),
                                     _mm512_maskz_loadu_ps(m, bias + j));
    _mm512_mask_storeu_ps(reinterpret_cast<float*>(c + j), m, y);
  }
}

IntKernel int_kernel() {
  return {"avx512", kMR, kNR, 2, &ukernel, nullptr, &comp_row_avx512, &quant_u8_avx512, &range_avx512,
          &float_row_avx512};
}

}  // namespace avx512
}  // namespace olc_mm
