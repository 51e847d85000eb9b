// Operators whose output shape comes from input values or whose output is
// generated rather than moved: ConstantOfShape, Range, EyeLike, Trilu. Each
// reads and checks the values that size its output before allocating it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "common.h"
#include "fp_convert.h"
#include "registry.h"

namespace olc_tn {
namespace {

// The bytes of the value 1 in a dtype (false for types EyeLike cannot make).
bool one_bits(int32_t dtype, uint64_t* out) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: *out = 0x3f800000u; return true;
    case OLC_DTYPE_DOUBLE: *out = 0x3ff0000000000000ull; return true;
    case OLC_DTYPE_FLOAT16: *out = 0x3c00u; return true;
    case OLC_DTYPE_BFLOAT16: *out = 0x3f80u; return true;
    case OLC_DTYPE_BOOL: case OLC_DTYPE_INT8: case OLC_DTYPE_UINT8: case OLC_DTYPE_INT16: case OLC_DTYPE_UINT16:
    case OLC_DTYPE_INT32: case OLC_DTYPE_UINT32: case OLC_DTYPE_INT64: case OLC_DTYPE_UINT64:
      *out = 1;
      return true;
    default: return false;
  }
}

// A one-element input read as its only value; false (error set) otherwise.
bool single_element(olc_context* ctx, const olc_tensor& t, const char* what) {
  if (t.ndim > 1 || checked_count(t) != 1) {
    fail(ctx, "%s must be a scalar (one element), got shape %s", what, shape_str(t.shape, t.ndim).c_str());
    return false;
  }
  return true;
}

// --------------------------------------------------------- ConstantOfShape

class ConstantOfShape final : public Kernel {
 public:
  int32_t dtype = OLC_DTYPE_FLOAT;
  uint64_t bits = 0;  // the value's bytes, little-endian in the low bytes
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 1 || n_out != 1) return fail(ctx, "expects 1 input and 1 output, got %d and %d", n_in, n_out);
    if (in[0].dtype != OLC_DTYPE_INT64) return fail(ctx, "input 'input' must be int64, got %s", olc_dtype_name(in[0].dtype));
    std::vector<int64_t> shape;
    std::string err;
    if (!read_int_tensor(in[0], "input 'input' (the shape)", &shape, &err)) return fail(ctx, "%s", err.c_str());
    if (shape.size() > static_cast<size_t>(kMaxRank)) return fail(ctx, "output rank %zu is too large", shape.size());
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] < 0) return fail(ctx, "shape value %lld (at position %zu) is negative", (long long)shape[i], i);
    const int rank = static_cast<int>(shape.size());
    const olc_tensor probe{dtype, rank, shape.data(), nullptr};
    const int64_t total = olc_element_count(&probe);
    if (total < 0) return fail(ctx, "output shape %s is too large", shape_str(shape.data(), rank).c_str());
    void* y = g_api->allocate_output(ctx, 0, dtype, rank, shape.data());
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    uint8_t value[8];
    std::memcpy(value, &bits, sizeof value);  // x86-64: the low bytes first
    parallel_fill(ctx, y, total, olc_dtype_size(dtype), value, parallel_min_bytes("ConstantOfShape"));
    return OLC_OK;
  }
};

// ------------------------------------------------------------------- Range

template <class T>
void range_int(T* y, int64_t n, int64_t start, int64_t delta) {
  // start + i * delta stays between start and limit: no value leaves T, and
  // the unsigned arithmetic keeps every step defined.
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(start) +
                                               static_cast<uint64_t>(i) * static_cast<uint64_t>(delta)));
}

// output[i] = start + i * delta evaluated in W (the spec's pseudocode), then
// stored as T.
template <class W, class T, class Store>
void range_real(T* y, int64_t n, W start, W delta, Store store) {
  for (int64_t i = 0; i < n; ++i) {
    const W step = static_cast<W>(i) * delta;
    y[i] = store(static_cast<W>(start + step));
  }
}

