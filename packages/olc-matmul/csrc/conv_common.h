// What the convolution kernels share (Conv, FusedConv, ConvTranspose,
// QLinearConv, ConvInteger): the attributes, their validation and the
// geometry of one run. Portable code (conv_geom.cc).
#ifndef OLC_MATMUL_CONV_COMMON_H_
#define OLC_MATMUL_CONV_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "conv_kernels.h"
#include "mm_common.h"
#include "olc/kernel_abi.h"

namespace olc_mm {
namespace conv {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

// Every convolution as 3-D: a 1-D or 2-D one has leading spatial
// dimensions of size 1 (kernel 1, stride 1, dilation 1, no padding).
struct Geom {
  int nsp;
  int64_t N, C, Cout, G, Cg, Mg;
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  int64_t in_sp, out_sp, ksz, Kg;
  bool pointwise, depthwise;
};

// The attributes Conv and ConvTranspose share (ConvTranspose adds two).
struct ConvAttrs {
  int32_t dtype;  // the input's element type
  AutoPad autopad = AutoPad::kNotSet;
  int64_t group = 1;
  std::vector<int64_t> kshape, strides, dil, pads;  // empty: not set
  std::vector<int64_t> out_pad, out_shape;          // ConvTranspose only
  // olc.fused FusedConv only: the activation applied as tiles are stored,
  // and BatchNormalization folded into the constant weights and bias.
  Activation act;
  bool bn = false;
  double bn_eps = 1e-5;
  // FusedConv: Mul and Add by constants after the Conv (and any
  // BatchNormalization), y * ch_scale + ch_shift per output channel, folded
  // into the constant weights and bias too; one value (every channel) or
  // one per output channel; empty: none.
  std::vector<double> ch_scale, ch_shift;
  bool channel_affine() const { return !ch_scale.empty() || !ch_shift.empty(); }
  // Whether the packed weights and the bias are folded ones.
  bool folds() const { return bn || channel_affine(); }
  // FusedConv's residual: the input added to the output before the
  // activation (index 3, or 7 after the BatchNormalization inputs); 0: none.
  int32_t res_idx = 0;
};

enum class ConvOp { kConv, kFusedConv, kTranspose, kQLinearConv, kConvInteger };

// The operator's name in messages.
const char* op_name(ConvOp kind);

// "[1, 2, 3]".
std::string fmt_ints(const std::vector<int64_t>& v);

// Reads and checks the attributes of `kind` into st (not the inputs or
// their types); false with the reason in error.
bool parse_attrs(const olc_node_info* node, ConvOp kind, ConvAttrs* st, char* error, size_t esize);

// An optional spatial attribute (empty: absent) must have `want` values;
// false with the reason in err.
bool check_length(const std::vector<int64_t>& v, const char* name, int want, int nsp, char* err, size_t esize);

// The checks Conv and ConvTranspose share: ranks of X and W (1-D to 3-D)
// and the lengths of the spatial attributes. Returns the spatial rank, or
// 0 with the reason in err.
int check_ranks(const ConvAttrs* st, const olc_tensor& x, const olc_tensor& w, char* err, size_t esize);

// The geometry of one Conv run (b: the optional [M] bias, any type); false
// with the reason in err.
bool resolve(const ConvAttrs* st, const olc_tensor& x, const olc_tensor& w, const olc_tensor* b, Geom* g, char* err,
             size_t esize);

// Where output row (od, oh) starts in PadLayout l: its first position's
// tap-0 value (add ow for position ow; a tap's koff for the tap).
inline int64_t out_row_offset(const Geom& g, const PadLayout& l, int64_t od, int64_t oh) {
  return (od * g.s[0] * l.Hp + oh * g.s[1]) * l.sw * l.Wq;
}

// The g.ksz taps of channel 0 (kd, kh, kw in order) as offsets in PadLayout
// l from a position's tap-0 value: a kernel window; channel c's taps lie
// c * l.cs further.
inline void tap_offsets(const Geom& g, const PadLayout& l, int64_t* koff) {
  for (int64_t kd = 0, k = 0; kd < g.k[0]; ++kd)
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw, ++k) {
        const int64_t cw = kw * g.d[2];
        koff[k] = ((kd * g.d[0] * l.Hp + kh * g.d[1]) * l.sw + cw % l.sw) * l.Wq + cw / l.sw;
      }
}

// Every tap of a group's g.Cg channels (g.Kg offsets, K's order): channel
// 0's from tap_offsets, the others by adding cs (no division per row of K:
// a 1x1 convolution of small planes spends as long here as in its GEMM
// otherwise). Channel by channel from the first channel's offsets: each
// value from koff[k - ksz] made a chain of store-to-load forwards, one per
// value (half of the adapter's own samples in a MobileNet-style stack).
inline void channel_tap_offsets(const Geom& g, const PadLayout& l, int64_t* koff) {
  tap_offsets(g, l, koff);
  for (int64_t c = 1; c < g.Cg; ++c)
    for (int64_t t = 0; t < g.ksz; ++t) koff[c * g.ksz + t] = koff[t] + c * l.cs;
}

// The runs of one panel: output columns [c0, c0 + nc) of an (od, oh, ow)
// grid, cut at row ends (unless the next row's values follow on), as
// (column in the panel, length, offset) triples with the offset of the
// run's first position in PadLayout l (of floats or bytes). Returns the
// run count (at most nc).
int64_t panel_runs(const Geom& g, const PadLayout& l, int64_t c0, int64_t nc, int64_t* runs);

// The copy of nch channels of X (x at the first of them; dtype an ONNX
// code) into dst in layout l, with g's input sizes and pads: the whole
// layout, or only padded rows [r0, r1) (r1 > r0, one padded depth).
PadCopy pad_copy_of(const Geom& g, const PadLayout& l, const void* x, int32_t dtype, int64_t nch, float* dst,
                    int64_t r0 = 0, int64_t r1 = 0);

// ------------------------------------------------------------ Winograd
// F(2x2, 3x3) for float32 3x3 convolutions at stride 1 without dilation
// (conv_winograd.cc).

// Whether the geometry is one (2-D, 3x3, stride 1, dilation 1, at least
// 8 input and output channels per group).
bool wino_applies(const Geom& g);

// The transformed weights: 16 sets of MR-row strips [G][strip][Cg][MR].
size_t wino_weight_floats(int64_t G, int64_t Mg, int64_t Cg, int MR);
void wino_pack_weights(const float* W, int64_t G, int64_t Mg, int64_t Cg, int MR, float* dst);

// The transposed product's (few tiles: the tiles as the microkernel's
// rows): 16 sets of NR-column panels of U^T [G][panel][Cg][NR].
size_t wino_weight_t_floats(int64_t G, int64_t Mg, int64_t Cg, int NR);
void wino_pack_weights_t(const float* W, int64_t G, int64_t Mg, int64_t Cg, int NR, float* dst);

struct WinoRun {
  const Geom* g;
  const IsaKernels* isa;
  const ConvKernels* ck;
  bool transposed;
  const float* wt;    // wino_pack_weights
  const float* wt_t;  // wino_pack_weights_t (the transposed product)
  const float* x;
  float* y;
  const float* bias;  // Cout values or NULL
  const Activation* act;
  const float* res;  // FusedConv's residual in y's layout; NULL: none
  int64_t KC;
  int64_t threads;
};
// false: out of memory.
bool wino_run(const olc_core_api* api, olc_context* ctx, const WinoRun& r);

}  // namespace conv
}  // namespace olc_mm

#endif  // OLC_MATMUL_CONV_COMMON_H_
