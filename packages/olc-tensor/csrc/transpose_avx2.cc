// AVX2 transpose tiles: 8x8 blocks of 4-byte elements and 4x4 blocks of
// 8-byte elements in registers; the ragged edges go to the scalar tile.
#include <immintrin.h>

#include "transpose_kernels.h"

namespace olc_tn {
namespace avx2 {
namespace {

inline void block8x8(const float* s, int64_t sld, float* d, int64_t dld) {
  __m256 r0 = _mm256_loadu_ps(s + 0 * sld), r1 = _mm256_loadu_ps(s + 1 * sld);
  __m256 r2 = _mm256_loadu_ps(s + 2 * sld), r3 = _mm256_loadu_ps(s + 3 * sld);
  __m256 r4 = _mm256_loadu_ps(s + 4 * sld), r5 = _mm256_loadu_ps(s + 5 * sld);
  __m256 r6 = _mm256_loadu_ps(s + 6 * sld), r7 = _mm256_loadu_ps(s + 7 * sld);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(d + 0 * dld, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + 1 * dld, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + 2 * dld, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + 3 * dld, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + 4 * dld, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + 5 * dld, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + 6 * dld, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + 7 * dld, _mm256_permute2f128_ps(u3, u7, 0x31));
}

inline void block4x4(const double* s, int64_t sld, double* d, int64_t dld) {
  const __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + sld);
  const __m256d r2 = _mm256_loadu_pd(s + 2 * sld), r3 = _mm256_loadu_pd(s + 3 * sld);
  const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
  const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
  _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
  _mm256_storeu_pd(d + dld, _mm256_permute2f128_pd(t1, t3, 0x20));
  _mm256_storeu_pd(d + 2 * dld, _mm256_permute2f128_pd(t0, t2, 0x31));
  _mm256_storeu_pd(d + 3 * dld, _mm256_permute2f128_pd(t1, t3, 0x31));
}

}  // namespace

void transpose_4(const void* src, int64_t sld, void* dst, int64_t dld, int64_t na, int64_t nb) {
  const float* s = static_cast<const float*>(src);
  float* d = static_cast<float*>(dst);
  const int64_t na8 = na / 8 * 8, nb8 = nb / 8 * 8;
  // Two 8x8 blocks side by side per source row group: each 64-byte source
  // line is used whole while it is in L1 (rows a power-of-two apart share
  // L1 sets, so a line left half-used is usually gone when wanted again).
  const int64_t na16 = na8 / 16 * 16;
  for (int64_t a = 0; a < na16; a += 16)
    for (int64_t b = 0; b < nb8; b += 8) {
      block8x8(s + b * sld + a, sld, d + a * dld + b, dld);
      block8x8(s + b * sld + a + 8, sld, d + (a + 8) * dld + b, dld);
    }
  for (int64_t a = na16; a < na8; a += 8)
    for (int64_t b = 0; b < nb8; b += 8) block8x8(s + b * sld + a, sld, d + a * dld + b, dld);
  if (nb8 < nb) scalar::transpose_4(s + nb8 * sld, sld, d + nb8, dld, na, nb - nb8);
  if (na8 < na) scalar::transpose_4(s + na8, sld, d + na8 * dld, dld, na - na8, nb8);
}

void transpose_8(const void* src, int64_t sld, void* dst, int64_t dld, int64_t na, int64_t nb) {
  const double* s = static_cast<const double*>(src);
  double* d = static_cast<double*>(dst);
  const int64_t na4 = na / 4 * 4, nb4 = nb / 4 * 4;
  const int64_t na8 = na4 / 8 * 8;  // whole 64-byte source lines, as above
  for (int64_t a = 0; a < na8; a += 8)
    for (int64_t b = 0; b < nb4; b += 4) {
      block4x4(s + b * sld + a, sld, d + a * dld + b, dld);
      block4x4(s + b * sld + a + 4, sld, d + (a + 4) * dld + b, dld);
    }
  for (int64_t a = na8; a < na4; a += 4)
    for (int64_t b = 0; b < nb4; b += 4) block4x4(s + b * sld + a, sld, d + a * dld + b, dld);
  if (nb4 < nb) scalar::transpose_8(s + nb4 * sld, sld, d + nb4, dld, na, nb - nb4);
  if (na4 < na) scalar::transpose_8(s + na4, sld, d + na4 * dld, dld, na - na4, nb4);
}

}  // namespace avx2
}  // namespace olc_tn
