// The Conv loops around the GEMM: the depthwise convolution (which the GEMM
// does not serve) and the im2col panels it multiplies, one table per ISA
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
//   Swish        x sigmoid(a x) (SiLU at a = 1: x * Sigmoid(x) as exporters write it)
// then, when `post` is set, y * post_scale + post_shift (a scalar affine
// after the activation, as PP-LCNet's blocks have: the conv loops' act_vec
// applies it, the microkernels' epilogue only after HardSwish).
enum class ActKind : int32_t { kNone = 0, kRelu, kClip, kLeakyRelu, kHardSigmoid, kSigmoid, kHardSwish, kSwish };
struct Activation {
  ActKind kind = ActKind::kNone;
  float a = 0.0f, b = 0.0f;
  bool post = false;
  float post_scale = 1.0f, post_shift = 0.0f;
};

// Whether the direct depthwise loop runs a plane's rows eight at a time
// (four below AVX-512) sharing their input loads (dw_rows3): 2-D 3x3 taps
// (a padded depth pd of 1: one output depth, its rows one run), H
// dilation 1, H stride 1 or 2. The adapter's choice of the blocked kernel
// reads the same rule.
inline bool dw_rows3_applies(int64_t pd, int64_t kh, int64_t kw, int64_t dh, int64_t sh) {
  return pd == 1 && kh == 3 && kw == 3 && dh == 1 && (sh == 1 || sh == 2);
}

// Whether those rows read their taps straight from the input rows, at W
// stride 2 and (with H stride 1) 1, W dilation 1, instead of from a padded
// copy (dw_direct3, AVX-512 only: lanes 16), for rows of ow >= 12
// positions: narrower ones waste a quarter of each vector or more and stay
// with the blocked kernel (one thread, AVX-512, blocked -> direct: 3x3
// stride 2 128@28 29 -> 19.5 us, 96@28 33.5 -> 30, stride 1 576@14 70 ->
// 55; but 96@16 stride 2, 8 positions a row, 11.5 -> 15; 96@12 stride 1
// even). The adapter's choice of the blocked kernel reads this rule too.
// G: the adapter's Geom or a DwPlane (spatial triples in, out, k, s, d,
// pb, pe, a 2-D convolution's leading extent 1).
template <class G>
inline bool dw_direct3_applies(int lanes, const G& g) {
  const int64_t sh = g.s[1], sw = g.s[2];
  return lanes == 16 && dw_rows3_applies(g.in[0] + g.pb[0] + g.pe[0], g.k[1], g.k[2], g.d[1], sh) &&
         (sw == 2 || (sw == 1 && sh == 1)) && g.d[2] == 1 && 4 * g.out[2] >= 3 * lanes;
}

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

// The input of the implicit GEMM: float32, zero padded, each padded row
// split into sw phase rows (padded columns p, p + sw, p + 2 sw, ... for
// p < sw) so that a run of output positions along W reads consecutive
// values at any stride. Channel c, padded depth d, padded row h, phase p:
// Wq values at c * cs + ((d * Hp + h) * sw + p) * Wq.
struct PadLayout {
  int64_t Dp, Hp, sw, Wq, cs;
};

// l cut to padded rows [r0, r1) of one depth: the layout of a task's own
// copy of the rows it reads (PadCopy::dst_r0 = r0 writes into it).
inline PadLayout rows_layout(PadLayout l, int64_t r0, int64_t r1) {
  l.Dp = 1;
  l.Hp = r1 - r0;
  l.cs = l.Hp * l.sw * l.Wq;
  return l;
}

// Channels [0, nch) of x (float32, float16 or bfloat16: dtype an ONNX code;
// each channel in[0] x in[1] x in[2] values) into dst in that layout, with
// pb pads at the start of each axis (and zeros up to the layout's end).
// rows: when set (r1 > r0, one padded depth only), only padded rows
// [r0, r1) of each channel are written (the Winograd tasks copy the rows
// their tiles read); r0 = r1 = 0: the whole layout. dst_r0: the padded row
// at each channel's start in dst (a layout of only the rows a task reads,
// l.Hp of them); 0: the layout's first.
struct PadCopy {
  const void* x;
  int32_t dtype;
  int64_t nch;
  int64_t in[3], pb[3];
  PadLayout l;
  float* dst;
  int64_t r0 = 0, r1 = 0;
  int64_t dst_r0 = 0;
};

// One kc x NR panel of the im2col matrix, k-major (NR floats per k row),
// the microkernel's B operand: row r, column j is src[koff[r] + off(j)],
// where the columns come as runs of consecutive offsets (col, len, off)
// covering [0, nc); columns nc .. NR are zero.
struct PanelB {
  const float* src;
  const int64_t* koff;
  int64_t kc;
  const int64_t* runs;  // nruns triples (col, len, off)
  int64_t nruns;
  int64_t nc;
  int NR;
  float* dst;
};

// Depthwise convolution of small planes, vectorised across channels: the
// output planes of nch <= L channels (L the level's float lanes) at once,
// from an interleaved copy of their input planes ([padded position][L]).
// Output channel lane l reads input channel xch[l] of x (dtype an ONNX
// code, planes of in_sp values), its taps w[t * L + l] and bias[l], and is
// written (float32) to y + l * out_sp.
struct DwBlock {
  const void* x;
  int32_t dtype;
  int64_t in_sp, out_sp;
  const int64_t* xch;
  int64_t nch;
  const float* w;
  const float* bias;  // L values
  float* y;
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  const Activation* act;
};