class Range final : public Kernel {
 public:
  int32_t dtype;
  int64_t stash = OLC_DTYPE_FLOAT;  // float16/bfloat16 compute in float32 (1) or float64 (11)
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 3 || n_out != 1) return fail(ctx, "expects 3 inputs and 1 output, got %d and %d", n_in, n_out);
    static const char* const kNames[] = {"start", "limit", "delta"};
    for (int i = 0; i < 3; ++i) {
      if (in[i].dtype != dtype)
        return fail(ctx, "input '%s' has type %s, the kernel was created for %s", kNames[i], olc_dtype_name(in[i].dtype),
                    olc_dtype_name(dtype));
      if (!single_element(ctx, in[i], strf("input '%s'", kNames[i]).c_str())) return OLC_ERROR;
    }
    if (dtype == OLC_DTYPE_INT16 || dtype == OLC_DTYPE_INT32 || dtype == OLC_DTYPE_INT64) {
      auto get = [&](int i) -> int64_t {
        switch (dtype) {
          case OLC_DTYPE_INT16: return *static_cast<const int16_t*>(in[i].data);
          case OLC_DTYPE_INT32: return *static_cast<const int32_t*>(in[i].data);
          default: return *static_cast<const int64_t*>(in[i].data);
        }
      };
      const int64_t start = get(0), limit = get(1), delta = get(2);
      if (delta == 0) return fail(ctx, "delta is 0: the range would never reach limit %lld", (long long)limit);
      // ceil((limit - start) / delta) exactly, in 128 bits.
      const __int128 diff = static_cast<__int128>(limit) - start;
      __int128 count = 0;
      if (delta > 0 && diff > 0) count = (diff + delta - 1) / delta;
      if (delta < 0 && diff < 0) count = (-diff + (-static_cast<__int128>(delta)) - 1) / -static_cast<__int128>(delta);
      if (count > std::numeric_limits<int64_t>::max())
        return fail(ctx, "the range from %lld to %lld by %lld has too many elements", (long long)start, (long long)limit,
                    (long long)delta);
      const int64_t n = static_cast<int64_t>(count);
      void* y = g_api->allocate_output(ctx, 0, dtype, 1, &n);
      if (!y && n > 0) return OLC_ERROR;
      switch (dtype) {
        case OLC_DTYPE_INT16: range_int(static_cast<int16_t*>(y), n, start, delta); break;
        case OLC_DTYPE_INT32: range_int(static_cast<int32_t*>(y), n, start, delta); break;
        default: range_int(static_cast<int64_t*>(y), n, start, delta); break;
      }
      return OLC_OK;
    }
    auto get = [&](int i) -> double {
      switch (dtype) {
        case OLC_DTYPE_FLOAT: return *static_cast<const float*>(in[i].data);
        case OLC_DTYPE_DOUBLE: return *static_cast<const double*>(in[i].data);
        case OLC_DTYPE_FLOAT16: return f16_to_f32(*static_cast<const uint16_t*>(in[i].data));
        default: return bf16_to_f32(*static_cast<const uint16_t*>(in[i].data));
      }
    };
    const double start = get(0), limit = get(1), delta = get(2);
    if (delta == 0) return fail(ctx, "delta is 0: the range would never reach limit %g", limit);
    const double c = std::ceil((limit - start) / delta);
    if (!(c == c) || std::isinf(c))
      return fail(ctx, "the element count ceil((limit - start) / delta) = ceil((%g - %g) / %g) is not finite", limit, start,
                  delta);
    if (c >= 9223372036854775808.0)
      return fail(ctx, "the range from %g to %g by %g has too many elements", start, limit, delta);
    const int64_t n = c > 0 ? static_cast<int64_t>(c) : 0;
    void* y = g_api->allocate_output(ctx, 0, dtype, 1, &n);
    if (!y && n > 0) return OLC_ERROR;
    if (n == 0) return OLC_OK;
    switch (dtype) {
      case OLC_DTYPE_FLOAT:
        range_real<float>(static_cast<float*>(y), n, static_cast<float>(start), static_cast<float>(delta),
                          [](float v) { return v; });
        break;
      case OLC_DTYPE_DOUBLE:
        range_real<double>(static_cast<double*>(y), n, start, delta, [](double v) { return v; });
        break;
      default: {
        const bool h = dtype == OLC_DTYPE_FLOAT16;
        uint16_t* yh = static_cast<uint16_t*>(y);
        if (stash == OLC_DTYPE_DOUBLE)
          range_real<double>(yh, n, start, delta, [h](double v) { return h ? f64_to_f16(v) : f64_to_bf16(v); });
        else
          range_real<float>(yh, n, static_cast<float>(start), static_cast<float>(delta),
                            [h](float v) { return h ? f32_to_f16(v) : f32_to_bf16(v); });
        break;
      }
    }
    return OLC_OK;
  }
};

