// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
// ReduceL2, ReduceLogSumExp, ReduceSumSquare, ArgMax, ArgMin and CumSum.
//
// Reductions: size-1 dimensions are dropped and neighbouring dimensions that
// are both reduced or both kept are merged; the input is then walked once in
// memory order, each contiguous row either folded into one accumulator (a
// reduced inner dimension) or combined element-wise into a row of
// accumulators (a kept inner dimension). When the outermost merged dimension
// is kept, its slices run in parallel (they write disjoint outputs). One
// traversal serves every reduction; what differs is the accumulator policy
// (Op<T, K> below: init, step, row fold, finish, value over an empty set).
// Accumulators: float64 for floating types (float16/bfloat16 rounded once at
// the end), wrapping 64-bit integers for integer sums, products, |x| and x*x,
// the value itself for Max/Min. ReduceL2 and ReduceLogSumExp of integers
// compute in float64 and convert back by truncation, saturating (as Cast).
// LogSumExp keeps a running maximum m and a sum s of exp(x - m), rescaled
// when m grows (a contiguous row: its maximum first, then its sum), so it
// neither overflows nor underflows where the result is finite. Max/Min (and the others) propagate NaN. Over an empty set: Sum,
// L1, L2, SumSquare 0, Prod 1, Mean NaN (integers: 0), Max the lowest value
// (-inf), Min the highest (+inf), LogSumExp -inf.
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

enum class RKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSumExp, SumSquare };

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

// A float64 result stored into T: rounded for floating types; for integers
// truncated toward zero and saturated at T's limits, NaN -> 0 (Cast's rule).
template <class T>
T store_real(double v) {
  if constexpr (Traits<T>::is_float) {
    return Traits<T>::store(v);
  } else {
    if (v != v) return T(0);
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());  // rounds up for 64-bit T
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    if (v >= hi) return std::numeric_limits<T>::max();
    if (v <= lo) return std::numeric_limits<T>::lowest();
    return static_cast<T>(v);
  }
}

