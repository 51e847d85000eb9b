// ScatterND, GatherND, ScatterElements, OneHot, NonZero and TopK: operators
// driven by index values. Every index is checked before an output is
// allocated. GatherND and ScatterND share the index-tuple resolution
// (tuple_offsets), ScatterND and ScatterElements the reductions (apply_red).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>

#include "common.h"
#include "fp_convert.h"
#include "registry.h"

namespace olc_tn {
namespace {

struct F16 {
  uint16_t v;
};
struct BF16 {
  uint16_t v;
};
struct Bool {
  uint8_t v;
};

// Value access for comparisons and arithmetic: float16/bfloat16 through
// float32 (exact), bool as 0/1.
template <class T>
struct V {
  using W = T;
  static W get(T v) { return v; }
  static T put(W w) { return w; }
};
template <>
struct V<F16> {
  using W = float;
  static float get(F16 v) { return f16_to_f32(v.v); }
  static F16 put(float w) { return F16{f32_to_f16(w)}; }
};
template <>
struct V<BF16> {
  using W = float;
  static float get(BF16 v) { return bf16_to_f32(v.v); }
  static BF16 put(float w) { return BF16{f32_to_bf16(w)}; }
};
template <>
struct V<Bool> {
  using W = uint8_t;
  static uint8_t get(Bool v) { return v.v != 0; }
  static Bool put(uint8_t w) { return Bool{static_cast<uint8_t>(w != 0)}; }
};

// Calls f(T{}) with the C++ type of an ONNX dtype; false when unsupported.
template <class F>
bool with_type(int32_t dtype, F&& f) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: f(float{}); return true;
    case OLC_DTYPE_DOUBLE: f(double{}); return true;
    case OLC_DTYPE_FLOAT16: f(F16{}); return true;
    case OLC_DTYPE_BFLOAT16: f(BF16{}); return true;
    case OLC_DTYPE_BOOL: f(Bool{}); return true;
    case OLC_DTYPE_INT8: f(int8_t{}); return true;
    case OLC_DTYPE_INT16: f(int16_t{}); return true;
    case OLC_DTYPE_INT32: f(int32_t{}); return true;
    case OLC_DTYPE_INT64: f(int64_t{}); return true;
    case OLC_DTYPE_UINT8: f(uint8_t{}); return true;
    case OLC_DTYPE_UINT16: f(uint16_t{}); return true;
    case OLC_DTYPE_UINT32: f(uint32_t{}); return true;
    case OLC_DTYPE_UINT64: f(uint64_t{}); return true;
    default: return false;
  }
}

// ---------------------------------------------------------------- ScatterND

enum class Red { None, Add, Mul, Max, Min };

template <class W>
W apply_red(Red r, W a, W b) {
  switch (r) {
    case Red::Add:
      if constexpr (std::is_integral<W>::value) {
        using U = typename std::make_unsigned<W>::type;
        return static_cast<W>(static_cast<U>(a) + static_cast<U>(b));  // wraps
      } else {
        return a + b;
      }
    case Red::Mul:
      if constexpr (std::is_integral<W>::value) {
        using U = typename std::make_unsigned<W>::type;
        // Unsigned multiply promotes to int for narrow types: widen first.
        return static_cast<W>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) * static_cast<uint64_t>(static_cast<U>(b))));
      } else {
        return a * b;
      }
    case Red::Max:
      if constexpr (std::is_floating_point<W>::value) {
        if (a != a) return a;  // NaN propagates (the NaN operand, as numpy's maximum)
        if (b != b) return b;
      }
      return b > a ? b : a;
    case Red::Min:
      if constexpr (std::is_floating_point<W>::value) {
        if (a != a) return a;
        if (b != b) return b;
      }
      return b < a ? b : a;
    default:
      return b;
  }
}