// ----------------------------------------------------------------- EyeLike

class EyeLike final : public Kernel {
 public:
  int32_t out_dtype;
  int64_t k = 0;
  uint64_t one = 1;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 1 || n_out != 1) return fail(ctx, "expects 1 input and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.ndim != 2) return fail(ctx, "input must be 2-D, got shape %s", shape_str(x.shape, x.ndim).c_str());
    const int64_t total = checked_count(x);
    if (total < 0) return fail(ctx, "input 0 has a negative dimension or too many elements");
    void* y = g_api->allocate_output(ctx, 0, out_dtype, 2, x.shape);
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const int64_t rows = x.shape[0], cols = x.shape[1];
    const size_t es = olc_dtype_size(out_dtype);
    const uint64_t zero = 0;
    parallel_fill(ctx, y, total, es, &zero, parallel_min_bytes("EyeLike"));
    if (k >= cols || k <= -rows) return OLC_OK;  // the diagonal misses the matrix
    const int64_t i0 = k < 0 ? -k : 0, i1 = std::min(rows, cols - k);
    char* yc = static_cast<char*>(y);
    for (int64_t i = i0; i < i1; ++i) std::memcpy(yc + (i * cols + i + k) * static_cast<int64_t>(es), &one, es);
    return OLC_OK;
  }
};

// ------------------------------------------------------------------- Trilu

class Trilu final : public Kernel {
 public:
  int32_t dtype;
  int64_t upper = 1;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in < 1 || n_in > 2 || n_out != 1) return fail(ctx, "expects 1 or 2 inputs and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    const int64_t total = checked_count(x);
    if (total < 0) return fail(ctx, "input 0 has a negative dimension, too many elements or no data");
    if (x.ndim < 2) return fail(ctx, "input must have rank >= 2, got shape %s", shape_str(x.shape, x.ndim).c_str());
    int64_t k = 0;
    if (n_in == 2 && in[1].dtype != OLC_DTYPE_UNDEFINED) {
      if (in[1].dtype != OLC_DTYPE_INT64) return fail(ctx, "input 'k' must be int64, got %s", olc_dtype_name(in[1].dtype));
      if (!single_element(ctx, in[1], "input 'k'")) return OLC_ERROR;
      k = *static_cast<const int64_t*>(in[1].data);
    }
    const int64_t n = x.shape[x.ndim - 2], m = x.shape[x.ndim - 1];
    // Every k outside [-n, m] keeps all or nothing, as the clamped one does;
    // clamping keeps i + k far from int64's limits.
    k = std::clamp<int64_t>(k, -n, m);
    void* y = g_api->allocate_output(ctx, 0, x.dtype, x.ndim, x.shape);
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const int64_t es = static_cast<int64_t>(olc_dtype_size(x.dtype));
    const int64_t rows = total / m, row_bytes = m * es;
    const char* src = static_cast<const char*>(x.data);
    char* dst = static_cast<char*>(y);
    const bool up = upper != 0;
    const int64_t grain = std::max<int64_t>(1, (16 << 10) / row_bytes);
    par_for(ctx, rows, grain, total * es * 2, parallel_min_bytes("Trilu"), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t i = r % n;
        // Kept columns [lo, hi): upper keeps j >= i + k, lower j <= i + k.
        const int64_t lo = up ? std::clamp<int64_t>(i + k, 0, m) : 0;
        const int64_t hi = up ? m : std::clamp<int64_t>(i + k + 1, 0, m);
        char* d = dst + r * row_bytes;
        const char* s = src + r * row_bytes;
        if (lo > 0) std::memset(d, 0, static_cast<size_t>(lo * es));
        if (hi > lo) std::memcpy(d + lo * es, s + lo * es, static_cast<size_t>((hi - lo) * es));
        if (hi < m) std::memset(d + hi * es, 0, static_cast<size_t>((m - hi) * es));
      }
    });
    return OLC_OK;
  }
};

}  // namespace