// Wrapping integer arithmetic on the accumulator (no signed overflow).
template <class A>
inline A wrap_add(A a, A b) {
  return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
template <class A>
inline A wrap_mul(A a, A b) {
  return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Running log-sum-exp: m the largest value seen, s = sum of exp(x - m).
struct LSE {
  double m, s;
};

template <class T, RKind K>
struct Op {
  using Tr = Traits<T>;
  static constexpr bool kReal = K == RKind::L2 || K == RKind::LogSumExp;  // float64 even for integers
  using Acc = typename std::conditional<K == RKind::LogSumExp, LSE,
                                        typename std::conditional<kReal, double, typename Tr::Acc>::type>::type;
  using Elem = typename Tr::Acc;

  static Acc init() {
    if constexpr (K == RKind::LogSumExp) {
      return LSE{-std::numeric_limits<double>::infinity(), 0.0};
    } else if constexpr (K == RKind::Prod) {
      return Acc(1);
    } else if constexpr (K == RKind::Max) {
      if constexpr (std::is_floating_point<Acc>::value) return -std::numeric_limits<Acc>::infinity();
      else return std::numeric_limits<Acc>::lowest();
    } else if constexpr (K == RKind::Min) {
      if constexpr (std::is_floating_point<Acc>::value) return std::numeric_limits<Acc>::infinity();
      else return std::numeric_limits<Acc>::max();
    } else {
      return Acc(0);
    }
  }

  // Combines one loaded element (the accumulator's type for Sum/Max/Min).
  static Acc step_value(Acc a, Elem b) {
    if constexpr (K == RKind::Sum || K == RKind::Mean) {
      if constexpr (std::is_floating_point<Acc>::value) return a + b;
      else return wrap_add(a, b);
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

  static Acc step(Acc a, T x) {
    if constexpr (K == RKind::Sum || K == RKind::Mean || K == RKind::Max || K == RKind::Min) {
      return step_value(a, Tr::load(x));
    } else if constexpr (K == RKind::Prod) {
      if constexpr (Tr::is_float) return a * Tr::load(x);
      else return wrap_mul(a, Tr::load(x));
    } else if constexpr (K == RKind::L1) {
      if constexpr (Tr::is_float) {
        return a + std::fabs(Tr::load(x));
      } else {
        const Elem v = Tr::load(x);
        uint64_t u = static_cast<uint64_t>(v);
        if constexpr (std::is_signed<Elem>::value)
          if (v < 0) u = uint64_t{0} - u;  // |INT_MIN| wraps, as numpy's abs
        return wrap_add(a, static_cast<Acc>(u));
      }
    } else if constexpr (K == RKind::SumSquare) {
      if constexpr (Tr::is_float) {
        const double v = Tr::load(x);
        return a + v * v;
      } else {
        const Elem v = Tr::load(x);
        return wrap_add(a, wrap_mul(v, v));
      }
    } else if constexpr (K == RKind::L2) {
      const double v = static_cast<double>(Tr::load(x));
      return a + v * v;
    } else {  // LogSumExp
      const double v = static_cast<double>(Tr::load(x));
      if (v != v || a.m != a.m) return LSE{std::numeric_limits<double>::quiet_NaN(), 0.0};
      if (v <= a.m) {
        // -inf adds nothing; below an infinite maximum nothing matters.
        if (v != -std::numeric_limits<double>::infinity() && a.m != std::numeric_limits<double>::infinity())
          a.s += std::exp(v - a.m);
        return a;
      }
      if (v == std::numeric_limits<double>::infinity() || a.m == -std::numeric_limits<double>::infinity())
        return LSE{v, 1.0};
      return LSE{v, a.s * std::exp(a.m - v) + 1.0};
    }
  }

  // Folds a contiguous row of n >= 1 elements into a.
  static Acc row(Acc a, const T* x, int64_t n, const RowReduceF32& rr) {
    if constexpr (K == RKind::LogSumExp) {
      return lse_row(a, x, n, rr);
    } else if constexpr (K == RKind::Prod) {
      // Four independent products (float64, or wrapping integers).
      Acc p[4] = {a, Acc(1), Acc(1), Acc(1)};
      int64_t i = 0;
      for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; ++j) p[j] = step(p[j], x[i + j]);
      for (; i < n; ++i) p[0] = step(p[0], x[i]);
      if constexpr (Tr::is_float) return (p[0] * p[1]) * (p[2] * p[3]);
      else return wrap_mul(wrap_mul(p[0], p[1]), wrap_mul(p[2], p[3]));
    } else if constexpr (std::is_same<T, float>::value) {
      if constexpr (K == RKind::Sum || K == RKind::Mean) return step_value(a, rr.sum(x, n));
      else if constexpr (K == RKind::Max) return step_value(a, rr.max(x, n));
      else if constexpr (K == RKind::Min) return step_value(a, rr.min(x, n));
      else if constexpr (K == RKind::L1) return a + rr.sum_abs(x, n);
      else return a + rr.sum_sq(x, n);  // L2, SumSquare
    } else {
      for (int64_t i = 0; i < n; ++i) a = step(a, x[i]);
      return a;
    }
  }

  // A row in two passes: its maximum, then the sum of exp(x - max) (SIMD
  // for float32), merged into the running (m, s).
  static LSE lse_row(LSE a, const T* x, int64_t n, const RowReduceF32& rr) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    double mr;
    if constexpr (std::is_same<T, float>::value) {
      mr = rr.max(x, n);
    } else {
      mr = -kInf;
      for (int64_t i = 0; i < n; ++i) {
        const double v = static_cast<double>(Tr::load(x[i]));
        if (v != v) {
          mr = v;
          break;
        }
        mr = v > mr ? v : mr;
      }
    }
    if (mr != mr || a.m != a.m) return LSE{std::numeric_limits<double>::quiet_NaN(), 0.0};
    if (mr == kInf) return LSE{kInf, 1.0};
    if (a.m == kInf || mr == -kInf) return a;  // nothing this row adds matters
    const double m = mr > a.m ? mr : a.m;
    double s = a.m == -kInf ? 0.0 : a.s * std::exp(a.m - m);
    if constexpr (std::is_same<T, float>::value) {
      s += rr.sum_exp(x, n, m);
    } else {
      for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(Tr::load(x[i])) - m);
    }
    return LSE{m, s};
  }

  // Folds `rows` contiguous rows of n elements, ld apart, into the
  // accumulators a[0, n) (a kept inner dimension): SIMD for float32 (all
  // but Prod and LogSumExp).
  static void columns(Acc* a, const T* x, int64_t n, int64_t rows, int64_t ld, const RowReduceF32& rr) {
    if constexpr (std::is_same<T, float>::value && K != RKind::Prod && K != RKind::LogSumExp) {
      if constexpr (K == RKind::Sum || K == RKind::Mean) {
        rr.col_sum(a, x, n, rows, ld);
      } else if constexpr (K == RKind::L1) {
        rr.col_sum_abs(a, x, n, rows, ld);
      } else if constexpr (K == RKind::L2 || K == RKind::SumSquare) {
        rr.col_sum_sq(a, x, n, rows, ld);
      } else {
        for (int64_t r = 0; r < rows; ++r) (K == RKind::Max ? rr.col_max : rr.col_min)(a, x + r * ld, n);
      }
    } else {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < n; ++i) a[i] = step(a[i], x[r * ld + i]);
    }
  }

  static T finish(Acc a, int64_t count) {
    if constexpr (K == RKind::Mean) {
      if constexpr (Tr::is_float) return Tr::store(a / static_cast<double>(count));
      else return Tr::store(static_cast<Acc>(static_cast<int64_t>(a) / count));
    } else if constexpr (K == RKind::L2) {
      return store_real<T>(std::sqrt(a));
    } else if constexpr (K == RKind::LogSumExp) {
      if (a.m != a.m || std::isinf(a.m)) return store_real<T>(a.m);
      return store_real<T>(a.m + std::log(a.s));
    } else {
      return Tr::store(a);
    }
  }

  // The result over an empty set (the element type's bounds for Max/Min).
  static T empty() {
    if constexpr (K == RKind::Mean) {
      if constexpr (Tr::is_float) return Tr::store(std::numeric_limits<double>::quiet_NaN());
      else return T{};
    } else if constexpr (K == RKind::Max || K == RKind::Min) {
      if constexpr (Tr::is_float) {
        return Tr::store(init());
      } else if constexpr (std::is_same<T, Bool8>::value) {
        return Bool8{static_cast<uint8_t>(K == RKind::Min)};
      } else {
        return K == RKind::Max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
      }
    } else if constexpr (K == RKind::LogSumExp) {
      return store_real<T>(-std::numeric_limits<double>::infinity());
    } else {
      return finish(init(), 0);
    }
  }
};