// Resolves index tuples: tuple j is the k values ip[j*k .. j*k+k) addressing
// dims[0..k) (a negative value counts from the end of its dim), stored in
// offs[j] as a flat row-major offset over dims[0..k). Returns -1 when every
// value is in range, else the flat position j*k+d of the first bad one.
int64_t tuple_offsets(const int64_t* ip, int64_t count, int64_t k, const int64_t* dims, int64_t* offs) {
  for (int64_t j = 0; j < count; ++j) {
    int64_t off = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t v = ip[j * k + d];
      const int64_t dim = dims[d];
      if (v < -dim || v >= dim) return j * k + d;
      if (v < 0) v += dim;
      off = off * dim + v;
    }
    offs[j] = off;
  }
  return -1;
}

class ScatterND final : public Kernel {
 public:
  int32_t dtype;
  Red red = Red::None;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 3 || n_out != 1) return fail(ctx, "expects 3 inputs and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor &x = in[0], &idx = in[1], &upd = in[2];
    if (x.dtype != dtype || upd.dtype != dtype)
      return fail(ctx, "data and updates must have type %s, got %s and %s", olc_dtype_name(dtype),
                  olc_dtype_name(x.dtype), olc_dtype_name(upd.dtype));
    if (idx.dtype != OLC_DTYPE_INT64) return fail(ctx, "indices must be int64, got %s", olc_dtype_name(idx.dtype));
    const int64_t n = checked_count(x), ni = checked_count(idx), nu = checked_count(upd);
    if (n < 0 || ni < 0 || nu < 0) return fail(ctx, "an input has a negative dimension, too many elements or no data");
    if (idx.ndim < 1) return fail(ctx, "indices must have rank >= 1");
    const int64_t k = idx.shape[idx.ndim - 1];
    if (k < 1 || k > x.ndim)
      return fail(ctx, "the last dimension of indices (%lld) must be between 1 and the data rank %d", (long long)k, x.ndim);
    // updates shape = indices.shape[:-1] + data.shape[k:]
    const int urank = idx.ndim - 1 + x.ndim - static_cast<int>(k);
    bool ok = upd.ndim == urank;
    for (int d = 0; ok && d < idx.ndim - 1; ++d) ok = upd.shape[d] == idx.shape[d];
    for (int d = static_cast<int>(k); ok && d < x.ndim; ++d) ok = upd.shape[idx.ndim - 1 + d - k] == x.shape[d];
    if (!ok)
      return fail(ctx, "updates shape %s does not match indices.shape[:-1] + data.shape[%lld:] (indices %s, data %s)",
                  shape_str(upd.shape, upd.ndim).c_str(), (long long)k, shape_str(idx.shape, idx.ndim).c_str(),
                  shape_str(x.shape, x.ndim).c_str());
    int64_t slice = 1;
    for (int d = static_cast<int>(k); d < x.ndim; ++d) slice *= x.shape[d];
    const int64_t count = k ? ni / k : 0;
    std::vector<int64_t> offs(static_cast<size_t>(count));
    const int64_t* ip = static_cast<const int64_t*>(idx.data);
    const int64_t bad = tuple_offsets(ip, count, k, x.shape, offs.data());
    if (bad >= 0) {
      const int64_t j = bad / k, d = bad % k;
      return fail(ctx, "index %lld (update %lld, position %lld) is out of range for data axis %lld of size %lld",
                  (long long)ip[bad], (long long)j, (long long)d, (long long)d, (long long)x.shape[d]);
    }
    for (int64_t& o : offs) o *= slice;
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, x.dtype, x.ndim, x.shape));
    if (!y && n > 0) return OLC_ERROR;
    const int64_t es = static_cast<int64_t>(olc_dtype_size(x.dtype));
    if (n) parallel_copy(ctx, y, x.data, n * es, parallel_min_bytes("ScatterND"));
    if (count == 0 || slice == 0) return OLC_OK;
    const char* us = static_cast<const char*>(upd.data);
    if (red == Red::None) {
      for (int64_t j = 0; j < count; ++j) std::memcpy(y + offs[j] * es, us + j * slice * es, static_cast<size_t>(slice * es));
      return OLC_OK;
    }
    with_type(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      using W = typename V<T>::W;
      T* yt = reinterpret_cast<T*>(y);
      const T* ut = reinterpret_cast<const T*>(us);
      for (int64_t j = 0; j < count; ++j)
        for (int64_t i = 0; i < slice; ++i) {
          T& dst = yt[offs[j] + i];
          dst = V<T>::put(apply_red<W>(red, V<T>::get(dst), V<T>::get(ut[j * slice + i])));
        }
    });
    return OLC_OK;
  }
};

