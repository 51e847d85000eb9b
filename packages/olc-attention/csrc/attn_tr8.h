// The 8 x 8 float32 transpose on 256-bit vectors, for the TUs compiled with
// AVX2 (the AVX-512 level includes it): out[d * ld + j] = rows[j][d0 + d].
// Included inside each of those TUs' own namespace (internal linkage), so
// no copy compiled with one ISA's flags can replace another's.
static inline void tr8_avx(const float* const* rows, int64_t d0, float* out, int64_t ld) {
  const __m256 r0 = _mm256_loadu_ps(rows[0] + d0), r1 = _mm256_loadu_ps(rows[1] + d0);
  const __m256 r2 = _mm256_loadu_ps(rows[2] + d0), r3 = _mm256_loadu_ps(rows[3] + d0);
  const __m256 r4 = _mm256_loadu_ps(rows[4] + d0), r5 = _mm256_loadu_ps(rows[5] + d0);
  const __m256 r6 = _mm256_loadu_ps(rows[6] + d0), r7 = _mm256_loadu_ps(rows[7] + d0);
  // Pairs of rows interleaved, then 4-row columns (column c | c + 4), then halves.
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  _mm256_storeu_ps(out + 0 * ld, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(out + 1 * ld, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(out + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(out + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(out + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(out + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(out + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(out + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}
