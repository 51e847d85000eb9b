// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ArgMax and ArgMin.
//
// Reductions: size-1 dimensions are dropped and neighbouring dimensions that
// are both reduced or both kept are merged; the input is then walked once in
// memory order, each contiguous row either folded into one accumulator (a
// reduced inner dimension) or combined element-wise into a row of
// accumulators (a kept inner dimension). When the outermost merged dimension
// is kept, its slices run in parallel (they write disjoint outputs).
// Accumulators: float64 for floating types (float16/bfloat16 rounded once at
// the end), wrapping 64-bit integers for integer sums, the value itself for
// Max/Min. Max/Min propagate NaN; over an empty set Sum gives 0, Mean NaN
// (integers: 0), Max the lowest value (-inf) and Min the highest (+inf).
// BOOL (Max/Min from opset 20) orders false < true: Max is any, Min is all;
// over an empty set Max gives false and Min true.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "common.h"
#include "fp_convert.h"
#include "reduce_kernels.h"
#include "registry.h"

namespace olc_tn {
namespace {

enum class RKind { Sum, Mean, Max, Min };

struct F16 {
  uint16_t v;
};
struct BF16 {
  uint16_t v;
};
struct Bool8 {
  uint8_t v;
};

template <class T>
struct Traits {  // integers
  using Acc = typename std::conditional<std::is_signed<T>::value, int64_t, uint64_t>::type;
  static Acc load(T v) { return static_cast<Acc>(v); }
  static T store(Acc a) { return static_cast<T>(a); }
  static constexpr bool is_float = false;
};
template <>
struct Traits<Bool8> {  // any nonzero byte is true; results are 0 or 1
  using Acc = uint64_t;
  static Acc load(Bool8 b) { return b.v != 0; }
  static Bool8 store(Acc a) { return Bool8{static_cast<uint8_t>(a != 0)}; }
  static constexpr bool is_float = false;
};
template <>
struct Traits<float> {
  using Acc = double;
  static double load(float v) { return v; }
  static float store(double a) { return static_cast<float>(a); }
  static constexpr bool is_float = true;
};
template <>
struct Traits<double> {
  using Acc = double;
  static double load(double v) { return v; }
  static double store(double a) { return a; }
  static constexpr bool is_float = true;
};
template <>
struct Traits<F16> {
  using Acc = double;
  static double load(F16 v) { return f16_to_f32(v.v); }
  static F16 store(double a) { return F16{f64_to_f16(a)}; }
  static constexpr bool is_float = true;
};
template <>
struct Traits<BF16> {
  using Acc = double;
  static double load(BF16 v) { return bf16_to_f32(v.v); }
  static BF16 store(double a) { return BF16{f64_to_bf16(a)}; }
  static constexpr bool is_float = true;
};

template <class Acc, RKind K>
struct Combine {
  static Acc init() {
    if constexpr (K == RKind::Sum || K == RKind::Mean) return Acc(0);
    else if constexpr (K == RKind::Max) {
      if constexpr (std::is_floating_point<Acc>::value) return -std::numeric_limits<Acc>::infinity();
      else return std::numeric_limits<Acc>::lowest();
    } else {
      if constexpr (std::is_floating_point<Acc>::value) return std::numeric_limits<Acc>::infinity();
      else return std::numeric_limits<Acc>::max();
    }
  }
  static Acc apply(Acc a, Acc b) {
    if constexpr (K == RKind::Sum || K == RKind::Mean) {
      if constexpr (std::is_floating_point<Acc>::value) return a + b;
      else return static_cast<Acc>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));  // wraps
    } else if constexpr (K == RKind::Max) {
      if constexpr (std::is_floating_point<Acc>::value)
        if (a != a || b != b) return std::numeric_limits<Acc>::quiet_NaN();
      return b > a ? b : a;
    } else {
      if constexpr (std::is_floating_point<Acc>::value)
        if (a != a || b != b) return std::numeric_limits<Acc>::quiet_NaN();
      return b < a ? b : a;
    }
  }
};