// ----------------------------------------------------------------- GatherND

class GatherND final : public Kernel {
 public:
  int32_t dtype;
  int64_t batch_dims = 0;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 2 || n_out != 1) return fail(ctx, "expects 2 inputs and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor &x = in[0], &idx = in[1];
    if (x.dtype != dtype)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    if (idx.dtype != OLC_DTYPE_INT64) return fail(ctx, "indices must be int64, got %s", olc_dtype_name(idx.dtype));
    const int64_t n = checked_count(x), ni = checked_count(idx);
    if (n < 0 || ni < 0) return fail(ctx, "an input has a negative dimension, too many elements or no data");
    const int r = x.ndim, q = idx.ndim;
    if (r < 1 || q < 1) return fail(ctx, "data and indices must have rank >= 1, got %d and %d", r, q);
    const int b = static_cast<int>(batch_dims);
    if (batch_dims >= std::min(r, q))
      return fail(ctx, "batch_dims %lld must be less than the ranks of data (%d) and indices (%d)", (long long)batch_dims, r, q);
    for (int d = 0; d < b; ++d)
      if (x.shape[d] != idx.shape[d])
        return fail(ctx, "batch dimension %d differs: data %s, indices %s", d, shape_str(x.shape, r).c_str(),
                    shape_str(idx.shape, q).c_str());
    const int64_t k = idx.shape[q - 1];
    if (k < 1 || k > r - b)
      return fail(ctx, "the last dimension of indices (%lld) must be between 1 and data rank - batch_dims = %d",
                  (long long)k, r - b);
    int64_t oshape[kMaxRank];
    const int orank = q - 1 + r - b - static_cast<int>(k);
    if (orank > kMaxRank) return fail(ctx, "output rank %d is too large", orank);
    int o = 0;
    for (int d = 0; d < q - 1; ++d) oshape[o++] = idx.shape[d];
    for (int d = b + static_cast<int>(k); d < r; ++d) oshape[o++] = x.shape[d];
    const olc_tensor probe{x.dtype, orank, oshape, nullptr};
    if (olc_element_count(&probe) < 0) return fail(ctx, "output shape %s is too large", shape_str(oshape, orank).c_str());
    int64_t slice = 1, batch_slices = 1, per_batch = 1;
    for (int d = b + static_cast<int>(k); d < r; ++d) slice *= x.shape[d];
    for (int d = b; d < b + k; ++d) batch_slices *= x.shape[d];
    for (int d = b; d < q - 1; ++d) per_batch *= idx.shape[d];
    const int64_t count = ni / k;
    std::vector<int64_t> offs(static_cast<size_t>(count));
    const int64_t* ip = static_cast<const int64_t*>(idx.data);
    const int64_t bad = tuple_offsets(ip, count, k, x.shape + b, offs.data());
    if (bad >= 0) {
      const int64_t j = bad / k, d = bad % k;
      return fail(ctx, "index %lld (tuple %lld, position %lld) is out of range for data axis %lld of size %lld",
                  (long long)ip[bad], (long long)j, (long long)d, (long long)(b + d), (long long)x.shape[b + d]);
    }
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, x.dtype, orank, oshape));
    const int64_t total = count * slice;
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const int64_t es = static_cast<int64_t>(olc_dtype_size(x.dtype));
    const int64_t row = slice * es;
    const char* src = static_cast<const char*>(x.data);
    const int64_t* op = offs.data();
    const int64_t grain = std::max<int64_t>(1, (16 << 10) / row);
    par_for(ctx, count, grain, total * es, parallel_min_bytes("GatherND"), [&](int64_t lo, int64_t hi) {
      if (row == es) {
        for (int64_t j = lo; j < hi; ++j) {
          const int64_t at = (j / per_batch) * batch_slices + op[j];
          switch (es) {
            case 1: y[j] = src[at]; break;
            case 2: reinterpret_cast<uint16_t*>(y)[j] = reinterpret_cast<const uint16_t*>(src)[at]; break;
            case 4: reinterpret_cast<uint32_t*>(y)[j] = reinterpret_cast<const uint32_t*>(src)[at]; break;
            default: reinterpret_cast<uint64_t*>(y)[j] = reinterpret_cast<const uint64_t*>(src)[at]; break;
          }
        }
        return;
      }
      for (int64_t j = lo; j < hi; ++j) {
        const int64_t at = (j / per_batch) * batch_slices + op[j];
        std::memcpy(y + j * row, src + at * row, static_cast<size_t>(row));
      }
    });
    return OLC_OK;
  }
};

