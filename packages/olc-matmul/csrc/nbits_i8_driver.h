// MatMulNBits with int8 activations (accuracy_level 4): kernel choice,
// weight packing and the threaded run. Portable code; the kernels are in
// the nbits_i8_* files (see nbits_i8.h).
#ifndef OLC_MATMUL_NBITS_I8_DRIVER_H_
#define OLC_MATMUL_NBITS_I8_DRIVER_H_

#include <cstddef>
#include <cstdint>

#include "nbits_i8.h"
#include "olc/kernel_abi.h"

namespace olc_mm {

// The best kernels of the capped level: AVX512_VNNI, AVX-VNNI, AVX2
// (vpmaddubsw), scalar. use_vnni = false skips the VNNI ones (tests).
NbI8Kernels select_nbits_i8(const olc_core_api* api, bool use_vnni);

// Bytes nbits_i8_pack writes for N columns.
size_t nbits_i8_packed_bytes(int bits, int64_t bs, int64_t kb, int64_t N, NbZp zmode);

// Packs B [N, kb, blob] (the MatMulNBits layout) with its per-(column,
// block) scales and zero points ([N * kb] each: zp as values for kUint8,
// nzs = -scale * zp for kFloat; NULL where the mode has none) into dst
// (64-byte aligned, nbits_i8_packed_bytes long) and fills *w.
void nbits_i8_pack(int bits, int64_t bs, int64_t kb, int64_t N, const uint8_t* B, const float* scales, NbZp zmode,
                   const float* zp, const float* nzs, void* dst, NbI8Weights* w);

// Y [M, N] (row stride N) = the int8 product of A [M, K] (float32, row
// stride K) by the packed weights (+ bias [N], float32), over the session
// executor. Returns false when it cannot get its scratch memory.
bool nbits_i8_run(const olc_core_api* api, olc_context* ctx, const NbI8Kernels& ks, const NbI8Weights& w, int64_t K,
                  int64_t N, const float* A, int64_t M, const float* bias, float* Y);

}  // namespace olc_mm

#endif  // OLC_MATMUL_NBITS_I8_DRIVER_H_
