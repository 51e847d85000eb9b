// Strided loop nests of Einsum (permutes, reductions, the small products
// the GEMM is not worth calling for), one table per ISA level. Plain
// structs and function pointers only: the per-ISA files compile the same
// loops (einsum_loops.inc) with their own flags.
#ifndef OLC_MATMUL_EINSUM_LOOPS_H_
#define OLC_MATMUL_EINSUM_LOOPS_H_

#include <cstdint>

namespace olc_mm {

// One loop of a nest: n iterations, strides in elements of the operands A,
// B and the destination C (sc == 0: a summed loop).
struct LoopDim {
  int64_t n, sa, sb, sc;
};

// Element kinds of the loops (integer kinds by width: wrapping unsigned
// arithmetic gives the same bits for signed and unsigned types).
enum : int32_t {
  OLC_EINSUM_FLOAT = 1,
  OLC_EINSUM_DOUBLE = 2,
  OLC_EINSUM_FLOAT16 = 3,
  OLC_EINSUM_BFLOAT16 = 4,
  OLC_EINSUM_INT8 = 5,
  OLC_EINSUM_INT16 = 6,
  OLC_EINSUM_INT32 = 7,
  OLC_EINSUM_INT64 = 8,
};

// Accumulators: double for every float type, uint64 (wrapping) for every
// integer type; 8 bytes each.
struct EinsumLoops {
  const char* name;
  // C[c] = A[a] over the nest (elements of esize bytes: 1, 2, 4 or 8).
  void (*permute)(int esize, int nd, const LoopDim* dims, const void* a, void* c);
  // acc[c] += A[a] * B[b] (B NULL: acc[c] += A[a]) over the nest; acc holds
  // 8-byte accumulators, zeroed by the caller.
  void (*accumulate)(int32_t kind, int nd, const LoopDim* dims, const void* a, const void* b, void* acc);
  // C[c] = acc[a] rounded to the kind over the nest (sa: accumulator stride).
  void (*store)(int32_t kind, int nd, const LoopDim* dims, const void* acc, void* c);
};

namespace scalar { const EinsumLoops* einsum_loops(); }
namespace avx2 { const EinsumLoops* einsum_loops(); }
namespace avx512 { const EinsumLoops* einsum_loops(); }

}  // namespace olc_mm

#endif  // OLC_MATMUL_EINSUM_LOOPS_H_
