// AMX-INT8 block for the integer GEMM: C[32 x 32] int32 (+)= A[32 x 4 ng]
// (uint8, read in place) x B (the avx512vnni kernel's packed panel: ng
// group rows of 32 columns x 4 signed bytes), as four 16 x 16 tdpbusd
// tiles; ng a multiple of 16 (64 k per step). Compiled with -mamx-tile
// -mamx-int8; entered only when cpu_features() reports AMX_TILE and
// AMX_INT8 (olc-core has asked the kernel for the tile-data permission).
#include <immintrin.h>

#include <cstdint>

#include "amx_tiles.h"
#include "mm_common.h"

namespace olc_mm {
namespace amx {

namespace {

// Palette 1: tiles 0-3 C (16 rows x 16 int32), 4-5 A (16 rows x 64 bytes),
// 6-7 B (16 group rows x 16 columns x 4 bytes).
struct alignas(64) TileConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// A constant, not a local filled before ldtilecfg: GCC 12 does not see the
// instruction read its operand and drops the stores that fill it.
const TileConfig kConfig = {1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

}  // namespace

void begin() { _tile_loadconfig(&kConfig); }

void end() { _tile_release(); }

void block_32x32(int64_t ng, const uint8_t* A, int64_t lda, const uint32_t* Bp, int32_t* C, int64_t ldc, int first) {
  c_tiles_begin(C, ldc, first);
  for (int64_t q = 0; q < ng; q += 16) {
    _tile_loadd(4, A + 4 * q, lda);
    _tile_loadd(5, A + 16 * lda + 4 * q, lda);
    _tile_loadd(6, Bp + q * 32, 128);
    _tile_loadd(7, Bp + q * 32 + 16, 128);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  c_tiles_store(C, ldc);
}

}  // namespace amx
}  // namespace olc_mm