// Integer bounds for Max/Min over an empty set (the element type's, not the
// accumulator's).
template <class T, class Acc, RKind K>
Acc empty_value() {
  if constexpr (Traits<T>::is_float) {
    return Combine<Acc, K>::init();
  } else if constexpr (std::is_same<T, Bool8>::value) {
    return Acc(K == RKind::Min ? 1 : 0);
  } else {
    if constexpr (K == RKind::Max) return static_cast<Acc>(std::numeric_limits<T>::lowest());
    else if constexpr (K == RKind::Min) return static_cast<Acc>(std::numeric_limits<T>::max());
    else return Acc(0);
  }
}

struct Plan {
  RowReduceF32 rr;  // float32 rows reduced along a contiguous axis
  int m = 0;
  int64_t d[kMaxRank];
  bool red[kMaxRank];
  int64_t ostride[kMaxRank];
  int64_t out_count = 1, red_count = 1;
};

template <class T, RKind K>
void reduce_typed(olc_context* ctx, const Plan& p, const T* x, T* y) {
  using Tr = Traits<T>;
  using Acc = typename Tr::Acc;
  using C = Combine<Acc, K>;
  if (p.red_count == 0) {
    Acc v = empty_value<T, Acc, K>();
    if constexpr (K == RKind::Mean && Tr::is_float) v = std::numeric_limits<Acc>::quiet_NaN();
    for (int64_t i = 0; i < p.out_count; ++i) y[i] = Tr::store(v);
    return;
  }
  const int m = p.m;
  const int64_t inner = p.d[m - 1];
  const bool inner_red = p.red[m - 1];
  // Parallel over the outermost dimension when it is kept.
  const bool split = m > 1 && !p.red[0] && p.d[0] > 1;
  const int64_t n0 = split ? p.d[0] : 1;
  const int64_t in_block = [&] {
    int64_t s = 1;
    for (int k = split ? 1 : 0; k < m; ++k) s *= p.d[k];
    return s;
  }();
  const int64_t out_block = split ? p.ostride[0] : p.out_count;
  par_for(ctx, n0, 1, n0 * in_block * static_cast<int64_t>(sizeof(T)), parallel_min_bytes("Reduce"),
          [&](int64_t b, int64_t e) {
            std::vector<Acc> acc(static_cast<size_t>(out_block));
            const int first = split ? 1 : 0;
            for (int64_t s0 = b; s0 < e; ++s0) {
              std::fill(acc.begin(), acc.end(), C::init());
              const T* xs = x + s0 * in_block;
              int64_t idx[kMaxRank] = {};
              int64_t o = 0;
              const int64_t rows = in_block / inner;
              for (int64_t r = 0; r < rows; ++r) {
                const T* row = xs + r * inner;
                if (inner_red) {
                  if constexpr (std::is_same<T, float>::value) {
                    // Vectorized row: sums in float64, max/min exact with NaN propagated.
                    double v;
                    if constexpr (K == RKind::Sum || K == RKind::Mean) v = p.rr.sum(row, inner);
                    else if constexpr (K == RKind::Max) v = p.rr.max(row, inner);
                    else v = p.rr.min(row, inner);
                    acc[o] = C::apply(acc[o], v);
                  } else {
                    Acc a = acc[o];
                    for (int64_t i = 0; i < inner; ++i) a = C::apply(a, Tr::load(row[i]));
                    acc[o] = a;
                  }
                } else {
                  Acc* ar = acc.data() + o;
                  for (int64_t i = 0; i < inner; ++i) ar[i] = C::apply(ar[i], Tr::load(row[i]));
                }
                for (int k = m - 2; k >= first; --k) {
                  o += p.ostride[k];
                  if (++idx[k] < p.d[k]) break;
                  o -= p.ostride[k] * p.d[k];
                  idx[k] = 0;
                }
              }
              T* ys = y + s0 * out_block;
              for (int64_t i = 0; i < out_block; ++i) {
                Acc v = acc[i];
                if constexpr (K == RKind::Mean) {
                  if constexpr (Tr::is_float) v = v / static_cast<double>(p.red_count);
                  else v = static_cast<Acc>(static_cast<int64_t>(v) / p.red_count);
                }
                ys[i] = Tr::store(v);
              }
            }
          });
}

