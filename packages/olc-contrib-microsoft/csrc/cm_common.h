// Shared declarations of the com.microsoft family: the compute tables each
// ISA translation unit fills, and the plain reference kernels. Plain data
// and declarations only, so this header is safe to include from TUs
// compiled with different ISA flags.
#ifndef OLC_CONTRIB_MICROSOFT_CM_COMMON_H_
#define OLC_CONTRIB_MICROSOFT_CM_COMMON_H_

#include <cstdint>

namespace olc_cm {

// Storage types of the rows, as table indices.
enum Storage : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

// Activations of the elementwise ops.
enum Act : int {
  kActGeluErf = 0,   // x * Phi(x), Phi the standard normal CDF (Gelu, BiasGelu)
  kActGeluTanh = 1,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (FastGelu)
  kActQuick = 2,     // x * sigmoid(alpha x) (QuickGelu)
  kActNone = 3       // identity (BiasAdd)
};

// One SkipLayerNormalization row: s = x + skip (+ bias), then
// y = (s - mean) * inv * gamma (+ beta), inv = 1 / sqrt(var + eps), or with
// simplified != 0 (RMS) y = s * inv * gamma, inv = 1 / sqrt(mean(s^2) + eps).
// gamma, beta and bias are float32 vectors of H elements (beta, bias may be
// null). The adapter validates everything; these only compute.
struct SkipRow {
  const float* gamma;
  const float* beta;
  const float* bias;
  int64_t H;
  float eps;
  int simplified;
};

struct IsaKernels {
  const char* isa;
  // x, skip, y: rows of H elements of the storage type; sum: the
  // input_skip_bias_sum row or null; scratch: H floats (not touched when
  // the storage is float32 and sum is given: s is kept in sum).
  // *mean gets the mean (0 when simplified), *inv the inverse deviation.
  void (*skip_norm_row[3])(const SkipRow* a, const void* x, const void* skip, void* y, void* sum, float* scratch,
                           float* mean, float* inv);
  // y[i] = act((x[i] + bias[(phase + i) % H]) + skip[i]) for i in [0, n);
  // bias (float32, H elements) and skip may be null. x, skip and y point at
  // element 0 of the span.
  void (*act_span[3])(int act, float alpha, const void* x, const void* skip, const float* bias, int64_t H,
                      int64_t phase, void* y, int64_t n);
  // Storage <-> float32 conversions (parameters of 16-bit types).
  void (*to_f32[3])(const void* x, float* y, int64_t n);
};

namespace scalar { const IsaKernels* kernels(); }
namespace avx2 { const IsaKernels* kernels(); }
namespace avx512 { const IsaKernels* kernels(); }

// The plain reference kernels (cm_naive.cc): one loop per formula, float64
// arithmetic for the statistics and the activations, their own element
// conversions. Serial; same contracts as above but over whole tensors.
namespace naive {
// rows of H; skip row r is skip + (r % skip_rows) * H. Parameters in their
// storage type (dt, like x). mean / inv: float32 per row, or null.
void skip_norm(int dt, int simplified, float eps, const void* x, const void* skip, int64_t skip_rows,
               const void* gamma, const void* beta, const void* bias, int64_t rows, int64_t H, void* y, float* mean,
               float* inv, void* sum);
// n elements, bias of H elements (index i % H) or null, skip or null.
void act(int dt, int act, float alpha, const void* x, const void* bias, int64_t H, const void* skip, void* y,
         int64_t n);
}  // namespace naive

}  // namespace olc_cm

#endif  // OLC_CONTRIB_MICROSOFT_CM_COMMON_H_
