// What the row-wise adapters of this family share: the input as float32
// rows, and splitting rows over the session's executor.
#ifndef OLC_ML_ADAPTER_UTIL_H_
#define OLC_ML_ADAPTER_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "olc/kernel_abi.h"
#include "transforms.h"

namespace olc_ml {

// Rows and features of a 1-D ([F], one row) or 2-D ([N, F]) input.
inline bool rows_and_features(const olc_tensor& x, int64_t* rows, int64_t* features) {
  if (x.ndim == 1) {
    *rows = 1;
    *features = x.shape[0];
    return true;
  }
  if (x.ndim == 2) {
    *rows = x.shape[0];
    *features = x.shape[1];
    return true;
  }
  return false;
}

inline bool is_numeric_input(int32_t dt) {
  return dt == OLC_DTYPE_FLOAT || dt == OLC_DTYPE_DOUBLE || dt == OLC_DTYPE_INT64 || dt == OLC_DTYPE_INT32;
}

// The input's n values as float32: the data itself for float32, else
// converted into `buffer` (as onnxruntime casts these inputs).
inline const float* as_float(const olc_tensor& x, int64_t n, std::vector<float>* buffer) {
  if (x.dtype == OLC_DTYPE_FLOAT) return static_cast<const float*>(x.data);
  buffer->resize(static_cast<size_t>(n));
  float* out = buffer->data();
  switch (x.dtype) {
    case OLC_DTYPE_DOUBLE: {
      const double* p = static_cast<const double*>(x.data);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
      break;
    }
    case OLC_DTYPE_INT64: {
      const int64_t* p = static_cast<const int64_t*>(x.data);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
      break;
    }
    case OLC_DTYPE_INT32: {
      const int32_t* p = static_cast<const int32_t*>(x.data);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
      break;
    }
    default: break;
  }
  return out;
}

// fn(r0, r1) over [0, rows): one call when the work (rows x cost_per_row)
// is small or there is one thread, else ranges on the executor.
inline void for_rows(const olc_core_api* api, olc_context* ctx, int64_t rows, int64_t cost_per_row,
                     const std::function<void(int64_t, int64_t)>& fn) {
  constexpr int64_t kSerialCost = 1 << 16;  // below this many multiply-adds a hand-off costs more
  const int64_t threads = ctx ? api->concurrency(ctx) : 1;
  if (rows <= 1 || threads <= 1 || rows * std::max<int64_t>(1, cost_per_row) < kSerialCost) {
    fn(0, rows);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kSerialCost / 4 / std::max<int64_t>(1, cost_per_row));
  api->parallel_for(
      ctx, rows, grain, 0,
      [](void* user, int64_t b, int64_t e) { (*static_cast<const std::function<void(int64_t, int64_t)>*>(user))(b, e); },
      const_cast<std::function<void(int64_t, int64_t)>*>(&fn));
}

inline std::string parse_post_transform(const std::string& post, PostTransform* out) {
  if (post == "NONE") *out = kNone;
  else if (post == "SOFTMAX") *out = kSoftmax;
  else if (post == "LOGISTIC") *out = kLogistic;
  else if (post == "SOFTMAX_ZERO") *out = kSoftmaxZero;
  else if (post == "PROBIT") *out = kProbit;
  else return "unknown post_transform '" + post + "' (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT)";
  return "";
}

}  // namespace olc_ml

#endif  // OLC_ML_ADAPTER_UTIL_H_