template <RKind K>
void reduce_dispatch(olc_context* ctx, int32_t dtype, const Plan& p, const void* x, void* y) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: reduce_typed<float, K>(ctx, p, static_cast<const float*>(x), static_cast<float*>(y)); break;
    case OLC_DTYPE_DOUBLE: reduce_typed<double, K>(ctx, p, static_cast<const double*>(x), static_cast<double*>(y)); break;
    case OLC_DTYPE_FLOAT16: reduce_typed<F16, K>(ctx, p, static_cast<const F16*>(x), static_cast<F16*>(y)); break;
    case OLC_DTYPE_BFLOAT16: reduce_typed<BF16, K>(ctx, p, static_cast<const BF16*>(x), static_cast<BF16*>(y)); break;
    case OLC_DTYPE_INT8: reduce_typed<int8_t, K>(ctx, p, static_cast<const int8_t*>(x), static_cast<int8_t*>(y)); break;
    case OLC_DTYPE_UINT8: reduce_typed<uint8_t, K>(ctx, p, static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y)); break;
    case OLC_DTYPE_BOOL: reduce_typed<Bool8, K>(ctx, p, static_cast<const Bool8*>(x), static_cast<Bool8*>(y)); break;
    case OLC_DTYPE_INT32: reduce_typed<int32_t, K>(ctx, p, static_cast<const int32_t*>(x), static_cast<int32_t*>(y)); break;
    case OLC_DTYPE_INT64: reduce_typed<int64_t, K>(ctx, p, static_cast<const int64_t*>(x), static_cast<int64_t*>(y)); break;
    case OLC_DTYPE_UINT32: reduce_typed<uint32_t, K>(ctx, p, static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y)); break;
    case OLC_DTYPE_UINT64: reduce_typed<uint64_t, K>(ctx, p, static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y)); break;
    default: break;
  }
}

bool reducible(int32_t dtype, RKind k) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: case OLC_DTYPE_DOUBLE: case OLC_DTYPE_FLOAT16: case OLC_DTYPE_BFLOAT16:
    case OLC_DTYPE_INT32: case OLC_DTYPE_INT64: case OLC_DTYPE_UINT32: case OLC_DTYPE_UINT64:
      return true;
    case OLC_DTYPE_INT8: case OLC_DTYPE_UINT8: case OLC_DTYPE_BOOL:
      return k == RKind::Max || k == RKind::Min;
    default:
      return false;
  }
}