struct Plan {
  RowReduceF32 rr;  // float32 rows reduced along a contiguous axis
  int m = 0;
  int64_t d[kMaxRank];
  bool red[kMaxRank];
  int64_t ostride[kMaxRank];
  int64_t out_count = 1, red_count = 1;
};

// A wide kept inner dimension (ReduceSum over axis 0, ReduceMean over the
// steps of [N, T, C]): rows fold into rows of accumulators, a run of rows of
// the reduced dimension next to the inner one at a time (kept neighbours
// merge, so that one is reduced; the column kernels sum four rows in
// registers per pass over acc). Tasks: the kept outermost slices, and where
// they are fewer than the threads, ranges of 64-column blocks as well; every
// column folds its rows in the same order however the work is split.
constexpr int64_t kColumnBlock = 64;

template <class T, RKind K>
void reduce_columns(olc_context* ctx, const Plan& p, const T* x, T* y) {
  using O = Op<T, K>;
  using Acc = typename O::Acc;
  const int m = p.m;
  const int64_t inner = p.d[m - 1], run = p.d[m - 2];
  const int first = p.red[0] ? 0 : 1;  // a kept outermost dimension: its slices are tasks
  const int64_t slices = first ? p.d[0] : 1;
  int64_t rows = 1;
  for (int k = 0; k < m - 1; ++k) rows *= p.d[k];
  const int64_t slice_rows = rows / slices, slice_out = p.out_count / slices;
  const int64_t kept_rows = slice_out / inner;  // output rows per slice
  const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  const int64_t threads = ctx ? std::max<int64_t>(1, g_api->concurrency(ctx)) : 1;
  const int64_t ranges = std::min(blocks, (threads + slices - 1) / slices);
  const int64_t per = (blocks + ranges - 1) / ranges * kColumnBlock;  // columns per range
  par_for(ctx, slices * ranges, 1, rows * inner * static_cast<int64_t>(sizeof(T)), parallel_min_bytes("Reduce"),
          [&](int64_t b, int64_t e) {
            std::vector<Acc> acc;
            for (int64_t t = b; t < e; ++t) {
              const int64_t s = t / ranges, c0 = t % ranges * per, c1 = std::min(inner, c0 + per), w = c1 - c0;
              if (w <= 0) continue;
              acc.assign(static_cast<size_t>(kept_rows * w), O::init());
              const T* xs = x + s * slice_rows * inner + c0;
              int64_t idx[kMaxRank] = {};
              int64_t o = 0;  // the run's first output in the slice (a multiple of inner)
              for (int64_t r = 0; r < slice_rows; r += run) {
                O::columns(acc.data() + o / inner * w, xs + r * inner, w, run, inner, p.rr);
                for (int k = m - 3; k >= first; --k) {
                  o += p.ostride[k];
                  if (++idx[k] < p.d[k]) break;
                  o -= p.ostride[k] * p.d[k];
                  idx[k] = 0;
                }
              }
              T* ys = y + s * slice_out + c0;
              for (int64_t k = 0; k < kept_rows; ++k)
                for (int64_t i = 0; i < w; ++i) ys[k * inner + i] = O::finish(acc[k * w + i], p.red_count);
            }
          });
}