// ---------------------------------------------------------- ScatterElements

// Reads element i of an int32/int64 index tensor.
inline int64_t index_value(const olc_tensor& t, int64_t i) {
  return t.dtype == OLC_DTYPE_INT64 ? static_cast<const int64_t*>(t.data)[i] : static_cast<const int32_t*>(t.data)[i];
}

class ScatterElements final : public Kernel {
 public:
  int32_t dtype;
  int64_t axis = 0;
  Red red = Red::None;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 3 || n_out != 1) return fail(ctx, "expects 3 inputs and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor &x = in[0], &idx = in[1], &upd = in[2];
    if (x.dtype != dtype || upd.dtype != dtype)
      return fail(ctx, "data and updates must have type %s, got %s and %s", olc_dtype_name(dtype),
                  olc_dtype_name(x.dtype), olc_dtype_name(upd.dtype));
    if (idx.dtype != OLC_DTYPE_INT32 && idx.dtype != OLC_DTYPE_INT64)
      return fail(ctx, "indices must be int32 or int64, got %s", olc_dtype_name(idx.dtype));
    const int64_t n = checked_count(x), ni = checked_count(idx);
    if (n < 0 || ni < 0 || checked_count(upd) < 0)
      return fail(ctx, "an input has a negative dimension, too many elements or no data");
    const int r = x.ndim;
    if (r < 1) return fail(ctx, "data must have rank >= 1");
    if (axis < -r || axis >= r) return fail(ctx, "axis %lld is out of range for data of rank %d", (long long)axis, r);
    const int ax = static_cast<int>(axis < 0 ? axis + r : axis);
    if (idx.ndim != r) return fail(ctx, "indices rank %d differs from data rank %d", idx.ndim, r);
    bool same = upd.ndim == idx.ndim;
    for (int d = 0; same && d < r; ++d) same = upd.shape[d] == idx.shape[d];
    if (!same)
      return fail(ctx, "updates shape %s differs from indices shape %s", shape_str(upd.shape, upd.ndim).c_str(),
                  shape_str(idx.shape, idx.ndim).c_str());
    for (int d = 0; d < r; ++d)
      if (d != ax && idx.shape[d] > x.shape[d])
        return fail(ctx, "indices shape %s exceeds data shape %s on axis %d", shape_str(idx.shape, r).c_str(),
                    shape_str(x.shape, r).c_str(), d);
    const int64_t n_ax = x.shape[ax];
    for (int64_t i = 0; i < ni; ++i) {
      const int64_t v = index_value(idx, i);
      if (v < -n_ax || v >= n_ax)
        return fail(ctx, "index %lld (at flat position %lld) is out of range for axis %d of size %lld", (long long)v,
                    (long long)i, ax, (long long)n_ax);
    }
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, x.dtype, r, x.shape));
    if (!y && n > 0) return OLC_ERROR;
    const int64_t es = static_cast<int64_t>(olc_dtype_size(x.dtype));
    if (n) parallel_copy(ctx, y, x.data, n * es, parallel_min_bytes("ScatterElements"));
    if (ni == 0) return OLC_OK;
    int64_t dstride[kMaxRank];
    int64_t st = 1;
    for (int d = r - 1; d >= 0; --d) {
      dstride[d] = st;
      st *= x.shape[d];
    }
    // Updates apply in flat order of indices (later duplicates win or
    // combine in that order). The innermost dimension of indices runs as a
    // contiguous stretch; an odometer over the others gives the data offset
    // of each stretch with the axis coordinate left out.
    const int64_t last = idx.shape[r - 1];
    const int64_t lstride = ax == r - 1 ? 0 : 1;  // data step along the stretch (0: the index picks it)
    auto scatter = [&](auto index_tag, auto apply) {
      using I = decltype(index_tag);
      const I* ip = static_cast<const I*>(idx.data);
      int64_t cnt[kMaxRank] = {};
      int64_t base = 0;
      for (int64_t i0 = 0; i0 < ni; i0 += last) {
        for (int64_t j = 0; j < last; ++j) {
          int64_t v = ip[i0 + j];
          if (v < 0) v += n_ax;
          apply(base + j * lstride + v * dstride[ax], i0 + j);
        }
        for (int d = r - 2; d >= 0; --d) {
          if (d != ax) base += dstride[d];
          if (++cnt[d] < idx.shape[d]) break;
          if (d != ax) base -= dstride[d] * idx.shape[d];
          cnt[d] = 0;
        }
      }
    };
    auto by_index_type = [&](auto apply) {
      if (idx.dtype == OLC_DTYPE_INT64) scatter(int64_t{}, apply);
      else scatter(int32_t{}, apply);
    };
    const char* us = static_cast<const char*>(upd.data);
    with_type(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      using W = typename V<T>::W;
      T* yt = reinterpret_cast<T*>(y);
      const T* ut = reinterpret_cast<const T*>(us);
      auto reduce_with = [&](auto rtag) {
        constexpr Red R = decltype(rtag)::value;
        by_index_type([&](int64_t at, int64_t i) {
          if constexpr (R == Red::None) yt[at] = ut[i];  // the element's bytes, as they are
          else yt[at] = V<T>::put(apply_red<W>(R, V<T>::get(yt[at]), V<T>::get(ut[i])));
        });
      };
      switch (red) {
        case Red::None: reduce_with(std::integral_constant<Red, Red::None>{}); break;
        case Red::Add: reduce_with(std::integral_constant<Red, Red::Add>{}); break;
        case Red::Mul: reduce_with(std::integral_constant<Red, Red::Mul>{}); break;
        case Red::Max: reduce_with(std::integral_constant<Red, Red::Max>{}); break;
        case Red::Min: reduce_with(std::integral_constant<Red, Red::Min>{}); break;
      }
    });
    return OLC_OK;
  }
};

