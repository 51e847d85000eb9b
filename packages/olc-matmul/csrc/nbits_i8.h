// MatMulNBits with int8 activations (accuracy_level 4): the types shared by
// the portable driver (nbits_i8_driver.cc) and the per-ISA kernels
// (nbits_i8_scalar.cc, and nbits_i8_kernels.inc compiled as
// nbits_i8_avx2.cc, nbits_i8_avxvnni.cc, nbits_i8_avx512vnni.cc).
//
// Activations: each row of A is cut into blocks of block_size k and every
// block quantized symmetrically to int8:
//   amax = max |a|, scale = amax / 127, q = rne(a * (127 / amax))
// (q = 0 for a block whose amax is 0, below 2^-96, infinite or NaN; its
// scale then carries the NaN or infinity into the results). With the
// weights' block scale s and zero point z, one block contributes
//   scale * s * (sum q * w  -  z * sum q)
// so the dot products are exact integer sums and only the per-block
// combination is float.
//
// Weights are repacked (once, at create(), for constant ones) into groups
// of kNbGroup = 16 columns, each group K-contiguous: per block, per unit of
// 32 / bits * 4 k, 64 bytes where byte 4 j + t holds column j's values
// k + t, k + t + 4, ... (one per `bits` bit field, low bits first), so one
// mask and shift per field gives a vector of 16 columns x 4 consecutive k
// as vpdpbusd / vpmaddubsw take them (8-bit: one k quad; 4-bit: k quads at
// k and k + 4; 2-bit: four k quads).
#ifndef OLC_MATMUL_NBITS_I8_H_
#define OLC_MATMUL_NBITS_I8_H_

#include <cstddef>
#include <cstdint>

namespace olc_mm {

constexpr int kNbGroup = 16;  // columns per packed group

enum class NbZp : int32_t {
  kDefault = 0,  // no zero points: 2^(bits - 1)
  kUint8 = 1,    // integer zero points, one byte per (column, block)
  kFloat = 2,    // float zero points: a float correction -s * z per (column, block)
};

// Quantized rows of A: q [M][kb * bs] (blocks zero padded past K), and per
// row and block the scale, the integer sum of q and scale * sum (float32).
struct NbQuantA {
  int64_t stride;  // kb * bs
  const int8_t* q;
  const float* scale;   // [M][kb]
  const int32_t* sum;   // [M][kb]
  const float* ssum;    // [M][kb]
};

// Packed weights (see above). Column groups past N are zero (scale 0).
struct NbI8Weights {
  int bits;
  int64_t bs, kb, groups;
  NbZp zmode;
  const uint8_t* q;      // group g at q + g * gstride
  int64_t gstride;       // bytes per group: kb * bs * 2 * bits
  const float* scale;    // [groups][kb][16]
  const uint8_t* zp;     // kUint8: [groups][kb][16]
  const float* nzs;      // kFloat: [groups][kb][16], -scale * zero point
};

// One call: rows [m0, m1) x column groups [g0, g1) over K blocks [b0, b1).
// b0 > 0: y already holds the sums of the earlier blocks; b1 == kb: the
// bias (if any) is added. Stores only columns < N.
struct NbI8Run {
  const NbQuantA* a;
  const NbI8Weights* w;
  const float* bias;  // [N] or NULL
  float* y;
  int64_t ldy, N;
  int64_t m0, m1, g0, g1, b0, b1;
};

struct NbI8Kernels {
  const char* name;
  // One row of A (K values) -> q (kb * bs bytes), scale, sum, ssum (kb each).
  void (*quantize)(const float* a, int64_t K, int64_t bs, int64_t kb, int8_t* q, float* scale, int32_t* sum,
                   float* ssum);
  void (*run)(const NbI8Run* r);
};

// 127 / amax, or 0 where the block quantizes to zeros (amax 0, below
// 2^-96 where 127 / amax could overflow, infinite or NaN). `static`: each
// ISA file gets its own copy, none merged into another's code.
static inline float nb_inv_scale(float amax) {
  return (amax >= 0x1p-96f && amax <= 3.40282347e38f) ? 127.0f / amax : 0.0f;
}

namespace scalar { NbI8Kernels nbits_i8_kernels(); }
namespace avx2 { NbI8Kernels nbits_i8_kernels(); }
namespace avxvnni { NbI8Kernels nbits_i8_kernels(); }
namespace avx512vnni { NbI8Kernels nbits_i8_kernels(); }

}  // namespace olc_mm

#endif  // OLC_MATMUL_NBITS_I8_H_
