// The per-ISA part of the recurrent ops (LSTM, GRU, RNN): the fused gate
// math of one step of one batch row, after the input and recurrent
// products (gemm_driver), and the products of a single row with a packed
// matrix. Plain structs and function pointers only: rnn_scalar.cc /
// rnn_avx2.cc / rnn_avx512.cc compile the same loops (rnn_kernels.inc)
// with their own flags.
#ifndef OLC_MATMUL_RNN_KERNELS_H_
#define OLC_MATMUL_RNN_KERNELS_H_

#include <cstdint>

namespace olc_mm {

// The activation functions of the ONNX RNN operators, in the order of the
// operator's documentation; src/olc_matmul/rnn_attributes.py hands the
// `activations` attribute to create() as these codes.
//   Relu             max(0, x)
//   Tanh             tanh(x)
//   Sigmoid          1 / (1 + exp(-x))
//   Affine           alpha x + beta
//   LeakyRelu        x >= 0 ? x : alpha x
//   ThresholdedRelu  x > alpha ? x : 0
//   ScaledTanh       alpha tanh(beta x)
//   HardSigmoid      min(max(alpha x + beta, 0), 1)
//   Elu              x >= 0 ? x : alpha (exp(x) - 1)
//   Softsign         x / (1 + |x|)
//   Softplus         log(1 + exp(x))
enum class RnnAct : int32_t {
  kRelu = 0,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus,
  kCount
};
struct RnnActivation {
  RnnAct kind;
  float alpha, beta;
};

// One direction's cell: the activations f (gates i, o, f), g (cell input)
// and h (cell output), the clip of every gate pre-activation to [-clip,
// clip] (has_clip), the coupled forget gate f = 1 - i (input_forget) and
// the peepholes (NULL: none; else [3 H]: i, o, f).
struct LstmCell {
  int64_t H;
  RnnActivation f, g, h;
  bool has_clip;
  float clip;
  bool input_forget;
  const float* peep;
};

// One direction's GRU cell: the activations f (gates z, r) and g (the
// candidate h~), the clip of every pre-activation, and for
// linear_before_reset the recurrent bias of h~ (Rbh [H], NULL: zero),
// which the reset gate scales and so cannot join the input projection.
struct GruCell {
  int64_t H;
  RnnActivation f, g;
  bool has_clip;
  float clip;
  const float* rbh;
};

// One direction's plain RNN cell: H(t) = f(clip(X W^T + H(t-1) R^T + Wb + Rb)).
struct RnnCell {
  int64_t H;
  RnnActivation f;
  bool has_clip;
  float clip;
};

// Each row function: one step of one batch row. xw: the input projection
// with its biases (the gates in the operator's order); hr: the recurrent
// product (NULL: zero, the first step without initial_h); hp: H(t-1) [H];
// h: H(t) out [H]; y: H(t) again (NULL: none). Outputs may not overlap
// the inputs.
struct RecurrentKernels {
  const char* name;
  // LSTM. xw, hr: [4 H], gates i, o, f, c; c: C(t-1) in, C(t) out [H].
  void (*lstm_row)(const LstmCell* cell, const float* xw, const float* hr, float* c, float* h, float* y);
  // GRU with linear_before_reset: xw, hr [3 H] (z, r, h), xw's h part
  // holding Wbh only.
  void (*gru_linear_row)(const GruCell* cell, const float* xw, const float* hr, const float* hp, float* h, float* y);
  // GRU without linear_before_reset, in two halves around the product of
  // r (.) H(t-1) with Rh. First: hr [2 H] (z, r); writes z [H] and
  // rh = r (.) H(t-1) [H] (z may be hr itself).
  void (*gru_reset_row)(const GruCell* cell, const float* xw, const float* hr, const float* hp, float* z, float* rh);
  // Then: hr_h = rh Rh^T [H] (NULL: zero), z from the first half.
  void (*gru_update_row)(const GruCell* cell, const float* xw, const float* hr_h, const float* z, const float* hp,
                         float* h, float* y);
  // RNN. xw, hr: [H].
  void (*rnn_row)(const RnnCell* cell, const float* xw, const float* hr, float* h, float* y);
  // One row times a matrix packed for the GEMM (PackedB, layout kF32):
  // y[j] = bias[j] + sum_k x[k] B[k, j] for j < n (bias NULL: 0), B in
  // panels of NR columns, each K rows of NR values, panel_stride apart.
  void (*gemv_panels)(const float* x, const float* panels, int64_t K, int64_t NR, int64_t panel_stride, int64_t n,
                      const float* bias, float* y);
  // One row times int8 codes converted to float as they are read:
  // y[j] = scale[j] (sum_k x[k] q[k, j] - zero[j] sum_k x[k]) for j < n,
  // q in panels of q8_nr columns, each K rows of q8_nr codes (K q8_nr
  // bytes apart); scale and zero padded to whole panels. The quantized
  // recurrent weights at one row: a quarter of the float R's bytes.
  void (*gemv_q8_panels)(const float* x, const int8_t* panels, int64_t K, int64_t n, const float* scale,
                         const float* zero, float* y);
  int64_t q8_nr;  // columns per int8 panel
};

namespace scalar { const RecurrentKernels* recurrent_kernels(); }
namespace avx2 { const RecurrentKernels* recurrent_kernels(); }
namespace avx512 { const RecurrentKernels* recurrent_kernels(); }

// The table of a SIMD level (olc_simd_level: 0 scalar, 1 AVX2, 2 AVX-512).
inline const RecurrentKernels* recurrent_kernels_for(int32_t simd_level) {
  return simd_level >= 2   ? avx512::recurrent_kernels()
         : simd_level >= 1 ? avx2::recurrent_kernels()
                           : scalar::recurrent_kernels();
}

}  // namespace olc_mm

#endif  // OLC_MATMUL_RNN_KERNELS_H_