// ------------------------------------------------------------------- OneHot

// Element i of a numeric tensor as an int64, the way Cast to int64
// truncates; false when it has no int64 value (NaN, infinite, too large).
bool int_value_at(const olc_tensor& t, int64_t i, int64_t* out) {
  bool ok = true;
  with_type(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto v = V<T>::get(static_cast<const T*>(t.data)[i]);
    using W = decltype(v);
    if constexpr (std::is_floating_point<W>::value) {
      const double d = static_cast<double>(v);
      ok = d >= -9223372036854775808.0 && d < 9223372036854775808.0;  // false for NaN
      if (ok) *out = static_cast<int64_t>(d);  // in range: truncates toward zero
    } else if constexpr (std::is_unsigned<W>::value) {
      ok = static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      *out = static_cast<int64_t>(v);
    } else {
      *out = static_cast<int64_t>(v);
    }
  });
  return ok;
}

class OneHot final : public Kernel {
 public:
  int64_t axis = -1;
  bool negative_indices = true;  // opset 11+: [-depth, depth) (opset 9-10: [0, depth))
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 3 || n_out != 1) return fail(ctx, "expects 3 inputs and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor &idx = in[0], &dep = in[1], &val = in[2];
    if (!movable(idx.dtype) || idx.dtype == OLC_DTYPE_BOOL || !movable(dep.dtype) || dep.dtype == OLC_DTYPE_BOOL ||
        !movable(val.dtype))
      return fail(ctx, "unsupported input types %s, %s, %s", olc_dtype_name(idx.dtype), olc_dtype_name(dep.dtype),
                  olc_dtype_name(val.dtype));
    const int64_t ni = checked_count(idx);
    if (ni < 0 || checked_count(dep) < 0 || checked_count(val) < 0)
      return fail(ctx, "an input has a negative dimension, too many elements or no data");
    if (dep.ndim > 1 || checked_count(dep) != 1)
      return fail(ctx, "depth must be a scalar or a 1-element tensor, got shape %s", shape_str(dep.shape, dep.ndim).c_str());
    if (checked_count(val) != 2)
      return fail(ctx, "values must hold exactly two elements [off_value, on_value], got shape %s",
                  shape_str(val.shape, val.ndim).c_str());
    int64_t depth = 0;
    if (!int_value_at(dep, 0, &depth) || depth < 0)
      return fail(ctx, "depth must be a non-negative integer value, got %s",
                  depth < 0 ? std::to_string(depth).c_str() : "a value with no int64 conversion");
    const int q = idx.ndim;
    if (q + 1 > kMaxRank) return fail(ctx, "output rank %d is too large", q + 1);
    if (axis < -q - 1 || axis > q)
      return fail(ctx, "axis %lld is out of range for indices of rank %d (allowed: [%d, %d])", (long long)axis, q, -q - 1, q);
    const int a = static_cast<int>(axis < 0 ? axis + q + 1 : axis);
    int64_t oshape[kMaxRank];
    for (int d = 0, o = 0; d <= q; ++d) oshape[d] = d == a ? depth : idx.shape[o++];
    const olc_tensor probe{val.dtype, q + 1, oshape, nullptr};
    const int64_t total = olc_element_count(&probe);
    if (total < 0) return fail(ctx, "output shape %s is too large", shape_str(oshape, q + 1).c_str());
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < a; ++d) outer *= idx.shape[d];
    for (int d = a; d < q; ++d) inner *= idx.shape[d];
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, val.dtype, q + 1, oshape));
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const size_t es = olc_dtype_size(val.dtype);
    const char* off_on = static_cast<const char*>(val.data);
    parallel_fill(ctx, y, total, es, off_on, parallel_min_bytes("OneHot"));
    // Out-of-range indices (and ones with no integer value) leave their
    // one-hot row all off_value, as the specification says.
    for (int64_t t = 0; t < ni; ++t) {
      int64_t v;
      if (!int_value_at(idx, t, &v)) continue;
      if (v < 0 && negative_indices && v >= -depth) v += depth;
      if (v < 0 || v >= depth) continue;
      const int64_t o = t / inner, i = t - o * inner;
      std::memcpy(y + ((o * depth + v) * inner + i) * static_cast<int64_t>(es), off_on + es, es);
    }
    return OLC_OK;
  }
};