// Winograd F(2x2, 3x3) (stride 1, no dilation): per channel, each 4x4
// input tile d (tile (th, tw) starts at padded row 2 th, column 2 tw) and
// its 16 transformed values V = B^T d B; the 16 products M = U V summed
// over the channels by the GEMM; the 2x2 output A^T M A. B^T = [1 0 -1 0;
// 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1].
//
// Tiles are numbered u = image * T + th * TW + tw over a chunk of images
// (T = TH * TW tiles per image), so that the tiles of small images share
// panels.
//
// Input transform of tiles [t0, t1) of nch channels read from src (image
// 0's first channel, images img_stride floats apart) in PadLayout l (sw =
// 2: the columns of a tile row's tiles are consecutive per phase) into V:
// matrix xi (xi_stride floats apart) as GEMM B panels
// [panel][channel][NR], tile u in panel (u - t0) / NR, lane (u - t0) % NR
// (NR: the panel width; the MR-row strips of the transposed product take
// the same layout with NR = MR).
struct WinoIn {
  const float* src;
  PadLayout l;
  int64_t row0 = 0;  // the padded row at each channel's start in src (l cut to the rows the tiles read)
  int64_t img_stride;
  int64_t nch;    // channels transformed (from src, to dst)
  int64_t ld_ch;  // channels per panel in the layout (>= nch: a range of them)
  int64_t T, TW, t0, t1, xi_stride;
  int NR;
  float* dst;
};

// Output transform: M matrix xi at m + xi * xi_stride, [channel][ldm],
// column u - t0; per channel the bias, the activation, the 2x2 outputs
// into the channel's OH x OW plane (channel planes OH * OW apart from y,
// images y_img_stride apart; outputs past OH or OW dropped).
struct WinoOut {
  const float* m;
  int64_t ldm, xi_stride, nch, T, TW, t0, t1, OH, OW, y_img_stride;
  const float* bias;  // nch values or NULL
  const Activation* act;
  float* y;
  // FusedConv's residual, float32 in y's layout, added before the
  // activation; NULL: none.
  const float* r;
};

struct ConvKernels {
  const char* name;
  void (*depthwise)(const DwPlane* p);
  int lanes;  // float32 lanes of a vector (the DwBlock width)
  void (*pad_copy)(const PadCopy* p);
  void (*panel)(const PanelB* p);
  void (*depthwise_block)(const DwBlock* b);
  // rows x cols values at y (row stride ld) through the activation, in
  // place: y = act(y + r) with r (row stride ldr) FusedConv's residual, or
  // y = act(y) when r is NULL (act NULL: none).
  void (*activate)(const Activation* act, float* y, int64_t rows, int64_t cols, int64_t ld, const float* r,
                   int64_t ldr);
  // y[j * ldy + i] = act(c[i * ldc + j]) for i < rows, j < cols (act NULL:
  // none): the transposed GEMM's [position][channel] tile into NCHW planes.
  void (*transpose_store)(const float* c, int64_t rows, int64_t cols, int64_t ldc, float* y, int64_t ldy,
                          const Activation* act);
  // QLinearConv's output stage of one row: y[j] = saturate(round half to
  // even((int32)(acc[j] + b - za cs[j]) * mult + yz)) in float64 (the sums
  // wrapping as int32), y uint8 (u8) or int8; cs: the per-position zero
  // point correction (its factor za), folded in rather than a pass of its own.
  void (*requantize)(const uint32_t* acc, const int32_t* cs, uint32_t za, int64_t n, uint32_t b, double mult,
                     double yz, bool u8, void* y);
  void (*wino_input)(const WinoIn* p);
  void (*wino_output)(const WinoOut* p);
  // The same from the transposed product: M^T [tile][channel].
  void (*wino_output_t)(const WinoOut* p);
  // One row of the transposed product from a W^T panel (NR columns, n
  // used): y[j] = bias[j] + sum_k x[k] wt[k * NR + j] (bias NULL: 0).
  void (*gemv_t)(const float* x, const float* wt, int64_t K, int64_t NR, int64_t n, const float* bias, float* y);
  // y[2q] += a[q], y[2q + 1] += b[q] for q < n (a stride-2 ConvTranspose's
  // col2im, two kernel columns at once).
  void (*add_interleaved)(float* y, const float* a, const float* b, int64_t n);
};

namespace scalar { const ConvKernels* conv_kernels(); }
namespace avx2 { const ConvKernels* conv_kernels(); }
namespace avx512 { const ConvKernels* conv_kernels(); }

// The table of a SIMD level (olc_simd_level: 0 scalar, 1 AVX2, 2 AVX-512).
inline const ConvKernels* conv_kernels_for(int32_t simd_level) {
  return simd_level >= 2 ? avx512::conv_kernels() : simd_level >= 1 ? avx2::conv_kernels() : scalar::conv_kernels();
}

}  // namespace olc_mm

#endif  // OLC_MATMUL_CONV_KERNELS_H_