class Reduce final : public Kernel {
 public:
  RKind kind;
  int32_t dtype;
  bool axes_input;  // axes arrive as input 1 (else the attribute)
  std::vector<int64_t> attr_axes;
  bool has_attr_axes = false;
  int64_t keepdims = 1, noop = 0;
  RowReduceF32 rr;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in < 1 || n_in > 2 || n_out != 1) return fail(ctx, "expects 1 or 2 inputs and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    const int64_t total = checked_count(x);
    if (total < 0) return fail(ctx, "input 0 has a negative dimension, too many elements or no data");
    std::vector<int64_t> axes;
    bool given = false;
    std::string err;
    if (axes_input) {
      if (n_in == 2 && in[1].dtype != OLC_DTYPE_UNDEFINED) {
        if (in[1].dtype != OLC_DTYPE_INT64) return fail(ctx, "input 'axes' must be int64, got %s", olc_dtype_name(in[1].dtype));
        if (!read_int_tensor(in[1], "input 'axes'", &axes, &err)) return fail(ctx, "%s", err.c_str());
        given = true;
      }
    } else if (has_attr_axes) {
      axes = attr_axes;
      given = true;
    }
    const int rank = x.ndim;
    bool red[kMaxRank] = {};
    if (!given || axes.empty()) {
      if (noop && axes_input) {
        void* y = g_api->allocate_output(ctx, 0, x.dtype, rank, x.shape);
        if (!y && total > 0) return OLC_ERROR;
        if (total) parallel_copy(ctx, y, x.data, total * static_cast<int64_t>(olc_dtype_size(x.dtype)), 256 << 10);
        return OLC_OK;
      }
      for (int k = 0; k < rank; ++k) red[k] = true;
    } else {
      for (int64_t a : axes) {
        if (a < -rank || a >= rank) return fail(ctx, "axis %lld is out of range for an input of rank %d", (long long)a, rank);
        const int k = static_cast<int>(a < 0 ? a + rank : a);
        if (red[k]) return fail(ctx, "axis %lld is repeated in axes", (long long)a);
        red[k] = true;
      }
    }
    int64_t oshape[kMaxRank];
    int orank = 0;
    Plan p;
    p.rr = rr;
    for (int k = 0; k < rank; ++k) {
      if (red[k]) {
        p.red_count *= x.shape[k];
        if (keepdims) oshape[orank++] = 1;
      } else {
        p.out_count *= x.shape[k];
        oshape[orank++] = x.shape[k];
      }
    }
    void* y = g_api->allocate_output(ctx, 0, x.dtype, orank, oshape);
    if (!y && p.out_count > 0) return OLC_ERROR;
    if (p.out_count == 0) return OLC_OK;
    // Merge: drop size-1 dims, join neighbours with the same flag.
    for (int k = 0; k < rank; ++k) {
      if (x.shape[k] == 1) continue;
      if (p.m > 0 && p.red[p.m - 1] == red[k]) {
        p.d[p.m - 1] *= x.shape[k];
      } else {
        p.d[p.m] = x.shape[k];
        p.red[p.m] = red[k];
        ++p.m;
      }
    }
    if (p.m == 0) {
      p.d[0] = 1;
      p.red[0] = false;
      p.m = 1;
    }
    int64_t s = 1;
    for (int k = p.m - 1; k >= 0; --k) {
      p.ostride[k] = p.red[k] ? 0 : s;
      if (!p.red[k]) s *= p.d[k];
    }
    switch (kind) {
      case RKind::Sum: reduce_dispatch<RKind::Sum>(ctx, dtype, p, x.data, y); break;
      case RKind::Mean: reduce_dispatch<RKind::Mean>(ctx, dtype, p, x.data, y); break;
      case RKind::Max: reduce_dispatch<RKind::Max>(ctx, dtype, p, x.data, y); break;
      case RKind::Min: reduce_dispatch<RKind::Min>(ctx, dtype, p, x.data, y); break;
    }
    return OLC_OK;
  }
};

