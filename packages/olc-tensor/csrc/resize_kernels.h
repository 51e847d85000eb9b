// Float32 resampling passes of Resize / Upsample (linear and cubic, with or
// without antialias): resize.cc resamples one axis at a time from per-axis
// tap tables (source index and weight per output position and tap).
//   taps_inner: the innermost axis, dst[o] = sum_t w[o*k + t] * src[idx[o*k + t]]
//   taps_blocks: the innermost axis in blocks of 16 outputs whose taps read
//               at most 32 consecutive sources (upsampling, mild
//               downsampling): block b reads src[lo[b] .. lo[b] + cnt[b]) and
//               dst[16b + j] = sum_t w[(b*k + t)*16 + j] * src[lo[b] + rel[(b*k + t)*16 + j]]
//               (AVX-512: two loads and a permute per tap instead of gathers)
//   combine:    an outer axis, whole contiguous blocks:
//               dst[i] = sum_t w[t] * rows[t][i], i < n
// Scalar, AVX2 and AVX-512 variants; the sums run in the same tap order at
// every level (float32 multiply, then add), so the levels agree exactly.
#ifndef OLC_TENSOR_RESIZE_KERNELS_H_
#define OLC_TENSOR_RESIZE_KERNELS_H_

#include <cstdint>

namespace olc_tn {

struct ResizeF32 {
  void (*taps_inner)(float* dst, const float* src, const int32_t* idx, const float* w, int32_t k, int64_t n_out);
  void (*taps_blocks)(float* dst, const float* src, const int32_t* lo, const int32_t* cnt, const int32_t* rel,
                      const float* w, int32_t k, int64_t nb);
  void (*combine)(float* dst, const float* const* rows, const float* w, int32_t k, int64_t n);
  const char* isa;
};

// Output positions [o, n_out) of taps_inner one at a time: the scalar pass
// and the vector passes' tails. Internal linkage (static): each ISA's
// translation unit keeps its own copy, compiled with its own flags, so the
// linker never hands the scalar level a copy built for AVX-512.
static inline void taps_inner_from(float* dst, const float* src, const int32_t* idx, const float* w, int32_t k,
                                   int64_t o, int64_t n_out) {
  for (; o < n_out; ++o) {
    const int32_t* ix = idx + o * k;
    const float* wo = w + o * k;
    float s = wo[0] * src[ix[0]];
    for (int32_t t = 1; t < k; ++t) s += wo[t] * src[ix[t]];
    dst[o] = s;
  }
}

namespace scalar { ResizeF32 resize_f32(); }
namespace avx2 { ResizeF32 resize_f32(); }
namespace avx512 { ResizeF32 resize_f32(); }

}  // namespace olc_tn

#endif  // OLC_TENSOR_RESIZE_KERNELS_H_
