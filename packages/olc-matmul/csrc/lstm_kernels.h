// The per-ISA part of LSTM: the fused gate math of one step of one batch
// row, after the input and recurrent products (gemm_driver), and the
// products of a single row with a packed matrix. Plain structs
// and function pointers only: lstm_scalar.cc / lstm_avx2.cc /
// lstm_avx512.cc compile the same loop (lstm_kernels.inc) with their own
// flags.
#ifndef OLC_MATMUL_LSTM_KERNELS_H_
#define OLC_MATMUL_LSTM_KERNELS_H_

#include <cstdint>

namespace olc_mm {

// The activation functions of the ONNX RNN operators, in the order of the
// operator's documentation; src/olc_matmul/lstm_attributes.py hands the
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

struct LstmKernels {
  const char* name;
  // One step of one batch row. xw: the input projection with both biases
  // ([4 H], gates i, o, f, c); hr: the recurrent product [4 H] (NULL:
  // zero); c: C(t-1) in, C(t) out [H]; h: H(t) out [H]; y: H(t) again
  // (NULL: none). c, h and y may not overlap xw or hr.
  void (*cell_row)(const LstmCell* cell, const float* xw, const float* hr, float* c, float* h, float* y);
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

namespace scalar { const LstmKernels* lstm_kernels(); }
namespace avx2 { const LstmKernels* lstm_kernels(); }
namespace avx512 { const LstmKernels* lstm_kernels(); }

// The table of a SIMD level (olc_simd_level: 0 scalar, 1 AVX2, 2 AVX-512).
inline const LstmKernels* lstm_kernels_for(int32_t simd_level) {
  return simd_level >= 2 ? avx512::lstm_kernels() : simd_level >= 1 ? avx2::lstm_kernels() : scalar::lstm_kernels();
}

}  // namespace olc_mm

#endif  // OLC_MATMUL_LSTM_KERNELS_H_
