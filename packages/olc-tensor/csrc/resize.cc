// Resize (opsets 10, 11-12, 13-17, 18, 19+) and Upsample (7-9).
//
// The adapter resolves the output shape (scales or sizes, `axes`,
// keep_aspect_ratio_policy) and builds one table per axis: for each output
// position its source coordinate under the coordinate transformation mode
// and then the taps (source index, weight) of the mode: one for nearest,
// two for linear, four for cubic, more under antialias (the filter
// stretched by 1/scale when downscaling). Tables are cached per shape
// signature (input shape, scales/sizes, roi) in the kernel.
//
// nearest: one gather pass over the output rows in the element's bytes
// (every type; repeated source rows are copied from the row before).
// linear/cubic: one pass per resized axis, the innermost first (gathers of
// the taps), then each outer axis as weighted sums of whole contiguous
// blocks; float32 (and float16/bfloat16 widened to float32) on the ISA
// passes of resize_kernels.h, float64 and the integer types in float64
// (integers round half to even and saturate, as onnx.reference does).
// float32 resizing only the last two axes (an NCHW image) takes one fused
// pass per output row instead (planar_f32: no whole-tensor intermediate,
// each task's W-resampled rows stay in L1), with the same operations in the
// same order; the W taps of 16 outputs that read at most 32 consecutive
// sources are precomputed as offsets for permutes (AVX-512) instead of
// gathers.
// tf_crop_and_resize writes extrapolation_value wherever a coordinate falls
// outside [0, size - 1].
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>

#include "common.h"
#include "fp_convert.h"
#include "registry.h"
#include "resize_kernels.h"

namespace olc_tn {
namespace {

enum class RMode { Nearest, Linear, Cubic };
enum class Coord { HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNN, TfCrop };
enum class NMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };
enum class Aspect { Stretch, NotLarger, NotSmaller };

struct AxisTab {
  int64_t in = 0, out = 0;
  bool identity = true;
  int32_t k = 1;
  std::vector<int32_t> idx;  // out * k
  std::vector<float> w;      // out * k
  std::vector<double> wd;    // out * k
  std::vector<uint8_t> extrap;
  bool any_extrap = false;
  // The float32 taps again in blocks of 16 outputs (ResizeF32::taps_blocks),
  // when every whole block reads at most 32 consecutive sources: first
  // source and count per block, offsets and weights [block][tap][16].
  std::vector<int32_t> blo, bcnt, brel;
  std::vector<float> bw;
};

struct Plan {
  int rank = 0;
  std::vector<int64_t> oshape;
  std::vector<AxisTab> ax;
  bool any_extrap = false;
};

double cubic_w(double t, double a) {
  t = std::fabs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0;
}

ResizeF32 pick_resize() {
  const int32_t level = g_api->simd_level();
  return level >= OLC_SIMD_AVX512 ? avx512::resize_f32()
         : level >= OLC_SIMD_AVX2 ? avx2::resize_f32()
                                  : scalar::resize_f32();
}

// ---- conversions between T and the compute type
template <class T, class F>
inline F load_v(const T* p, int64_t i, int32_t dtype) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (dtype == OLC_DTYPE_BFLOAT16) return static_cast<F>(bf16_to_f32(p[i]));
    if (dtype == OLC_DTYPE_FLOAT16) return static_cast<F>(f16_to_f32(p[i]));
  }
  return static_cast<F>(p[i]);
}

template <class T, class F>
inline T store_v(F v, int32_t dtype) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (dtype == OLC_DTYPE_BFLOAT16) return f32_to_bf16(static_cast<float>(v));
    if (dtype == OLC_DTYPE_FLOAT16) return f32_to_f16(static_cast<float>(v));
  }
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T(0);
    const double r = std::nearbyint(static_cast<double>(v));
    if (r <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (r >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(r);
  } else {
    return static_cast<T>(v);
  }
}

bool is_float_like(int32_t dt) {
  return dt == OLC_DTYPE_FLOAT || dt == OLC_DTYPE_FLOAT16 || dt == OLC_DTYPE_BFLOAT16;
}

class Resize final : public Kernel {
 public:
  int32_t dtype = 0;
  int64_t opset = 0;
  bool upsample = false;
  RMode mode = RMode::Nearest;
  Coord coord = Coord::HalfPixel;
  NMode nmode = NMode::RoundPreferFloor;
  Aspect aspect = Aspect::Stretch;
  double cubic_a = -0.75, extrap_value = 0.0;
  bool exclude_outside = false, antialias = false;
  std::vector<int64_t> axes_attr;
  bool has_axes = false;
  std::vector<double> attr_scales;  // Upsample-7
  ResizeF32 isa{};