// ------------------------------------------------------------------ NonZero

class NonZero final : public Kernel {
 public:
  int32_t dtype;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 1 || n_out != 1) return fail(ctx, "expects 1 input and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    const int64_t n = checked_count(x);
    if (n < 0) return fail(ctx, "input 0 has a negative dimension, too many elements or no data");
    std::vector<int64_t> flat;
    with_type(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(x.data);
      for (int64_t i = 0; i < n; ++i)
        if (V<T>::get(p[i]) != 0) flat.push_back(i);  // NaN != 0: counted
    });
    // A scalar is treated as a 1-element vector, as numpy's nonzero does.
    const int rank = x.ndim == 0 ? 1 : x.ndim;
    const int64_t one = 1;
    const int64_t* shape = x.ndim == 0 ? &one : x.shape;
    const int64_t nnz = static_cast<int64_t>(flat.size());
    const int64_t oshape[2] = {rank, nnz};
    int64_t* y = static_cast<int64_t*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_INT64, 2, oshape));
    if (!y && nnz > 0) return OLC_ERROR;
    for (int64_t j = 0; j < nnz; ++j) {
      int64_t rem = flat[j];
      for (int d = rank - 1; d >= 0; --d) {
        y[d * nnz + j] = rem % shape[d];
        rem /= shape[d];
      }
    }
    return OLC_OK;
  }
};

