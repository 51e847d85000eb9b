// The C side of the 32 x 32 AMX blocks (int_amx.cc, mm_amx_bf16.cc): tiles
// 0-3 hold C as four 16 x 16 quarters of 4-byte values (int32 or float32),
// row stride ldc elements. Included only by files compiled with -mamx-tile.
#ifndef OLC_MATMUL_AMX_TILES_H_
#define OLC_MATMUL_AMX_TILES_H_

#include <immintrin.h>

#include <cstdint>

namespace olc_mm {
namespace amx {

// Tiles 0-3 cleared (first) or loaded from C.
template <typename T>
inline void c_tiles_begin(const T* C, int64_t ldc, bool first) {
  static_assert(sizeof(T) == 4, "AMX accumulators are 4 bytes");
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    return;
  }
  const int64_t cs = ldc * 4;
  _tile_loadd(0, C, cs);
  _tile_loadd(1, C + 16, cs);
  _tile_loadd(2, C + 16 * ldc, cs);
  _tile_loadd(3, C + 16 * ldc + 16, cs);
}

template <typename T>
inline void c_tiles_store(T* C, int64_t ldc) {
  const int64_t cs = ldc * 4;
  _tile_stored(0, C, cs);
  _tile_stored(1, C + 16, cs);
  _tile_stored(2, C + 16 * ldc, cs);
  _tile_stored(3, C + 16 * ldc + 16, cs);
}

}  // namespace amx
}  // namespace olc_mm

#endif  // OLC_MATMUL_AMX_TILES_H_