Kernel* make_constant_of_shape(const olc_node_info* node, std::string* error) {
  auto k = std::make_unique<ConstantOfShape>();
  if (node->n_inputs != 1) {
    *error = strf("expects 1 input, got %d", node->n_inputs);
    return nullptr;
  }
  if (!std::strcmp(node->domain, "ai.onnx")) {
    // The 'value' attribute is a tensor, which reaches native kernels only
    // restated by the olc-tensor graph pass (domain olc.tensor, below).
    static const char* const kAttrs[] = {nullptr};
    if (!check_attr_names(node, kAttrs, error)) return nullptr;
    return k.release();  // float32 zeros
  }
  static const char* const kAttrs[] = {"dtype", "value_bits", nullptr};
  int64_t dt = 0, bits = 0;
  if (!check_attr_names(node, kAttrs, error) || !attr_int(node, "dtype", OLC_DTYPE_FLOAT, &dt, error) ||
      !attr_int(node, "value_bits", 0, &bits, error))
    return nullptr;
  if (!movable(static_cast<int32_t>(dt))) {
    *error = strf("attribute 'dtype' = %lld is not a type olc fills natively", (long long)dt);
    return nullptr;
  }
  k->dtype = static_cast<int32_t>(dt);
  const size_t es = olc_dtype_size(k->dtype);
  k->bits = es == 8 ? static_cast<uint64_t>(bits) : static_cast<uint64_t>(bits) & ((uint64_t{1} << (8 * es)) - 1);
  if (k->dtype == OLC_DTYPE_BOOL) k->bits = k->bits != 0;
  return k.release();
}

Kernel* make_range(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"stash_type", nullptr};
  auto k = std::make_unique<Range>();
  if (!check_attr_names(node, kAttrs, error) || !attr_int(node, "stash_type", OLC_DTYPE_FLOAT, &k->stash, error))
    return nullptr;
  if (k->stash != OLC_DTYPE_FLOAT && k->stash != OLC_DTYPE_DOUBLE) {
    *error = strf("attribute 'stash_type' must be 1 (float) or 11 (double), got %lld", (long long)k->stash);
    return nullptr;
  }
  if (node->n_inputs != 3) {
    *error = strf("expects 3 inputs, got %d", node->n_inputs);
    return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  switch (k->dtype) {
    case OLC_DTYPE_FLOAT: case OLC_DTYPE_DOUBLE: case OLC_DTYPE_INT16: case OLC_DTYPE_INT32: case OLC_DTYPE_INT64:
    case OLC_DTYPE_FLOAT16: case OLC_DTYPE_BFLOAT16:
      break;
    default:
      *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
      return nullptr;
  }
  return k.release();
}

Kernel* make_eye_like(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"dtype", "k", nullptr};
  auto k = std::make_unique<EyeLike>();
  if (node->n_inputs != 1) {
    *error = strf("expects 1 input, got %d", node->n_inputs);
    return nullptr;
  }
  int64_t dt = node->input_dtypes[0];
  if (!check_attr_names(node, kAttrs, error) || !attr_int(node, "dtype", dt, &dt, error) ||
      !attr_int(node, "k", 0, &k->k, error))
    return nullptr;
  k->out_dtype = static_cast<int32_t>(dt);
  if (dt != k->out_dtype || !one_bits(k->out_dtype, &k->one)) {
    *error = strf("output type %s (dtype %lld) is not supported", olc_dtype_name(k->out_dtype), (long long)dt);
    return nullptr;
  }
  return k.release();
}

Kernel* make_trilu(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"upper", nullptr};
  auto k = std::make_unique<Trilu>();
  if (!check_attr_names(node, kAttrs, error) || !attr_int(node, "upper", 1, &k->upper, error)) return nullptr;
  if (node->n_inputs < 1 || node->n_inputs > 2) {
    *error = strf("expects 1 or 2 inputs, got %d", node->n_inputs);
    return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  if (!movable(k->dtype)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  return k.release();
}

}  // namespace olc_tn