// --------------------------------------------------------------------- TopK

class TopK final : public Kernel {
 public:
  int32_t dtype;
  int64_t axis = -1, largest = 1, sorted = 1;
  bool k_attr = false;
  int64_t k_value = 0;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != (k_attr ? 1 : 2) || n_out != 2)
      return fail(ctx, "expects %d input(s) and 2 outputs, got %d and %d", k_attr ? 1 : 2, n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    if (checked_count(x) < 0) return fail(ctx, "input 0 has a negative dimension, too many elements or no data");
    int64_t k = k_value;
    if (!k_attr) {
      std::vector<int64_t> kv;
      std::string err;
      if (in[1].dtype != OLC_DTYPE_INT64) return fail(ctx, "input 'K' must be int64, got %s", olc_dtype_name(in[1].dtype));
      if (!read_int_tensor(in[1], "input 'K'", &kv, &err)) return fail(ctx, "%s", err.c_str());
      if (kv.size() != 1) return fail(ctx, "input 'K' must hold one value, got %zu", kv.size());
      k = kv[0];
    }
    const int rank = x.ndim;
    if (rank < 1) return fail(ctx, "input must have rank >= 1");
    if (axis < -rank || axis >= rank) return fail(ctx, "axis %lld is out of range for an input of rank %d", (long long)axis, rank);
    const int ax = static_cast<int>(axis < 0 ? axis + rank : axis);
    const int64_t r = x.shape[ax];
    if (k < 0 || k > r) return fail(ctx, "K = %lld is out of range for axis %d of size %lld", (long long)k, ax, (long long)r);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; ++d) outer *= x.shape[d];
    for (int d = ax + 1; d < rank; ++d) inner *= x.shape[d];
    int64_t oshape[kMaxRank];
    for (int d = 0; d < rank; ++d) oshape[d] = x.shape[d];
    oshape[ax] = k;
    void* yv = g_api->allocate_output(ctx, 0, x.dtype, rank, oshape);
    const int64_t total = outer * k * inner;
    if (!yv && total > 0) return OLC_ERROR;
    int64_t* yi = static_cast<int64_t*>(g_api->allocate_output(ctx, 1, OLC_DTYPE_INT64, rank, oshape));
    if (!yi && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    with_type(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      using W = typename V<T>::W;
      const T* xs = static_cast<const T*>(x.data);
      T* ys = static_cast<T*>(yv);
      const bool big = largest != 0;
      par_for(ctx, outer * inner, 1, outer * r * inner * static_cast<int64_t>(sizeof(T)), parallel_min_bytes("TopK"),
              [&](int64_t b, int64_t e) {
                std::vector<std::pair<W, int64_t>> row(static_cast<size_t>(r));
                // NaN counts as larger than every number; ties go to the lower index.
                auto before = [big](const std::pair<W, int64_t>& p, const std::pair<W, int64_t>& q) {
                  const bool pn = p.first != p.first, qn = q.first != q.first;
                  if (pn || qn) {
                    if (pn && qn) return p.second < q.second;
                    return big ? pn : qn;
                  }
                  if (p.first != q.first) return big ? p.first > q.first : p.first < q.first;
                  return p.second < q.second;
                };
                for (int64_t t = b; t < e; ++t) {
                  const int64_t o = t / inner, i = t - o * inner;
                  const T* src = xs + o * r * inner + i;
                  for (int64_t j = 0; j < r; ++j) row[j] = {V<T>::get(src[j * inner]), j};
                  std::partial_sort(row.begin(), row.begin() + k, row.end(), before);
                  T* dv = ys + o * k * inner + i;
                  int64_t* di = yi + o * k * inner + i;
                  for (int64_t j = 0; j < k; ++j) {
                    dv[j * inner] = src[row[j].second * inner];
                    di[j * inner] = row[j].second;
                  }
                }
              });
    });
    return OLC_OK;
  }
};

}  // namespace