  mutable std::mutex mu;
  mutable std::vector<std::pair<std::vector<int64_t>, std::shared_ptr<const Plan>>> cache;

  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_out != 1 || n_in < 1) return fail(ctx, "unexpected number of inputs (%d) or outputs (%d)", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input X has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    if (checked_count(x) < 0) return fail(ctx, "input X has a negative dimension, too many elements or no data");
    const int rank = x.ndim;
    if (rank < 1) return fail(ctx, "input X must have rank 1 or more");
    std::string err;
    std::vector<double> scales, roi;
    std::vector<int64_t> sizes;
    bool have_scales = false, have_sizes = false;
    const auto present = [&](int i) { return n_in > i && in[i].dtype != OLC_DTYPE_UNDEFINED; };
    if (upsample && opset < 9) {
      scales = attr_scales;
      have_scales = true;
    } else if (opset < 11) {
      if (!present(1)) return fail(ctx, "input 'scales' is required");
      if (!read_floats(in[1], "input 'scales'", &scales, &err)) return fail(ctx, "%s", err.c_str());
      have_scales = true;
    } else {
      if (present(1) && !read_floats(in[1], "input 'roi'", &roi, &err)) return fail(ctx, "%s", err.c_str());
      if (present(2)) {
        if (!read_floats(in[2], "input 'scales'", &scales, &err)) return fail(ctx, "%s", err.c_str());
        have_scales = !scales.empty();
      }
      if (present(3)) {
        if (in[3].dtype != OLC_DTYPE_INT64) return fail(ctx, "input 'sizes' must be int64, got %s", olc_dtype_name(in[3].dtype));
        if (!read_int_tensor(in[3], "input 'sizes'", &sizes, &err)) return fail(ctx, "%s", err.c_str());
        have_sizes = !sizes.empty();
      }
      if (have_scales && have_sizes) return fail(ctx, "both 'scales' and 'sizes' are given; exactly one may be");
      if (!have_scales && !have_sizes) return fail(ctx, "one of 'scales' and 'sizes' must be given (non-empty)");
    }
    // The axes the scales / sizes / roi values refer to.
    std::vector<int> axes;
    if (has_axes) {
      std::vector<bool> seen(rank, false);
      for (int64_t a : axes_attr) {
        if (a < -rank || a >= rank) return fail(ctx, "axis %lld is out of range for an input of rank %d", (long long)a, rank);
        if (a < 0) a += rank;
        if (seen[a]) return fail(ctx, "axis %lld is repeated in 'axes'", (long long)a);
        seen[a] = true;
        axes.push_back(static_cast<int>(a));
      }
    } else {
      for (int a = 0; a < rank; ++a) axes.push_back(a);
    }
    const size_t na = axes.size();
    if (have_scales && scales.size() != na)
      return fail(ctx, "'scales' has %zu values, expected %zu (%s)", scales.size(), na, has_axes ? "one per axis in 'axes'" : "the input rank");
    if (have_sizes && sizes.size() != na)
      return fail(ctx, "'sizes' has %zu values, expected %zu (%s)", sizes.size(), na, has_axes ? "one per axis in 'axes'" : "the input rank");
    std::vector<double> sc(rank, 1.0), r0(rank, 0.0), r1(rank, 1.0);
    std::vector<int64_t> out(x.shape, x.shape + rank);
    if (coord == Coord::TfCrop) {
      if (roi.size() != 2 * na)
        return fail(ctx, "tf_crop_and_resize needs 'roi' with %zu values (starts and ends), it has %zu", 2 * na, roi.size());
      for (size_t i = 0; i < na; ++i) {
        r0[axes[i]] = roi[i];
        r1[axes[i]] = roi[na + i];
      }
    }
    if (have_scales) {
      for (size_t i = 0; i < na; ++i) {
        const double s = scales[i];
        if (!(s > 0) || !std::isfinite(s)) return fail(ctx, "scales[%zu] = %g must be positive", i, s);
        sc[axes[i]] = s;
        out[axes[i]] = static_cast<int64_t>(std::floor(s * static_cast<double>(x.shape[axes[i]])));
      }
    } else {
      for (size_t i = 0; i < na; ++i) {
        if (sizes[i] < 0) return fail(ctx, "sizes[%zu] = %lld must not be negative", i, (long long)sizes[i]);
        if (x.shape[axes[i]] == 0 && sizes[i] != 0)
          return fail(ctx, "axis %d has size 0 and cannot be resized to %lld", axes[i], (long long)sizes[i]);
      }
      if (aspect == Aspect::Stretch) {
        for (size_t i = 0; i < na; ++i) {
          const int a = axes[i];
          out[a] = sizes[i];
          sc[a] = x.shape[a] ? static_cast<double>(sizes[i]) / static_cast<double>(x.shape[a]) : 1.0;
        }
      } else {
        double s = aspect == Aspect::NotLarger ? std::numeric_limits<double>::infinity() : 0.0;
        for (size_t i = 0; i < na; ++i) {
          const int a = axes[i];
          if (!x.shape[a]) continue;
          const double v = static_cast<double>(sizes[i]) / static_cast<double>(x.shape[a]);
          s = aspect == Aspect::NotLarger ? std::min(s, v) : std::max(s, v);
        }
        if (!std::isfinite(s) || s <= 0) s = 1.0;
        for (size_t i = 0; i < na; ++i) {
          const int a = axes[i];
          sc[a] = s;
          out[a] = static_cast<int64_t>(s * static_cast<double>(x.shape[a]) + 0.5);
        }
      }
    }
    // The cached plan of this signature.
    std::vector<int64_t> key(x.shape, x.shape + rank);
    for (int a = 0; a < rank; ++a) {
      key.push_back(out[a]);
      int64_t b[3];
      std::memcpy(&b[0], &sc[a], 8);
      std::memcpy(&b[1], &r0[a], 8);
      std::memcpy(&b[2], &r1[a], 8);
      key.insert(key.end(), b, b + 3);
    }
    std::shared_ptr<const Plan> plan;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& [k, p] : cache)
        if (k == key) plan = p;
    }
    if (!plan) {
      auto p = std::make_shared<Plan>();
      p->rank = rank;
      p->oshape = out;
      p->ax.resize(rank);
      for (int a = 0; a < rank; ++a) {
        build_axis(x.shape[a], out[a], sc[a], r0[a], r1[a], &p->ax[a]);
        p->any_extrap = p->any_extrap || p->ax[a].any_extrap;
      }
      plan = p;
      std::lock_guard<std::mutex> lock(mu);
      if (cache.size() >= 16) cache.erase(cache.begin());
      cache.emplace_back(key, plan);
    }
    void* y = g_api->allocate_output(ctx, 0, dtype, rank, out.data());
    int64_t total = 1;
    for (int a = 0; a < rank; ++a) total *= out[a];
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const bool f32 = is_float_like(dtype);
    g_api->record_usage_detail(ctx, mode == RMode::Nearest ? "nearest" : f32 ? isa.isa : "float64");
    if (mode == RMode::Nearest) {
      switch (olc_dtype_size(dtype)) {
        case 1: nearest<uint8_t>(ctx, *plan, x, y); break;
        case 2: nearest<uint16_t>(ctx, *plan, x, y); break;
        case 4: nearest<uint32_t>(ctx, *plan, x, y); break;
        default: nearest<uint64_t>(ctx, *plan, x, y); break;
      }
      return OLC_OK;
    }
    switch (dtype) {
      case OLC_DTYPE_FLOAT: return interp<float, float>(ctx, *plan, x, y);
      case OLC_DTYPE_FLOAT16: case OLC_DTYPE_BFLOAT16: return interp<uint16_t, float>(ctx, *plan, x, y);
      case OLC_DTYPE_DOUBLE: return interp<double, double>(ctx, *plan, x, y);
      case OLC_DTYPE_INT8: return interp<int8_t, double>(ctx, *plan, x, y);
      case OLC_DTYPE_UINT8: case OLC_DTYPE_BOOL: return interp<uint8_t, double>(ctx, *plan, x, y);
      case OLC_DTYPE_INT16: return interp<int16_t, double>(ctx, *plan, x, y);
      case OLC_DTYPE_UINT16: return interp<uint16_t, double>(ctx, *plan, x, y);
      case OLC_DTYPE_INT32: return interp<int32_t, double>(ctx, *plan, x, y);
      case OLC_DTYPE_UINT32: return interp<uint32_t, double>(ctx, *plan, x, y);
      case OLC_DTYPE_INT64: return interp<int64_t, double>(ctx, *plan, x, y);
      case OLC_DTYPE_UINT64: return interp<uint64_t, double>(ctx, *plan, x, y);
      default: return fail(ctx, "type %s cannot be interpolated", olc_dtype_name(dtype));
    }
  }

  static bool read_floats(const olc_tensor& t, const char* what, std::vector<double>* out, std::string* err) {
    out->clear();
    const int64_t n = checked_count(t);
    if (n < 0 || t.ndim > 1) {
      *err = strf("%s must be a 1-D tensor", what);
      return false;
    }
    for (int64_t i = 0; i < n; ++i) {
      switch (t.dtype) {
        case OLC_DTYPE_FLOAT: out->push_back(static_cast<const float*>(t.data)[i]); break;
        case OLC_DTYPE_DOUBLE: out->push_back(static_cast<const double*>(t.data)[i]); break;
        case OLC_DTYPE_FLOAT16: out->push_back(f16_to_f32(static_cast<const uint16_t*>(t.data)[i])); break;
        default:
          *err = strf("%s must be float32, float64 or float16, got %s", what, olc_dtype_name(t.dtype));
          return false;
      }
    }
    return true;
  }

  // The source coordinate of output position o on one axis. As the
  // schema's reference code does, align_corners, pytorch_half_pixel and
  // tf_crop_and_resize take the output length before flooring (scale *
  // length, `output_width`): the node suite's expected outputs are made so.
  // onnxruntime takes the integer length there; the two agree whenever
  // scale * length is an integer (always with sizes under stretch).
  double source_coord(int64_t o, int64_t in, int64_t out, double scale, double r0, double r1) const {
    const double xo = static_cast<double>(o);
    const double len = scale * static_cast<double>(in);
    switch (coord) {
      case Coord::HalfPixel: return (xo + 0.5) / scale - 0.5;
      case Coord::HalfPixelSymmetric: {
        const double adjustment = static_cast<double>(out) / len;
        const double center = static_cast<double>(in) / 2;
        return center * (1 - adjustment) + (xo + 0.5) / scale - 0.5;
      }
      case Coord::PytorchHalfPixel: return len == 1 ? -0.5 : (xo + 0.5) / scale - 0.5;
      case Coord::AlignCorners: return len == 1 ? 0.0 : xo * static_cast<double>(in - 1) / (len - 1);
      case Coord::Asymmetric: return xo / scale;
      case Coord::TfHalfPixelForNN: return (xo + 0.5) / scale;
      case Coord::TfCrop: {
        const double span = static_cast<double>(in - 1);
        if (len == 1) return (r1 - r0) * span / 2 + r0 * span;
        return r0 * span + xo * (r1 - r0) * span / (len - 1);
      }
    }
    return xo;
  }

  void build_axis(int64_t in, int64_t out, double scale, double r0, double r1, AxisTab* t) const {
    t->in = in;
    t->out = out;
    t->extrap.assign(static_cast<size_t>(out), 0);
    if (out == in && scale == 1.0 && (coord != Coord::TfCrop || (r0 == 0.0 && r1 == 1.0))) {
      // An axis the node does not resize stays as it is under every mode
      // (as onnxruntime and onnx.reference treat it; tf_half_pixel_for_nn
      // would otherwise shift it by half a pixel).
      t->identity = true;
      t->k = 1;
      t->idx.resize(static_cast<size_t>(out));
      t->w.assign(static_cast<size_t>(out), 1.0f);
      t->wd.assign(static_cast<size_t>(out), 1.0);
      for (int64_t o = 0; o < out; ++o) t->idx[o] = static_cast<int32_t>(o);
      return;
    }
    std::vector<double> xs(static_cast<size_t>(out));
    bool identity = out == in;
    for (int64_t o = 0; o < out; ++o) {
      const double xv = source_coord(o, in, out, scale, r0, r1);
      xs[o] = xv;
      if (coord == Coord::TfCrop && (xv < 0 || xv > static_cast<double>(in - 1))) {
        t->extrap[o] = 1;
        t->any_extrap = true;
      }
      if (xv != static_cast<double>(o)) identity = false;
    }
    t->identity = identity && !t->any_extrap;
    if (in == 0) return;
    if (mode == RMode::Nearest) {
      t->k = 1;
      t->idx.resize(static_cast<size_t>(out));
      for (int64_t o = 0; o < out; ++o) {
        const double xv = xs[o];
        const double fl = std::floor(xv);
        const double fr = xv - fl;
        double i;
        if (nmode == NMode::Simple) i = scale < 1 ? std::ceil(xv) : fl;
        else if (fr == 0) i = fl;
        else if (nmode == NMode::RoundPreferFloor) i = fr <= 0.5 ? fl : fl + 1;
        else if (nmode == NMode::RoundPreferCeil) i = fr < 0.5 ? fl : fl + 1;
        else if (nmode == NMode::Floor) i = fl;
        else i = fl + 1;
        t->idx[o] = static_cast<int32_t>(std::min<double>(std::max<double>(i, 0), static_cast<double>(in - 1)));
      }
      return;
    }
    const bool aa = antialias && scale < 1;
    const double s = aa ? scale : 1.0;
    const int64_t start = mode == RMode::Linear ? (aa ? static_cast<int64_t>(std::floor(-1 / s)) + 1 : 0)
                                                : (aa ? static_cast<int64_t>(std::floor(-2 / s)) + 1 : -1);
    const int64_t n = 2 - 2 * start;
    t->k = static_cast<int32_t>(n);
    t->idx.resize(static_cast<size_t>(out * n));
    t->w.resize(static_cast<size_t>(out * n));
    t->wd.resize(static_cast<size_t>(out * n));
    std::vector<double> wv(static_cast<size_t>(n));
    for (int64_t o = 0; o < out; ++o) {
      const double xv = xs[o];
      double base = std::floor(xv);
      if (base == xv) base -= 1;  // an exact coordinate takes the pair on its left (weight 1 on itself)
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double j = base + static_cast<double>(start + i);
        const double tt = (j - xv) * s;
        double wt = mode == RMode::Linear ? std::max(0.0, 1 - std::fabs(tt)) : cubic_w(tt, cubic_a);
        if (exclude_outside && (j < 0 || j > static_cast<double>(in - 1))) wt = 0;
        wv[i] = wt;
        sum += wt;
      }
      const bool norm = aa || exclude_outside;
      for (int64_t i = 0; i < n; ++i) {
        double wt = wv[i];
        if (norm && sum != 0) wt /= sum;
        const double j = base + static_cast<double>(start + i);
        const int64_t ji = static_cast<int64_t>(std::min(std::max(j, 0.0), static_cast<double>(in - 1)));
        t->idx[o * n + i] = static_cast<int32_t>(ji);
        t->wd[o * n + i] = wt;
        t->w[o * n + i] = static_cast<float>(wt);
      }
    }
    block_taps(t);
  }

  static void block_taps(AxisTab* t) {
    const int64_t nb = t->out / 16, k = t->k;
    std::vector<int32_t> lo(static_cast<size_t>(nb)), cnt(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) {
      const auto first = t->idx.begin() + b * 16 * k, last = first + 16 * k;
      lo[b] = *std::min_element(first, last);
      cnt[b] = *std::max_element(first, last) - lo[b] + 1;
      if (cnt[b] > 32) return;
    }
    t->blo = std::move(lo);
    t->bcnt = std::move(cnt);
    t->brel.resize(static_cast<size_t>(nb * k * 16));
    t->bw.resize(static_cast<size_t>(nb * k * 16));
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t q = 0; q < k; ++q)
        for (int64_t j = 0; j < 16; ++j) {
          const int64_t o = b * 16 + j;
          t->brel[(b * k + q) * 16 + j] = t->idx[o * k + q] - t->blo[b];
          t->bw[(b * k + q) * 16 + j] = t->w[o * k + q];
        }
  }

  // One row of the innermost axis: the blocks of 16, then the rest.
  void inner_row(float* dst, const float* src, const AxisTab& t) const {
    const int64_t nb = static_cast<int64_t>(t.blo.size());
    if (nb) isa.taps_blocks(dst, src, t.blo.data(), t.bcnt.data(), t.brel.data(), t.bw.data(), t.k, nb);
    isa.taps_inner(dst + nb * 16, src, t.idx.data() + nb * 16 * t.k, t.w.data() + nb * 16 * t.k, t.k, t.out - nb * 16);
  }

  template <class T>
  void nearest(olc_context* ctx, const Plan& p, const olc_tensor& x, void* yv) const {
    const int r = p.rank;
    const T* src = static_cast<const T*>(x.data);
    T* y = static_cast<T*>(yv);
    std::vector<int64_t> istr(r);
    int64_t st = 1;
    for (int a = r - 1; a >= 0; --a) {
      istr[a] = st;
      st *= x.shape[a];
    }
    const int64_t ow = p.oshape[r - 1];
    int64_t rows = 1;
    for (int a = 0; a < r - 1; ++a) rows *= p.oshape[a];
    T ev;
    {
      // extrapolation_value in the element type (only tf_crop_and_resize uses it)
      switch (dtype) {
        case OLC_DTYPE_FLOAT: { const float f = static_cast<float>(extrap_value); std::memcpy(&ev, &f, sizeof(T)); break; }
        case OLC_DTYPE_DOUBLE: { const double f = extrap_value; std::memcpy(&ev, &f, sizeof(T)); break; }
        case OLC_DTYPE_FLOAT16: { const uint16_t f = f64_to_f16(extrap_value); std::memcpy(&ev, &f, sizeof(T)); break; }
        case OLC_DTYPE_BFLOAT16: { const uint16_t f = f64_to_bf16(extrap_value); std::memcpy(&ev, &f, sizeof(T)); break; }
        default: ev = extrap_int<T>();
      }
    }
    const AxisTab& last = p.ax[r - 1];
    const int64_t es = static_cast<int64_t>(sizeof(T));
    par_for(ctx, rows, std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(1, ow * es)), rows * ow * es,
            parallel_min_bytes("Resize"), [&](int64_t b, int64_t e) {
              int64_t prev_off = -1;
              bool prev_ex = false;
              for (int64_t row = b; row < e; ++row) {
                int64_t rem = row, off = 0;
                bool ex = false;
                for (int a = r - 2; a >= 0; --a) {
                  const int64_t i = rem % p.oshape[a];
                  rem /= p.oshape[a];
                  ex = ex || p.ax[a].extrap[i];
                  off += static_cast<int64_t>(p.ax[a].idx[i]) * istr[a];
                }
                T* dst = y + row * ow;
                if (row > b && off == prev_off && ex == prev_ex) {
                  std::memcpy(dst, dst - ow, static_cast<size_t>(ow * es));
                  continue;
                }
                prev_off = off;
                prev_ex = ex;
                if (ex) {
                  std::fill(dst, dst + ow, ev);
                  continue;
                }
                const T* s = src + off;
                const int32_t* ix = last.idx.data();
                if (last.any_extrap) {
                  for (int64_t o = 0; o < ow; ++o) dst[o] = last.extrap[o] ? ev : s[ix[o]];
                } else {
                  for (int64_t o = 0; o < ow; ++o) dst[o] = s[ix[o]];
                }
              }
            });
  }

  template <class T>
  T extrap_int() const {
    // The element type with the size of T holding extrapolation_value.
    T out{};
    switch (dtype) {
      case OLC_DTYPE_INT8: { const int8_t v = store_v<int8_t, double>(extrap_value, dtype); std::memcpy(&out, &v, 1); break; }
      case OLC_DTYPE_UINT8: { const uint8_t v = store_v<uint8_t, double>(extrap_value, dtype); std::memcpy(&out, &v, 1); break; }
      case OLC_DTYPE_BOOL: { const uint8_t v = extrap_value != 0; std::memcpy(&out, &v, 1); break; }
      case OLC_DTYPE_INT16: { const int16_t v = store_v<int16_t, double>(extrap_value, dtype); std::memcpy(&out, &v, 2); break; }
      case OLC_DTYPE_UINT16: { const uint16_t v = store_v<uint16_t, double>(extrap_value, OLC_DTYPE_UINT16); std::memcpy(&out, &v, 2); break; }
      case OLC_DTYPE_INT32: { const int32_t v = store_v<int32_t, double>(extrap_value, dtype); std::memcpy(&out, &v, 4); break; }
      case OLC_DTYPE_UINT32: { const uint32_t v = store_v<uint32_t, double>(extrap_value, dtype); std::memcpy(&out, &v, 4); break; }
      case OLC_DTYPE_INT64: { const int64_t v = store_v<int64_t, double>(extrap_value, dtype); std::memcpy(&out, &v, 8); break; }
      case OLC_DTYPE_UINT64: { const uint64_t v = store_v<uint64_t, double>(extrap_value, dtype); std::memcpy(&out, &v, 8); break; }
      default: break;
    }
    return out;
  }

  // ---- linear / cubic
  template <class F>
  static void taps_inner_t(F* dst, const F* src, const int32_t* idx, const double* w, int32_t k, int64_t n) {
    for (int64_t o = 0; o < n; ++o) {
      F s = static_cast<F>(w[o * k]) * src[idx[o * k]];
      for (int32_t t = 1; t < k; ++t) s += static_cast<F>(w[o * k + t]) * src[idx[o * k + t]];
      dst[o] = s;
    }
  }
  template <class F>
  static void combine_t(F* dst, const F* const* rows, const double* w, int32_t k, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      F s = static_cast<F>(w[0]) * rows[0][i];
      for (int32_t t = 1; t < k; ++t) s += static_cast<F>(w[t]) * rows[t][i];
      dst[i] = s;
    }
  }

  template <class T, class F>
  int32_t interp(olc_context* ctx, const Plan& p, const olc_tensor& x, void* yv) const {
    const int r = p.rank;
    std::vector<int64_t> cur(x.shape, x.shape + r);
    int64_t n_in = 1;
    for (int a = 0; a < r; ++a) n_in *= cur[a];
    const int64_t pmin = parallel_min_bytes("Resize");
    std::vector<F> conv, buf[2];
    const F* src;
    if constexpr (std::is_same_v<T, F>) {
      src = static_cast<const F*>(x.data);
    } else {
      conv.resize(static_cast<size_t>(n_in));
      const T* xs = static_cast<const T*>(x.data);
      par_for(ctx, n_in, 4096, n_in * 4, pmin, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) conv[i] = load_v<T, F>(xs, i, dtype);
      });
      src = conv.data();
    }
    // Pass order: the innermost axis, then the outer ones from the inside out.
    std::vector<int> order;
    if (!p.ax[r - 1].identity) order.push_back(r - 1);
    for (int a = r - 2; a >= 0; --a)
      if (!p.ax[a].identity) order.push_back(a);
    if constexpr (std::is_same_v<T, float>) {
      // Only the last two axes resized (an NCHW image): one fused pass.
      if (r >= 2 && !order.empty() && order.back() >= r - 2) {
        planar_f32(ctx, p, src, static_cast<float*>(yv));
        fill_extrap<T>(p, static_cast<T*>(yv));
        return OLC_OK;
      }
    }
    int64_t total_out = 1;
    for (int a = 0; a < r; ++a) total_out *= p.oshape[a];
    F* final_dst = nullptr;
    if constexpr (std::is_same_v<T, F>) final_dst = static_cast<F*>(yv);
    int which = 0;
    if (order.empty()) {
      if constexpr (std::is_same_v<T, F>) {
        std::memcpy(final_dst, src, static_cast<size_t>(n_in) * sizeof(F));
      } else {
        buf[0].assign(src, src + n_in);
        src = buf[0].data();
      }
    }
    for (size_t pi = 0; pi < order.size(); ++pi) {
      const int a = order[pi];
      const AxisTab& t = p.ax[a];
      int64_t outer = 1, inner = 1;
      for (int b = 0; b < a; ++b) outer *= cur[b];
      for (int b = a + 1; b < r; ++b) inner *= cur[b];
      const int64_t n_dst = outer * t.out * inner;
      F* dst;
      if (pi + 1 == order.size() && final_dst) {
        dst = final_dst;
      } else {
        buf[which].resize(static_cast<size_t>(n_dst));
        dst = buf[which].data();
      }
      const F* s = src;
      const int32_t k = t.k;
      if (a == r - 1) {
        const int64_t in_w = cur[a], out_w = t.out;
        par_for(ctx, outer, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, out_w)), n_dst * 4 * k, pmin,
                [&](int64_t b, int64_t e) {
                  for (int64_t row = b; row < e; ++row) {
                    if constexpr (std::is_same_v<F, float>) {
                      inner_row(dst + row * out_w, s + row * in_w, t);
                    } else {
                      taps_inner_t<F>(dst + row * out_w, s + row * in_w, t.idx.data(), t.wd.data(), k, out_w);
                    }
                  }
                });
      } else {
        const int64_t in_a = cur[a], out_a = t.out;
        par_for(ctx, outer * out_a, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, inner)), n_dst * 4 * k, pmin,
                [&](int64_t b, int64_t e) {
                  std::vector<const F*> rows(static_cast<size_t>(k));
                  for (int64_t item = b; item < e; ++item) {
                    const int64_t pp = item / out_a, o = item % out_a;
                    for (int32_t q = 0; q < k; ++q) rows[q] = s + (pp * in_a + t.idx[o * k + q]) * inner;
                    F* d = dst + item * inner;
                    if constexpr (std::is_same_v<F, float>) isa.combine(d, rows.data(), t.w.data() + o * k, k, inner);
                    else combine_t<F>(d, rows.data(), t.wd.data() + o * k, k, inner);
                  }
                });
      }
      cur[a] = t.out;
      src = dst;
      which ^= 1;
    }
    T* y = static_cast<T*>(yv);
    if constexpr (!std::is_same_v<T, F>) {
      par_for(ctx, total_out, 4096, total_out * 4, pmin, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] = store_v<T, F>(src[i], dtype);
      });
    }
    fill_extrap<T>(p, static_cast<T*>(yv));
    return OLC_OK;
  }

  // Linear/cubic float32 over the last two axes in one pass per output row:
  // the W taps of each source row go into a ring of kh rows (computed once
  // per task and reused by every output row that reads it), then the H taps
  // combine kh of them into the output row. The same float32 operations in
  // the same order as the axis-by-axis passes (W first, then H). The taps of
  // one output row are consecutive source rows (clamped at the edges), so
  // row ih in ring slot ih % kh never evicts another tap of the same row.
  void planar_f32(olc_context* ctx, const Plan& p, const float* src, float* y) const {
    const int r = p.rank;
    const AxisTab& th = p.ax[r - 2];
    const AxisTab& tw = p.ax[r - 1];
    int64_t planes = 1;
    for (int a = 0; a < r - 2; ++a) planes *= p.oshape[a];
    const int64_t H = th.in, W = tw.in, OH = th.out, OW = tw.out;
    const bool w_id = tw.identity, h_id = th.identity;
    const int32_t kh = th.k;
    const int64_t rows = planes * OH;
    const int64_t grain = std::max<int64_t>(1, (8 << 10) / std::max<int64_t>(1, OW * 4));
    par_for(ctx, rows, grain, rows * OW * 4 + planes * H * W * 4, parallel_min_bytes("Resize"),
            [&](int64_t b, int64_t e) {
              std::vector<float> ring(w_id || h_id ? 0 : static_cast<size_t>(kh * OW));
              std::vector<int64_t> tag(static_cast<size_t>(kh), -1);
              std::vector<const float*> rp(static_cast<size_t>(kh));
              for (int64_t item = b; item < e; ++item) {
                const int64_t pl = item / OH, oh = item % OH;
                const float* xp = src + pl * H * W;
                float* d = y + item * OW;
                if (h_id) {
                  inner_row(d, xp + oh * W, tw);
                  continue;
                }
                for (int32_t q = 0; q < kh; ++q) {
                  const int64_t ih = th.idx[oh * kh + q];
                  if (w_id) {
                    rp[q] = xp + ih * W;
                    continue;
                  }
                  const int64_t slot = ih % kh;
                  float* row = ring.data() + slot * OW;
                  if (tag[slot] != pl * H + ih) {
                    inner_row(row, xp + ih * W, tw);
                    tag[slot] = pl * H + ih;
                  }
                  rp[q] = row;
                }
                isa.combine(d, rp.data(), th.w.data() + oh * kh, kh, OW);
              }
            });
  }

  // tf_crop_and_resize: extrapolation_value wherever a coordinate fell outside.
  template <class T>
  void fill_extrap(const Plan& p, T* y) const {
    if (!p.any_extrap) return;
    const int r = p.rank;
    int64_t total_out = 1;
    for (int a = 0; a < r; ++a) total_out *= p.oshape[a];
    const T ev = store_v<T, double>(extrap_value, dtype);
    const int64_t ow = p.oshape[r - 1];
    const int64_t rows = total_out / std::max<int64_t>(1, ow);
    const AxisTab& last = p.ax[r - 1];
    for (int64_t row = 0; row < rows; ++row) {
      int64_t rem = row;
      bool ex = false;
      for (int a = r - 2; a >= 0; --a) {
        ex = ex || p.ax[a].extrap[rem % p.oshape[a]];
        rem /= p.oshape[a];
      }
      T* d = y + row * ow;
      for (int64_t o = 0; o < ow; ++o)
        if (ex || last.extrap[o]) d[o] = ev;
    }
  }
};

