// The first n lanes of an AVX2 float vector, loaded or stored without
// touching memory past them: the tails of rows shorter than a vector.
//
// C++, for translation units compiled with -mavx2 (OLC_AVX2_FLAGS) only.
// The store is at most two overlapping plain stores (4 + 4, 2 + 1 or one)
// rather than AVX2's masked store: vmaskmovps's store form is microcoded on
// AMD Zen (Zen 2, a 6-float row: 3.7 ns masked, 0.8 ns so). Its load form
// is one ordinary load there and on Intel, and stays; but in one copy loop
// (olc-matmul's copy_tail: a pointwise convolution's 6-float strip rows
// built between microkernel calls, Zen 3) the masked load took a quarter
// of the layer where two plain overlapping loads did not, though a
// standalone loop of the same copies showed no difference: measure a
// masked load in its hot loop before relying on it.
#ifndef OLC_AVX2_TAIL_H_
#define OLC_AVX2_TAIL_H_

#include <immintrin.h>

#include <cstdint>

namespace olc {
namespace avx2 {

// The mask of the first n (0 <= n <= 8) lanes, for _mm256_maskload_ps / _pd.
inline __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The first 0 <= n <= 8 floats at s, zeros after them.
inline __m256 load_first(const float* s, int64_t n) { return _mm256_maskload_ps(s, first_lanes(n)); }

// The first 0 <= n <= 8 lanes of v to d.
inline void store_first(float* d, __m256 v, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(d, v);
    return;
  }
  const __m128 lo = _mm256_castps256_ps128(v);
  if (n >= 4) {
    _mm_storeu_ps(d, lo);
    if (n > 4) {
      // lanes n - 4 .. n - 1 to d + n - 4 (overlapping the first store)
      const __m256i at = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 0, 0, 0, 0), _mm256_set1_epi32(int(n) - 4));
      _mm_storeu_ps(d + n - 4, _mm256_castps256_ps128(_mm256_permutevar8x32_ps(v, at)));
    }
  } else if (n >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(d), lo);
    if (n == 3) _mm_store_ss(d + 2, _mm_movehl_ps(lo, lo));
  } else if (n == 1) {
    _mm_store_ss(d, lo);
  }
}

}  // namespace avx2
}  // namespace olc

#endif  // OLC_AVX2_TAIL_H_