Kernel* make_reduce(const olc_node_info* node, RKind kind, int64_t axes_input_since, std::string* error) {
  auto k = std::make_unique<Reduce>();
  k->kind = kind;
  k->axes_input = node->opset >= axes_input_since;
  static const char* const kAttrIn[] = {"keepdims", "noop_with_empty_axes", nullptr};
  static const char* const kAttrAttr[] = {"keepdims", "axes", nullptr};
  if (!check_attr_names(node, k->axes_input ? kAttrIn : kAttrAttr, error)) return nullptr;
  if (!attr_int(node, "keepdims", 1, &k->keepdims, error) || !attr_int(node, "noop_with_empty_axes", 0, &k->noop, error))
    return nullptr;
  if (!k->axes_input && !attr_ints(node, "axes", &k->attr_axes, &k->has_attr_axes, error)) return nullptr;
  if (node->n_inputs < 1) {
    *error = "expects an input";
    return nullptr;
  }
  const int32_t level = g_api->simd_level();
  k->rr = level >= OLC_SIMD_AVX512 ? avx512::row_reduce_f32()
          : level >= OLC_SIMD_AVX2 ? avx2::row_reduce_f32()
                                   : scalar::row_reduce_f32();
  k->dtype = node->input_dtypes[0];
  if (!reducible(k->dtype, kind)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  return k.release();
}

// ------------------------------------------------------------ ArgMax/ArgMin

// Whether v replaces the best value b so far. NaN wins, as in numpy: the
// first one, or the last one with select_last_index; ties go to the first
// index, or the last with select_last_index.
template <bool kFloat, bool kMax, class Acc>
inline bool arg_takes(Acc b, Acc v, bool last) {
  if constexpr (kFloat) {
    if (b != b) return last && v != v;
    if (v != v) return true;
  }
  return kMax ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
}

template <class T, bool kMax>
void arg_typed(const T* x, int64_t* y, int64_t outer, int64_t r, int64_t inner, bool last) {
  using Tr = Traits<T>;
  using Acc = typename Tr::Acc;
  if (inner == 1) {  // a contiguous row per output: one running best in a register
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = x + o * r;
      Acc b = Tr::load(row[0]);
      int64_t bi = 0;
      for (int64_t j = 1; j < r; ++j) {
        const Acc v = Tr::load(row[j]);
        if (arg_takes<Tr::is_float, kMax>(b, v, last)) {
          b = v;
          bi = j;
        }
      }
      y[o] = bi;
    }
    return;
  }
  std::vector<Acc> best(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * r * inner;
    int64_t* yo = y + o * inner;
    for (int64_t i = 0; i < inner; ++i) {
      best[i] = Tr::load(xo[i]);
      yo[i] = 0;
    }
    for (int64_t j = 1; j < r; ++j) {
      const T* row = xo + j * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const Acc v = Tr::load(row[i]);
        if (arg_takes<Tr::is_float, kMax>(best[i], v, last)) {
          best[i] = v;
          yo[i] = j;
        }
      }
    }
  }
}

