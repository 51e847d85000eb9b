// The generic strided copy behind Slice, Expand, Tile and Transpose:
// dst (contiguous, shape oshape) [i] = src[base + sum_k i_k * istride[k]],
// strides in elements (negative and zero allowed).
#ifndef OLC_TENSOR_STRIDED_H_
#define OLC_TENSOR_STRIDED_H_

#include <cstddef>
#include <cstdint>

#include "common.h"

namespace olc_tn {

void strided_copy(olc_context* ctx, size_t elem_size, const char* src, int64_t base, char* dst, int rank,
                  const int64_t* oshape, const int64_t* istride, int64_t min_parallel_bytes);

// One row: dst[i] = src[i * stride], i < n (elements of elem_size bytes).
void row_copy(size_t elem_size, const char* src, int64_t stride, char* dst, int64_t n);

}  // namespace olc_tn

#endif  // OLC_TENSOR_STRIDED_H_