template <class T, RKind K>
void reduce_typed(olc_context* ctx, const Plan& p, const T* x, T* y) {
  using O = Op<T, K>;
  using Acc = typename O::Acc;
  if (p.red_count == 0) {
    const T v = O::empty();
    for (int64_t i = 0; i < p.out_count; ++i) y[i] = v;
    return;
  }
  const int m = p.m;
  const int64_t inner = p.d[m - 1];
  const bool inner_red = p.red[m - 1];
  // Parallel over the outermost dimension when it is kept.
  const bool split = m > 1 && !p.red[0] && p.d[0] > 1;
  if (!inner_red && m > 1 && inner >= 2 * kColumnBlock) {
    reduce_columns<T, K>(ctx, p, x, y);
    return;
  }
  const int64_t n0 = split ? p.d[0] : 1;
  const int64_t in_block = [&] {
    int64_t s = 1;
    for (int k = split ? 1 : 0; k < m; ++k) s *= p.d[k];
    return s;
  }();
  const int64_t out_block = split ? p.ostride[0] : p.out_count;
  const int64_t bytes = n0 * in_block * static_cast<int64_t>(sizeof(T));
  if (split && m == 2 && inner_red) {
    // Rows reduced whole, one output each (ReduceMax over the planes of
    // NCHW, ReduceMean over the last axis) go straight to the row kernel,
    // without the general walk's per-slice accumulator refill, odometer and
    // finish loop: ReduceMax over the 196-float planes of [8, 256, 14, 14]
    // 36 -> 27.5 us on one thread (Zen 4).
    par_for(ctx, n0, 1, bytes, parallel_min_bytes("Reduce"), [&](int64_t b, int64_t e) {
      for (int64_t s0 = b; s0 < e; ++s0) y[s0] = O::finish(O::row(O::init(), x + s0 * inner, inner, p.rr), p.red_count);
    });
    return;
  }
  const int64_t rows = in_block / inner;
  par_for(ctx, n0, 1, bytes, parallel_min_bytes("Reduce"),
          [&](int64_t b, int64_t e) {
            std::vector<Acc> acc(static_cast<size_t>(out_block));
            const int first = split ? 1 : 0;
            for (int64_t s0 = b; s0 < e; ++s0) {
              std::fill(acc.begin(), acc.end(), O::init());
              const T* xs = x + s0 * in_block;
              int64_t idx[kMaxRank];
              for (int k = 0; k < m; ++k) idx[k] = 0;
              int64_t o = 0;
              for (int64_t r = 0; r < rows; ++r) {
                const T* row = xs + r * inner;
                if (inner_red) {
                  acc[o] = O::row(acc[o], row, inner, p.rr);
                } else {
                  O::columns(acc.data() + o, row, inner, 1, inner, p.rr);
                }
                for (int k = m - 2; k >= first; --k) {
                  o += p.ostride[k];
                  if (++idx[k] < p.d[k]) break;
                  o -= p.ostride[k] * p.d[k];
                  idx[k] = 0;
                }
              }
              T* ys = y + s0 * out_block;
              for (int64_t i = 0; i < out_block; ++i) ys[i] = O::finish(acc[i], p.red_count);
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
    case OLC_DTYPE_INT32: reduce_typed<int32_t, K>(ctx, p, static_cast<const int32_t*>(x), static_cast<int32_t*>(y)); break;
    case OLC_DTYPE_INT64: reduce_typed<int64_t, K>(ctx, p, static_cast<const int64_t*>(x), static_cast<int64_t*>(y)); break;
    case OLC_DTYPE_UINT32: reduce_typed<uint32_t, K>(ctx, p, static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y)); break;
    case OLC_DTYPE_UINT64: reduce_typed<uint64_t, K>(ctx, p, static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y)); break;
    default:
      if constexpr (K == RKind::Max || K == RKind::Min) {
        switch (dtype) {
          case OLC_DTYPE_INT8: reduce_typed<int8_t, K>(ctx, p, static_cast<const int8_t*>(x), static_cast<int8_t*>(y)); break;
          case OLC_DTYPE_UINT8: reduce_typed<uint8_t, K>(ctx, p, static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y)); break;
          case OLC_DTYPE_BOOL: reduce_typed<Bool8, K>(ctx, p, static_cast<const Bool8*>(x), static_cast<Bool8*>(y)); break;
          default: break;
        }
      }
      break;
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

// Whether reducing over no axis is the identity (noop_with_empty_axes then
// copies); for L1, L2, SumSquare and LogSumExp it still maps each element
// (|x|, |x|, x*x, x), so those run the reduction with nothing reduced.
bool identity_when_nothing_reduced(RKind k) {
  return k == RKind::Sum || k == RKind::Mean || k == RKind::Max || k == RKind::Min || k == RKind::Prod;
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
        if (identity_when_nothing_reduced(kind)) {
          void* y = g_api->allocate_output(ctx, 0, x.dtype, rank, x.shape);
          if (!y && total > 0) return OLC_ERROR;
          if (total) parallel_copy(ctx, y, x.data, total * static_cast<int64_t>(olc_dtype_size(x.dtype)), 256 << 10);
          return OLC_OK;
        }
        // else: red[] stays all false, each element reduced on its own
      } else {
        for (int k = 0; k < rank; ++k) red[k] = true;
      }
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
      case RKind::Prod: reduce_dispatch<RKind::Prod>(ctx, dtype, p, x.data, y); break;
      case RKind::L1: reduce_dispatch<RKind::L1>(ctx, dtype, p, x.data, y); break;
      case RKind::L2: reduce_dispatch<RKind::L2>(ctx, dtype, p, x.data, y); break;
      case RKind::LogSumExp: reduce_dispatch<RKind::LogSumExp>(ctx, dtype, p, x.data, y); break;
      case RKind::SumSquare: reduce_dispatch<RKind::SumSquare>(ctx, dtype, p, x.data, y); break;
    }
    return OLC_OK;
  }
};

