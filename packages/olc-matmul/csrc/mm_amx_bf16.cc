// AMX-BF16 block for the bfloat16 GEMM: C[32 x 32] float32 (+)= A[32 x 32 s]
// (bfloat16, read in place, row stride lda) x 32 columns of the vdpbf16ps
// kernel's packed k-pair panel, as four 16 x 16 tdpbf16ps tiles, 32 k per
// step. The tile shapes are those amx::begin() configures for the integer
// block (every tile 16 rows x 64 bytes). Compiled with -mamx-tile
// -mamx-bf16; entered only when cpu_features() reports AMX_TILE and AMX_BF16.
#include <immintrin.h>

#include <cstdint>

#include "amx_tiles.h"
#include "mm_common.h"

namespace olc_mm {
namespace amx {

void bf16_block_32x32(int64_t steps, const uint16_t* A, int64_t lda, const uint16_t* Bp, float* C, int64_t ldc,
                      int first) {
  const int64_t as = lda * 2;
  c_tiles_begin(C, ldc, first);
  // One step: 16 k-pairs; a pair row of the panel is 32 columns x 2 values.
  for (int64_t s = 0; s < steps; ++s) {
    _tile_loadd(4, A + 32 * s, as);
    _tile_loadd(5, A + 16 * lda + 32 * s, as);
    _tile_loadd(6, Bp + s * 1024, 128);
    _tile_loadd(7, Bp + s * 1024 + 32, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  c_tiles_store(C, ldc);
}

}  // namespace amx
}  // namespace olc_mm
