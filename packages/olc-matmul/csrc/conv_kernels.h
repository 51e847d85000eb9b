// The Conv loops around the GEMM: the depthwise convolution (which the GEMM
// does not serve) and the im2col tiles it multiplies, one table per ISA
// level. Plain structs and function pointers only: the per-ISA files
// compile the same loops (conv_kernels.inc) with their own flags.
#ifndef OLC_MATMUL_CONV_KERNELS_H_
#define OLC_MATMUL_CONV_KERNELS_H_

#include <cstdint>

namespace olc_mm {

// An activation a fused Conv applies to its output as each tile is stored
// (ONNX semantics; NaN propagates through every kind):
//   Relu         max(x, 0)
//   Clip         min(max(x, a), b)
//   LeakyRelu    x < 0 ? a x : x
//   HardSigmoid  max(0, min(1, a x + b))
//   Sigmoid      1 / (1 + exp(-x))
//   HardSwish    x max(0, min(1, x / 6 + 1 / 2))
enum class ActKind : int32_t { kNone = 0, kRelu, kClip, kLeakyRelu, kHardSigmoid, kSigmoid, kHardSwish };
struct Activation {
  ActKind kind = ActKind::kNone;
  float a = 0.0f, b = 0.0f;
};

// One depthwise plane: output rows [r0, r1) of the flattened (od, oh) rows
// of y[OD, OH, OW] from x[ID, IH, IW] and the taps w[KD, KH, KW]:
//   y[o] = bias + sum over taps of w[t] * x[o * s - pb + t * d]
// (positions outside x count as zero; the output extents never reach past
// the end pads pe). Every spatial triple is 3-D: a 1-D
// or 2-D convolution has leading dimensions of size 1.
struct DwPlane {
  const float* x;
  const float* w;
  float bias;
  float* y;  // the plane's output (row r at y + r * OW)
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];  // pads at the start and end
  int64_t r0, r1;
  const Activation* act;  // applied to each output row; NULL: none
};

// Rows [k0, k0 + kc) x output columns [s0, s0 + nc) of one group's im2col
// matrix (row k = (ci, kd, kh, kw), column = output position), in float32,
// row-major with row stride ldt; columns nc .. ldt zero. x is the group's
// first input channel (float32, float16 or bfloat16, dtype an ONNX code).
struct Im2colTile {
  const void* x;
  int32_t dtype;
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
  int64_t k0, kc, s0, nc, ldt;
  float* tile;
};

struct ConvKernels {
  const char* name;
  void (*depthwise)(const DwPlane* p);
  void (*im2col)(const Im2colTile* t);
  // rows x cols values at y (row stride ld) through the activation, in place.
  void (*activate)(const Activation* act, float* y, int64_t rows, int64_t cols, int64_t ld);
};

namespace scalar { const ConvKernels* conv_kernels(); }
namespace avx2 { const ConvKernels* conv_kernels(); }
namespace avx512 { const ConvKernels* conv_kernels(); }

}  // namespace olc_mm

#endif  // OLC_MATMUL_CONV_KERNELS_H_