RowReduceF32 pick_row_reduce() {
  const int32_t level = g_api->simd_level();
  return level >= OLC_SIMD_AVX512 ? avx512::row_reduce_f32()
         : level >= OLC_SIMD_AVX2 ? avx2::row_reduce_f32()
                                  : scalar::row_reduce_f32();
}

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
  k->rr = pick_row_reduce();
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


// ------------------------------------------------------------------ CumSum

// Running sums along one axis, viewed as [outer, n, inner]: float64
// accumulators for floating types (each output rounded once from the exact
// running float64 sum), wrapping 64-bit integers otherwise. Work splits into
// (outer slice, block of the inner dimension) tasks.
template <class T>
void cumsum_typed(olc_context* ctx, const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                  bool reverse) {
  using Tr = Traits<T>;
  using Acc = typename Tr::Acc;
  auto add = [](Acc a, Acc b) -> Acc {
    if constexpr (Tr::is_float) return a + b;
    else return wrap_add(a, b);
  };
  if (inner == 1) {  // one contiguous row per outer index
    par_for(ctx, outer, 1, outer * n * static_cast<int64_t>(sizeof(T)) * 2, parallel_min_bytes("CumSum"),
            [&](int64_t b, int64_t e) {
              for (int64_t o = b; o < e; ++o) {
                const T* xr = x + o * n;
                T* yr = y + o * n;
                Acc acc = Acc(0);
                for (int64_t jj = 0; jj < n; ++jj) {
                  const int64_t j = reverse ? n - 1 - jj : jj;
                  const Acc before = acc;
                  acc = add(acc, Tr::load(xr[j]));
                  yr[j] = Tr::store(exclusive ? before : acc);
                }
              }
            });
    return;
  }
  constexpr int64_t kBlock = 1024;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  par_for(ctx, outer * blocks, 1, outer * n * inner * static_cast<int64_t>(sizeof(T)) * 2,
          parallel_min_bytes("CumSum"), [&](int64_t b, int64_t e) {
            Acc acc[kBlock];
            for (int64_t t = b; t < e; ++t) {
              const int64_t o = t / blocks, i0 = (t - o * blocks) * kBlock;
              const int64_t w = std::min(kBlock, inner - i0);
              for (int64_t i = 0; i < w; ++i) acc[i] = Acc(0);
              for (int64_t jj = 0; jj < n; ++jj) {
                const int64_t j = reverse ? n - 1 - jj : jj;
                const int64_t off = (o * n + j) * inner + i0;
                const T* xr = x + off;
                T* yr = y + off;
                if (exclusive) {
                  for (int64_t i = 0; i < w; ++i) {
                    yr[i] = Tr::store(acc[i]);
                    acc[i] = add(acc[i], Tr::load(xr[i]));
                  }
                } else {
                  for (int64_t i = 0; i < w; ++i) {
                    acc[i] = add(acc[i], Tr::load(xr[i]));
                    yr[i] = Tr::store(acc[i]);
                  }
                }
              }
            }
          });
}