// The 'reduction' attribute of ScatterND and ScatterElements: none, add and
// mul from opset 16 (where the attribute appears), max and min from 18.
bool parse_reduction(const olc_node_info* node, Red* red, std::string* error) {
  const olc_attribute* a = find_attr(node, "reduction");
  if (!a) return true;
  const std::string r = a->type == OLC_ATTR_STRING && a->s ? a->s : "";
  if (r == "none" && node->opset >= 16) *red = Red::None;
  else if (r == "add" && node->opset >= 16) *red = Red::Add;
  else if (r == "mul" && node->opset >= 16) *red = Red::Mul;
  else if (r == "max" && node->opset >= 18) *red = Red::Max;
  else if (r == "min" && node->opset >= 18) *red = Red::Min;
  else {
    *error = strf("attribute 'reduction' = \"%s\" is not supported at opset %lld", r.c_str(), (long long)node->opset);
    return false;
  }
  return true;
}

Kernel* make_scatter_nd(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"reduction", nullptr};
  if (!check_attr_names(node, kAttrs, error)) return nullptr;
  auto k = std::make_unique<ScatterND>();
  if (node->n_inputs != 3) {
    *error = "expects 3 inputs";
    return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  if (!movable(k->dtype)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  if (!parse_reduction(node, &k->red, error)) return nullptr;
  return k.release();
}

Kernel* make_gather_nd(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"batch_dims", nullptr};
  auto k = std::make_unique<GatherND>();
  if (!check_attr_names(node, kAttrs, error) || !attr_int(node, "batch_dims", 0, &k->batch_dims, error)) return nullptr;
  if (node->n_inputs != 2) {
    *error = "expects 2 inputs";
    return nullptr;
  }
  if (k->batch_dims < 0 || k->batch_dims >= kMaxRank) {
    *error = strf("attribute 'batch_dims' must be >= 0, got %lld", (long long)k->batch_dims);
    return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  if (!movable(k->dtype)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  return k.release();
}

Kernel* make_scatter_elements(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"axis", "reduction", nullptr};
  auto k = std::make_unique<ScatterElements>();
  if (!check_attr_names(node, kAttrs, error) || !attr_int(node, "axis", 0, &k->axis, error)) return nullptr;
  if (node->n_inputs != 3) {
    *error = "expects 3 inputs";
    return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  if (!movable(k->dtype)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  if (!parse_reduction(node, &k->red, error)) return nullptr;
  return k.release();
}

Kernel* make_one_hot(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"axis", nullptr};
  auto k = std::make_unique<OneHot>();
  if (!check_attr_names(node, kAttrs, error) || !attr_int(node, "axis", -1, &k->axis, error)) return nullptr;
  if (node->n_inputs != 3) {
    *error = "expects 3 inputs";
    return nullptr;
  }
  k->negative_indices = node->opset >= 11;
  return k.release();
}

Kernel* make_nonzero(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {nullptr};
  if (!check_attr_names(node, kAttrs, error)) return nullptr;
  auto k = std::make_unique<NonZero>();
  k->dtype = node->n_inputs == 1 ? node->input_dtypes[0] : OLC_DTYPE_UNDEFINED;
  if (!movable(k->dtype)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  return k.release();
}

Kernel* make_topk(const olc_node_info* node, std::string* error) {
  auto k = std::make_unique<TopK>();
  k->k_attr = node->opset < 10;
  static const char* const kAttrs1[] = {"axis", "k", nullptr};
  static const char* const kAttrs10[] = {"axis", "largest", "sorted", nullptr};
  if (!check_attr_names(node, k->k_attr ? kAttrs1 : kAttrs10, error) || !attr_int(node, "axis", -1, &k->axis, error) ||
      !attr_int(node, "largest", 1, &k->largest, error) || !attr_int(node, "sorted", 1, &k->sorted, error))
    return nullptr;
  if (k->k_attr) {
    if (!find_attr(node, "k")) {
      *error = "attribute 'k' is required";
      return nullptr;
    }
    if (!attr_int(node, "k", 0, &k->k_value, error)) return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  if (!movable(k->dtype) || k->dtype == OLC_DTYPE_BOOL) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  return k.release();
}

}  // namespace olc_tn
