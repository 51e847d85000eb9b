// Shared declarations of the normalization family: the row-engine tables
// each ISA translation unit fills. Plain data only, so this header is safe
// to include from TUs compiled with different ISA flags.
#ifndef OLC_NORMALIZATION_NORM_COMMON_H_
#define OLC_NORMALIZATION_NORM_COMMON_H_

#include <cstdint>

namespace olc_norm {

// Row primitives over one contiguous row of n >= 1 elements of the compute
// type T (float or double). x and y are the same pointer or do not overlap.
// They only assert: the adapter validates everything first.
template <class T>
struct RowOps {
  // y = softmax(x) or log_softmax(x) (log != 0), max-subtracted:
  //   m = max(x); softmax: e = exp(x - m), y = e * (1 / sum(e));
  //   log: y = (x - m) - log(sum(exp(x - m))).
  void (*softmax)(const T* x, T* y, int64_t n, int log);
  // softmax of `rows` contiguous rows of n (y likewise), the same bits as
  // row by row; short rows interleaved in pairs (see eng_softmax_rows).
  void (*softmax_rows)(const T* x, T* y, int64_t n, int64_t rows, int log);
  // Two-pass statistics: *mean = sum(x) / n, *var = sum((x - mean)^2) / n.
  void (*moments)(const T* x, int64_t n, T* mean, T* var);
  // sum(x * x).
  T (*sum_squares)(const T* x, int64_t n);
  // sum(|x|).
  T (*sum_abs)(const T* x, int64_t n);
  // y = (x - shift) * mul * scale[i] + bias[i]; scale or bias may be null
  // (then 1 and 0).
  void (*apply)(const T* x, T* y, int64_t n, T shift, T mul, const T* scale, const T* bias);
  // y = (x - shift) * mul + add.
  void (*affine)(const T* x, T* y, int64_t n, T shift, T mul, T add);
  // As softmax and apply, but y is written with non-temporal stores (for
  // outputs far larger than the cache); softmax_nt keeps the exponentials
  // in `scratch` (n elements) meanwhile. Null where a level has none. The
  // stores are weakly ordered: the caller fences after its last row.
  void (*softmax_nt)(const T* x, T* y, int64_t n, int log, T* scratch);
  void (*apply_nt)(const T* x, T* y, int64_t n, T shift, T mul, const T* scale, const T* bias);
  // Softmax (log != 0: LogSoftmax) down columns: for each c in [0, ncols),
  // the L values x[k * stride + c], k in [0, L), form one row (a middle
  // axis of length L, with `stride` the product of the axes after it).
  // Vectorized across the columns; L >= 1.
  void (*softmax_cols)(const T* x, T* y, int64_t L, int64_t stride, int64_t ncols, int log);
  // LpNormalization down columns (same layout as softmax_cols): y = x / norm
  // with norm the L1 (p == 1) or L2 norm of the column, and +0 for a column
  // whose norm is 0.
  void (*lp_cols)(const T* x, T* y, int64_t L, int64_t stride, int64_t ncols, int p);
  // Softmax (log != 0: LogSoftmax) of a row stored as float16 (softmax_f16)
  // or bfloat16 (softmax_bf16), its values widened to T in x; y is rounded
  // to that type by the caller. The ONNX function body evaluated in that
  // type, each operator's result rounded to it:
  //   t = round(x - max(x)), e = round(exp(t)), s = round(sum(e)) (summed
  //   in float32); softmax: y = e / s; log: y = t - round(log(s)).
  // Null for T = double.
  void (*softmax_f16)(const T* x, T* y, int64_t n, int log);
  void (*softmax_bf16)(const T* x, T* y, int64_t n, int log);
};

// Element conversions between the storage types and float32.
struct Convert {
  void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
  void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);
  void (*bf16_to_f32)(const uint16_t* x, float* y, int64_t n);
  void (*f32_to_bf16)(const float* x, uint16_t* y, int64_t n);
};

struct RowKernels {
  const char* isa;
  RowOps<float> f32;
  RowOps<double> f64;  // null members: the adapter takes the scalar ones
  Convert convert;     // null members: the adapter takes the scalar ones
};

// Each ISA TU defines its table; the adapter reads a level's table only
// after the runtime check for that level has passed.
namespace scalar { const RowKernels* kernels(); }
namespace avx2 { const RowKernels* kernels(); }
namespace avx512 { const RowKernels* kernels(); }

}  // namespace olc_norm

#endif  // OLC_NORMALIZATION_NORM_COMMON_H_