class CumSum final : public Kernel {
 public:
  int32_t dtype;
  int64_t exclusive = 0, reverse = 0;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 2 || n_out != 1) return fail(ctx, "expects 2 inputs and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    const int64_t total = checked_count(x);
    if (total < 0) return fail(ctx, "input 0 has a negative dimension, too many elements or no data");
    const olc_tensor& at = in[1];
    if (at.dtype != OLC_DTYPE_INT32 && at.dtype != OLC_DTYPE_INT64)
      return fail(ctx, "input 'axis' must be int32 or int64, got %s", olc_dtype_name(at.dtype));
    if (at.ndim > 1 || checked_count(at) != 1)
      return fail(ctx, "input 'axis' must be a scalar (one element), got shape %s", shape_str(at.shape, at.ndim).c_str());
    const int64_t axis = at.dtype == OLC_DTYPE_INT64 ? *static_cast<const int64_t*>(at.data)
                                                     : *static_cast<const int32_t*>(at.data);
    const int rank = x.ndim;
    if (axis < -rank || axis >= rank)
      return fail(ctx, "axis %lld is out of range for an input of rank %d", (long long)axis, rank);
    const int ax = static_cast<int>(axis < 0 ? axis + rank : axis);
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < ax; ++k) outer *= x.shape[k];
    for (int k = ax + 1; k < rank; ++k) inner *= x.shape[k];
    const int64_t n = x.shape[ax];
    void* y = g_api->allocate_output(ctx, 0, x.dtype, rank, x.shape);
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const bool ex = exclusive != 0, rev = reverse != 0;
    switch (dtype) {
      case OLC_DTYPE_FLOAT: cumsum_typed(ctx, static_cast<const float*>(x.data), static_cast<float*>(y), outer, n, inner, ex, rev); break;
      case OLC_DTYPE_DOUBLE: cumsum_typed(ctx, static_cast<const double*>(x.data), static_cast<double*>(y), outer, n, inner, ex, rev); break;
      case OLC_DTYPE_FLOAT16: cumsum_typed(ctx, static_cast<const F16*>(x.data), static_cast<F16*>(y), outer, n, inner, ex, rev); break;
      case OLC_DTYPE_BFLOAT16: cumsum_typed(ctx, static_cast<const BF16*>(x.data), static_cast<BF16*>(y), outer, n, inner, ex, rev); break;
      case OLC_DTYPE_INT32: cumsum_typed(ctx, static_cast<const int32_t*>(x.data), static_cast<int32_t*>(y), outer, n, inner, ex, rev); break;
      case OLC_DTYPE_INT64: cumsum_typed(ctx, static_cast<const int64_t*>(x.data), static_cast<int64_t*>(y), outer, n, inner, ex, rev); break;
      case OLC_DTYPE_UINT32: cumsum_typed(ctx, static_cast<const uint32_t*>(x.data), static_cast<uint32_t*>(y), outer, n, inner, ex, rev); break;
      case OLC_DTYPE_UINT64: cumsum_typed(ctx, static_cast<const uint64_t*>(x.data), static_cast<uint64_t*>(y), outer, n, inner, ex, rev); break;
      default: return fail(ctx, "unsupported input type %s", olc_dtype_name(dtype));
    }
    return OLC_OK;
  }
};