template <bool kMax>
bool arg_dispatch(int32_t dtype, const void* x, int64_t* y, int64_t outer, int64_t r, int64_t inner, bool last) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: arg_typed<float, kMax>(static_cast<const float*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_DOUBLE: arg_typed<double, kMax>(static_cast<const double*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_FLOAT16: arg_typed<F16, kMax>(static_cast<const F16*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_BFLOAT16: arg_typed<BF16, kMax>(static_cast<const BF16*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_INT8: arg_typed<int8_t, kMax>(static_cast<const int8_t*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_INT16: arg_typed<int16_t, kMax>(static_cast<const int16_t*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_INT32: arg_typed<int32_t, kMax>(static_cast<const int32_t*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_INT64: arg_typed<int64_t, kMax>(static_cast<const int64_t*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_UINT8: arg_typed<uint8_t, kMax>(static_cast<const uint8_t*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_UINT16: arg_typed<uint16_t, kMax>(static_cast<const uint16_t*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_UINT32: arg_typed<uint32_t, kMax>(static_cast<const uint32_t*>(x), y, outer, r, inner, last); return true;
    case OLC_DTYPE_UINT64: arg_typed<uint64_t, kMax>(static_cast<const uint64_t*>(x), y, outer, r, inner, last); return true;
    default: return false;
  }
}

class ArgReduce final : public Kernel {
 public:
  bool is_max;
  int32_t dtype;
  int64_t axis = 0, keepdims = 1, last = 0;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 1 || n_out != 1) return fail(ctx, "expects 1 input and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    if (checked_count(x) < 0) return fail(ctx, "input 0 has a negative dimension, too many elements or no data");
    const int rank = x.ndim;
    if (rank < 1) return fail(ctx, "input must have rank >= 1");
    if (axis < -rank || axis >= rank) return fail(ctx, "axis %lld is out of range for an input of rank %d", (long long)axis, rank);
    const int ax = static_cast<int>(axis < 0 ? axis + rank : axis);
    const int64_t r = x.shape[ax];
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < ax; ++k) outer *= x.shape[k];
    for (int k = ax + 1; k < rank; ++k) inner *= x.shape[k];
    if (r == 0 && outer * inner > 0) return fail(ctx, "cannot take the arg%s over axis %d of size 0", is_max ? "max" : "min", ax);
    int64_t oshape[kMaxRank];
    int orank = 0;
    for (int k = 0; k < rank; ++k) {
      if (k == ax) {
        if (keepdims) oshape[orank++] = 1;
      } else {
        oshape[orank++] = x.shape[k];
      }
    }
    int64_t* y = static_cast<int64_t*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_INT64, orank, oshape));
    if (!y && outer * inner > 0) return OLC_ERROR;
    if (outer * inner == 0) return OLC_OK;
    const size_t es = olc_dtype_size(dtype);
    const char* xs = static_cast<const char*>(x.data);
    par_for(ctx, outer, 1, outer * r * inner * static_cast<int64_t>(es), parallel_min_bytes("ArgReduce"),
            [&](int64_t b, int64_t e) {
              const void* xb = xs + b * r * inner * static_cast<int64_t>(es);
              if (is_max) arg_dispatch<true>(dtype, xb, y + b * inner, e - b, r, inner, last != 0);
              else arg_dispatch<false>(dtype, xb, y + b * inner, e - b, r, inner, last != 0);
            });
    return OLC_OK;
  }
};

Kernel* make_arg(const olc_node_info* node, bool is_max, std::string* error) {
  static const char* const kAttrs[] = {"axis", "keepdims", "select_last_index", nullptr};
  auto k = std::make_unique<ArgReduce>();
  k->is_max = is_max;
  if (!check_attr_names(node, kAttrs, error) || !attr_int(node, "axis", 0, &k->axis, error) ||
      !attr_int(node, "keepdims", 1, &k->keepdims, error) || !attr_int(node, "select_last_index", 0, &k->last, error))
    return nullptr;
  if (node->n_inputs != 1) {
    *error = "expects 1 input";
    return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  const int32_t t = k->dtype;
  if (!movable(t) || t == OLC_DTYPE_BOOL) {
    *error = strf("unsupported input type %s", olc_dtype_name(t));
    return nullptr;
  }
  return k.release();
}

}  // namespace

namespace scalar {
namespace {
double row_sum(const float* x, int64_t n) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 += x[i];
    a1 += x[i + 1];
    a2 += x[i + 2];
    a3 += x[i + 3];
  }
  for (; i < n; ++i) a0 += x[i];
  return (a0 + a1) + (a2 + a3);
}
template <bool kMax>
float row_extreme(const float* x, int64_t n) {
  float r = x[0];
  if (r != r) return r;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] != x[i]) return x[i];
    r = kMax ? (x[i] > r ? x[i] : r) : (x[i] < r ? x[i] : r);
  }
  return r;
}
}  // namespace
RowReduceF32 row_reduce_f32() { return {&row_sum, &row_extreme<true>, &row_extreme<false>, "scalar"}; }
}  // namespace scalar

Kernel* make_reduce_sum(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::Sum, 13, e); }
Kernel* make_reduce_mean(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::Mean, 18, e); }
Kernel* make_reduce_max(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::Max, 18, e); }
Kernel* make_reduce_min(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::Min, 18, e); }
Kernel* make_argmax(const olc_node_info* n, std::string* e) { return make_arg(n, true, e); }
Kernel* make_argmin(const olc_node_info* n, std::string* e) { return make_arg(n, false, e); }

}  // namespace olc_tn
