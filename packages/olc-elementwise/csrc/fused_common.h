// Shared declarations of the fused elementwise kernel (ElementwisePlan):
// the tile primitives each ISA level provides. Plain data only, so this
// header is safe to include from TUs compiled with different ISA flags.
#ifndef OLC_ELEMENTWISE_FUSED_COMMON_H_
#define OLC_ELEMENTWISE_FUSED_COMMON_H_

#include <cstdint>

namespace olc_ew {

// The binary arithmetic steps of a fused program.
enum class FusedBinOp : int { kAdd = 0, kSub, kMul, kDiv };

// Tile primitives over float32 arrays of n elements. An operand flagged
// scalar is the one value *a (or *b) for every element. d never overlaps a
// or b unless it is the same pointer. Compute functions only assert.
struct FusedTileOps {
  void (*binary)(FusedBinOp op, const float* a, bool a_scalar, const float* b, bool b_scalar, float* d,
                 int64_t n);
  // bfloat16 -> float32 (exact) and float32 -> bfloat16 (round to nearest
  // even, NaN kept quiet), n elements.
  void (*load_bf16)(const uint16_t* src, float* dst, int64_t n);
  void (*store_bf16)(const float* src, uint16_t* dst, int64_t n);
  // The SwiGLU gate y = (g * Sigmoid(g)) * u over float32, one pass with the
  // intermediates in registers; the same bits as the three steps apart.
  // nullptr where the level has none (the tile steps run instead).
  void (*swiglu)(const float* g, const float* u, float* y, int64_t n);
  // The same over bfloat16 storage: widened exactly, computed in float32,
  // rounded once (the bits of the tile steps on bfloat16).
  void (*swiglu_bf16)(const uint16_t* g, const uint16_t* u, uint16_t* y, int64_t n);
  // y = (x * s) + m over float32 (s one value): the scaled, masked scores
  // program in one pass; two roundings, as the two steps apart.
  void (*scale_add)(const float* x, float s, const float* m, float* y, int64_t n);
  // The same, writing y's 64-byte aligned body with non-temporal stores (for
  // outputs far larger than the caches; the same bits), and the fence that
  // orders those stores, issued once after a thread's last call. nullptr
  // where the level has no such stores.
  void (*scale_add_stream)(const float* x, float s, const float* m, float* y, int64_t n);
  void (*stream_fence)();
};

namespace scalar { const FusedTileOps* fused_tile_ops(); }
namespace avx2 { const FusedTileOps* fused_tile_ops(); }
namespace avx512 { const FusedTileOps* fused_tile_ops(); }

}  // namespace olc_ew

#endif  // OLC_ELEMENTWISE_FUSED_COMMON_H_