Kernel* make_cumsum_kernel(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"exclusive", "reverse", nullptr};
  auto k = std::make_unique<CumSum>();
  if (!check_attr_names(node, kAttrs, error) || !attr_int(node, "exclusive", 0, &k->exclusive, error) ||
      !attr_int(node, "reverse", 0, &k->reverse, error))
    return nullptr;
  if (node->n_inputs != 2) {
    *error = strf("expects 2 inputs, got %d", node->n_inputs);
    return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  if (!reducible(k->dtype, RKind::Sum)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  return k.release();
}

}  // namespace

namespace scalar {
namespace {
// Sums of f(x) in float64, f = identity, |x| or x * x (exact in float64).
template <int F>
inline double term(float x) {
  const double v = x;
  if constexpr (F == 1) return std::fabs(v);
  else if constexpr (F == 2) return v * v;
  else return v;
}
template <int F>
double row_sum(const float* x, int64_t n) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 += term<F>(x[i]);
    a1 += term<F>(x[i + 1]);
    a2 += term<F>(x[i + 2]);
    a3 += term<F>(x[i + 3]);
  }
  for (; i < n; ++i) a0 += term<F>(x[i]);
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
double row_sum_exp(const float* x, int64_t n, double m) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - m);
  return s;
}
template <int F>
void col_sum(double* acc, const float* x, int64_t n, int64_t rows, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) acc[i] += term<F>(x[r * ld + i]);
}
template <bool kMax>
void col_extreme(double* acc, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i], a = acc[i];
    acc[i] = (v != v || a != a) ? std::numeric_limits<double>::quiet_NaN() : kMax ? (v > a ? v : a) : (v < a ? v : a);
  }
}
}  // namespace
RowReduceF32 row_reduce_f32() {
  return {&row_sum<0>,  &row_extreme<true>, &row_extreme<false>, &row_sum<1>,         &row_sum<2>,          &row_sum_exp,
          &col_sum<0>,  &col_sum<1>,        &col_sum<2>,         &col_extreme<true>,  &col_extreme<false>,  "scalar"};
}
}  // namespace scalar

Kernel* make_reduce_sum(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::Sum, 13, e); }
Kernel* make_reduce_mean(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::Mean, 18, e); }
Kernel* make_reduce_max(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::Max, 18, e); }
Kernel* make_reduce_min(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::Min, 18, e); }
Kernel* make_reduce_prod(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::Prod, 18, e); }
Kernel* make_reduce_l1(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::L1, 18, e); }
Kernel* make_reduce_l2(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::L2, 18, e); }
Kernel* make_reduce_log_sum_exp(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::LogSumExp, 18, e); }
Kernel* make_reduce_sum_square(const olc_node_info* n, std::string* e) { return make_reduce(n, RKind::SumSquare, 18, e); }
Kernel* make_cumsum(const olc_node_info* n, std::string* e) { return make_cumsum_kernel(n, e); }
Kernel* make_argmax(const olc_node_info* n, std::string* e) { return make_arg(n, true, e); }
Kernel* make_argmin(const olc_node_info* n, std::string* e) { return make_arg(n, false, e); }

}  // namespace olc_tn