bool parse_str(const olc_node_info* node, const char* name, std::string* out, std::string* error) {
  const olc_attribute* a = find_attr(node, name);
  if (!a) return true;
  if (a->type != OLC_ATTR_STRING || !a->s) {
    *error = strf("attribute '%s' must be a string", name);
    return false;
  }
  *out = a->s;
  return true;
}

bool attr_float(const olc_node_info* node, const char* name, double* out, std::string* error) {
  const olc_attribute* a = find_attr(node, name);
  if (!a) return true;
  if (a->type != OLC_ATTR_FLOAT) {
    *error = strf("attribute '%s' must be a float", name);
    return false;
  }
  *out = a->f;
  return true;
}

Kernel* make_resize_common(const olc_node_info* node, bool upsample, std::string* error) {
  auto k = std::make_unique<Resize>();
  k->upsample = upsample;
  k->opset = node->opset;
  const int64_t v = node->opset;
  const bool legacy = upsample || v < 11;
  std::vector<const char*> allowed = {"mode"};
  if (upsample && v < 9) allowed.push_back("scales");
  if (!legacy) {
    allowed.insert(allowed.end(), {"coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                                   "extrapolation_value", "nearest_mode"});
    if (v >= 18) allowed.insert(allowed.end(), {"antialias", "axes", "keep_aspect_ratio_policy"});
  }
  allowed.push_back(nullptr);
  if (!check_attr_names(node, allowed.data(), error)) return nullptr;
  if (node->n_inputs < 1) {
    *error = "expects input X";
    return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  if (!movable(k->dtype) || olc_dtype_size(k->dtype) > 8 || k->dtype == OLC_DTYPE_INT4 || k->dtype == OLC_DTYPE_UINT4 ||
      (olc_dtype_size(k->dtype) == 1 && k->dtype != OLC_DTYPE_INT8 && k->dtype != OLC_DTYPE_UINT8 &&
       k->dtype != OLC_DTYPE_BOOL)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  std::string m = "nearest";
  if (!parse_str(node, "mode", &m, error)) return nullptr;
  if (m == "nearest") k->mode = RMode::Nearest;
  else if (m == "linear") k->mode = RMode::Linear;
  else if (m == "cubic" && !legacy) k->mode = RMode::Cubic;
  else {
    *error = strf("attribute 'mode' = \"%s\" is not %s", m.c_str(), legacy ? "nearest or linear" : "nearest, linear or cubic");
    return nullptr;
  }
  if (k->dtype == OLC_DTYPE_BOOL && k->mode != RMode::Nearest) {
    *error = "bool input is resized by mode nearest only";
    return nullptr;
  }
  if (legacy) {
    k->coord = Coord::Asymmetric;
    k->nmode = NMode::Simple;
    if (upsample && v < 9) {
      const olc_attribute* s = find_attr(node, "scales");
      if (!s || s->type != OLC_ATTR_FLOATS) {
        *error = "attribute 'scales' (floats) is required";
        return nullptr;
      }
      k->attr_scales.assign(s->floats, s->floats + s->count);
      if (node->input_ranks && node->input_ranks[0] >= 0 && node->input_ranks[0] != s->count) {
        *error = strf("attribute 'scales' has %lld values, the input has rank %d", (long long)s->count, node->input_ranks[0]);
        return nullptr;
      }
    }
    k->isa = pick_resize();
    return k.release();
  }
  std::string c = "half_pixel", nm = "round_prefer_floor", ar = "stretch";
  int64_t excl = 0, aa = 0;
  if (!parse_str(node, "coordinate_transformation_mode", &c, error) || !parse_str(node, "nearest_mode", &nm, error) ||
      !parse_str(node, "keep_aspect_ratio_policy", &ar, error) || !attr_int(node, "exclude_outside", 0, &excl, error) ||
      !attr_int(node, "antialias", 0, &aa, error) || !attr_float(node, "cubic_coeff_a", &k->cubic_a, error) ||
      !attr_float(node, "extrapolation_value", &k->extrap_value, error) ||
      !attr_ints(node, "axes", &k->axes_attr, &k->has_axes, error))
    return nullptr;
  if (c == "half_pixel") k->coord = Coord::HalfPixel;
  else if (c == "half_pixel_symmetric" && v >= 19) k->coord = Coord::HalfPixelSymmetric;
  else if (c == "pytorch_half_pixel") k->coord = Coord::PytorchHalfPixel;
  else if (c == "align_corners") k->coord = Coord::AlignCorners;
  else if (c == "asymmetric") k->coord = Coord::Asymmetric;
  else if (c == "tf_half_pixel_for_nn" && v < 13) k->coord = Coord::TfHalfPixelForNN;
  else if (c == "tf_crop_and_resize") k->coord = Coord::TfCrop;
  else {
    *error = strf("attribute 'coordinate_transformation_mode' = \"%s\" is not a mode of Resize-%lld", c.c_str(), (long long)v);
    return nullptr;
  }
  if (nm == "round_prefer_floor") k->nmode = NMode::RoundPreferFloor;
  else if (nm == "round_prefer_ceil") k->nmode = NMode::RoundPreferCeil;
  else if (nm == "floor") k->nmode = NMode::Floor;
  else if (nm == "ceil") k->nmode = NMode::Ceil;
  else {
    *error = strf("attribute 'nearest_mode' = \"%s\" is not round_prefer_floor, round_prefer_ceil, floor or ceil", nm.c_str());
    return nullptr;
  }
  if (ar == "stretch") k->aspect = Aspect::Stretch;
  else if (ar == "not_larger") k->aspect = Aspect::NotLarger;
  else if (ar == "not_smaller") k->aspect = Aspect::NotSmaller;
  else {
    *error = strf("attribute 'keep_aspect_ratio_policy' = \"%s\" is not stretch, not_larger or not_smaller", ar.c_str());
    return nullptr;
  }
  if ((excl != 0 && excl != 1) || (aa != 0 && aa != 1)) {
    *error = "attributes 'exclude_outside' and 'antialias' must be 0 or 1";
    return nullptr;
  }
  k->exclude_outside = excl == 1;
  k->antialias = aa == 1;
  if (node->n_inputs > 3 && node->input_dtypes[2] != OLC_DTYPE_UNDEFINED && node->input_dtypes[3] != OLC_DTYPE_UNDEFINED &&
      node->input_constants) {
    const olc_tensor& s = node->input_constants[2];
    const olc_tensor& z = node->input_constants[3];
    if (s.data && z.data && olc_element_count(&s) > 0 && olc_element_count(&z) > 0) {
      *error = "both 'scales' and 'sizes' are given; exactly one may be";
      return nullptr;
    }
  }
  k->isa = pick_resize();
  return k.release();
}

}  // namespace

Kernel* make_resize(const olc_node_info* node, std::string* error) { return make_resize_common(node, false, error); }
Kernel* make_upsample(const olc_node_info* node, std::string* error) { return make_resize_common(node, true, error); }

}  // namespace olc_tn
