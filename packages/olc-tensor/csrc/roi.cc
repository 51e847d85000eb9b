// RoiAlign (opsets 10, 16, 22) and MaxRoiPool (1, 22).
//
// Both validate every input before the output exists: X is [N, C, H, W],
// the rois have the right shape and finite coordinates, every batch index
// lies in [0, N), and (RoiAlign) each roi's sampling grid has a sane size.
//
// RoiAlign samples each output bin on a grid of sampling_ratio^2 points (or
// ceil(roi size / bins) per axis when sampling_ratio is 0) by bilinear
// interpolation, following the Mask R-CNN reference code (as onnxruntime and
// onnx.reference do): a sample outside [-1, H] x [-1, W] contributes 0, a
// coordinate in [-1, 0) is taken as 0, one past the last row or column as
// that row or column. The four taps and weights of every sample of a block
// of a roi form a tap plan (sample_plan.h), the same for every channel;
// each channel is then one pass of SIMD gathers over the plan (avg: the sum
// divided by the sample count; max: the largest weighted tap, NaN ignored).
// Work items are (roi, bins, channels): each builds its plan once and runs
// its channels, so each channel's plane is read once per roi. Coordinates are computed in the element type (float32 for
// float16/bfloat16, whose X is widened once), in the order onnxruntime uses.
//
// MaxRoiPool rounds the roi to whole pixels (round half away from zero,
// batch index truncated, as onnxruntime), splits it into pooled_shape bins
// of floor/ceil bounds clipped to the image, and takes each bin's maximum
// (NaN ignored; an empty bin gives 0): the rows under a row of bins are
// reduced into one row by the SIMD pooling rows, then each bin's columns.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "common.h"
#include "pool_kernels.h"
#include "registry.h"
#include "sample_plan.h"

namespace olc_tn {
namespace {

// A bin may take at most this many samples (a plan of 16 bins then stays
// under 32 MiB); a larger adaptive grid is refused, naming sampling_ratio.
constexpr double kMaxSamplesPerBin = 1 << 16;

SampleF32 pick_sample() {
  const int32_t level = g_api->simd_level();
  return level >= OLC_SIMD_AVX512 ? avx512::sample_f32()
         : level >= OLC_SIMD_AVX2 ? avx2::sample_f32()
                                  : scalar::sample_f32();
}

PoolRowsF32 pick_rows() {
  const int32_t level = g_api->simd_level();
  return level >= OLC_SIMD_AVX512 ? avx512::pool_rows_f32()
         : level >= OLC_SIMD_AVX2 ? avx2::pool_rows_f32()
                                  : scalar::pool_rows_f32();
}

bool float_type(int32_t dt) {
  return dt == OLC_DTYPE_FLOAT || dt == OLC_DTYPE_DOUBLE || dt == OLC_DTYPE_FLOAT16 || dt == OLC_DTYPE_BFLOAT16;
}

// Reads a float tensor of X's type into F values.
template <class F>
void read_values(const olc_tensor& t, int64_t n, std::vector<F>* out) {
  out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case OLC_DTYPE_FLOAT: (*out)[i] = static_cast<F>(static_cast<const float*>(t.data)[i]); break;
      case OLC_DTYPE_DOUBLE: (*out)[i] = static_cast<F>(static_cast<const double*>(t.data)[i]); break;
      case OLC_DTYPE_FLOAT16: (*out)[i] = static_cast<F>(f16_to_f32(static_cast<const uint16_t*>(t.data)[i])); break;
      default: (*out)[i] = static_cast<F>(bf16_to_f32(static_cast<const uint16_t*>(t.data)[i])); break;
    }
  }
}

// The checks both operators share: X [N, C, H, W] of the kernel's type and
// a plane small enough for 32-bit tap indices.
bool check_x(const olc_tensor& x, int32_t dtype, std::string* err) {
  if (x.dtype != dtype) {
    *err = strf("input X has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    return false;
  }
  if (checked_count(x) < 0) {
    *err = "input X has a negative dimension, too many elements or no data";
    return false;
  }
  if (x.ndim != 4) {
    *err = strf("input X must be 4-D [N, C, H, W], it is %s", shape_str(x.shape, x.ndim).c_str());
    return false;
  }
  if (x.shape[2] * x.shape[3] > std::numeric_limits<int32_t>::max()) {
    *err = strf("input X's planes (%s) have more than 2^31 - 1 elements", shape_str(x.shape, x.ndim).c_str());
    return false;
  }
  return true;
}

bool read_float_attr(const olc_node_info* node, const char* name, double def, double* out, std::string* error) {
  *out = def;
  const olc_attribute* a = find_attr(node, name);
  if (!a) return true;
  if (a->type != OLC_ATTR_FLOAT) {
    *error = strf("attribute '%s' must be a float", name);
    return false;
  }
  *out = a->f;
  if (!std::isfinite(*out)) {
    *error = strf("attribute '%s' = %g must be finite", name, *out);
    return false;
  }
  return true;
}

bool read_str_attr(const olc_node_info* node, const char* name, std::string* out, std::string* error) {
  const olc_attribute* a = find_attr(node, name);
  if (!a) return true;
  if (a->type != OLC_ATTR_STRING || !a->s) {
    *error = strf("attribute '%s' must be a string", name);
    return false;
  }
  *out = a->s;
  return true;
}

// ------------------------------------------------------------------ RoiAlign

template <class F>
struct RoiGeom {
  int64_t batch = 0;
  F start_h = 0, start_w = 0, bin_h = 0, bin_w = 0;
  int64_t grid_h = 0, grid_w = 0;  // samples per bin along each axis (0 when none)
  int64_t count = 1;               // the divisor of avg
};

// One axis of a sample: the two taps and their weights, or invalid.
template <class F>
struct AxisSample {
  bool valid;
  int64_t lo, hi;
  F l, h;  // weight of hi, of lo
};

template <class F>
AxisSample<F> axis_sample(F v, int64_t size) {
  AxisSample<F> s{false, 0, 0, F(0), F(0)};
  // Outside [-1, size] (NaN included): the sample contributes 0.
  if (size == 0 || !(v >= F(-1) && v <= static_cast<F>(size))) return s;
  if (v < F(0)) v = F(0);
  s.valid = true;
  s.lo = static_cast<int64_t>(v);
  if (s.lo >= size - 1) {
    s.hi = s.lo = size - 1;
    v = static_cast<F>(s.lo);
  } else {
    s.hi = s.lo + 1;
  }
  s.l = v - static_cast<F>(s.lo);
  s.h = F(1) - s.l;
  return s;
}

class RoiAlign final : public Kernel {
 public:
  int32_t dtype = 0;
  bool half_pixel = true, max_mode = false;
  int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
  double spatial_scale = 1.0;
  SampleF32 isa{};

  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 3 || n_out != 1) return fail(ctx, "unexpected number of inputs (%d) or outputs (%d)", n_in, n_out);
    if (dtype == OLC_DTYPE_DOUBLE) return go<double>(ctx, in);
    return go<float>(ctx, in);
  }

  template <class F>
  int32_t go(olc_context* ctx, const olc_tensor* in) const {
    const olc_tensor& x = in[0];
    const olc_tensor& rois = in[1];
    const olc_tensor& bi = in[2];
    std::string err;
    if (!check_x(x, dtype, &err)) return fail(ctx, "%s", err.c_str());
    if (rois.dtype != dtype)
      return fail(ctx, "input rois has type %s, X has %s", olc_dtype_name(rois.dtype), olc_dtype_name(dtype));
    if (checked_count(rois) < 0 || rois.ndim != 2 || rois.shape[1] != 4)
      return fail(ctx, "input rois must be [num_rois, 4], it is %s", shape_str(rois.shape, rois.ndim).c_str());
    const int64_t R = rois.shape[0];
    if (bi.dtype != OLC_DTYPE_INT64)
      return fail(ctx, "input batch_indices must be int64, got %s", olc_dtype_name(bi.dtype));
    if (checked_count(bi) < 0 || bi.ndim != 1 || bi.shape[0] != R)
      return fail(ctx, "input batch_indices must be [num_rois] = [%lld], it is %s", (long long)R,
                  shape_str(bi.shape, bi.ndim).c_str());
    const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    std::vector<F> rv;
    read_values(rois, R * 4, &rv);
    const int64_t* batch = static_cast<const int64_t*>(bi.data);
    std::vector<RoiGeom<F>> geo(static_cast<size_t>(R));
    const F scale = static_cast<F>(spatial_scale), offset = half_pixel ? F(0.5) : F(0);
    for (int64_t r = 0; r < R; ++r) {
      if (batch[r] < 0 || batch[r] >= N)
        return fail(ctx, "batch_indices[%lld] = %lld is outside [0, %lld) (X has %lld images)", (long long)r,
                    (long long)batch[r], (long long)N, (long long)N);
      const F* v = rv.data() + 4 * r;
      for (int j = 0; j < 4; ++j)
        if (!std::isfinite(v[j])) return fail(ctx, "rois[%lld] has a non-finite coordinate", (long long)r);
      RoiGeom<F>& g = geo[r];
      g.batch = batch[r];
      g.start_w = v[0] * scale - offset;
      g.start_h = v[1] * scale - offset;
      F roi_w = (v[2] * scale - offset) - g.start_w;
      F roi_h = (v[3] * scale - offset) - g.start_h;
      if (!half_pixel) {  // output_half_pixel: malformed rois are forced to 1x1
        roi_w = std::max(roi_w, F(1));
        roi_h = std::max(roi_h, F(1));
      }
      g.bin_h = roi_h / static_cast<F>(out_h);
      g.bin_w = roi_w / static_cast<F>(out_w);
      const double gh = sampling_ratio > 0 ? static_cast<double>(sampling_ratio) : std::ceil(roi_h / static_cast<F>(out_h));
      const double gw = sampling_ratio > 0 ? static_cast<double>(sampling_ratio) : std::ceil(roi_w / static_cast<F>(out_w));
      if (!(std::max(gh, 0.0) * std::max(gw, 0.0) <= kMaxSamplesPerBin))
        return fail(ctx, "roi %lld needs a grid of %g x %g samples per bin (more than %g); give sampling_ratio",
                    (long long)r, gh, gw, kMaxSamplesPerBin);
      g.grid_h = static_cast<int64_t>(gh);
      g.grid_w = static_cast<int64_t>(gw);
      g.count = std::max<int64_t>(g.grid_h * g.grid_w, 1);
      if (g.grid_h <= 0 || g.grid_w <= 0) g.grid_h = g.grid_w = 0;  // no samples: the bin is 0
    }
    const int64_t oshape[4] = {R, C, out_h, out_w};
    void* y = g_api->allocate_output(ctx, 0, dtype, 4, oshape);
    const int64_t total = R * C * out_h * out_w;
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    g_api->record_usage_detail(ctx, dtype == OLC_DTYPE_DOUBLE ? "scalar" : isa.isa);
    const int64_t pmin = parallel_min_bytes("RoiAlign");
    std::vector<float> xbuf, ybuf;
    const F* xs;
    F* ys;
    if constexpr (std::is_same_v<F, float>) {
      xs = widen_f32(ctx, dtype, x.data, x.shape[0] * C * H * W, &xbuf, pmin);
      if (dtype == OLC_DTYPE_FLOAT) {
        ys = static_cast<float*>(y);
      } else {
        ybuf.resize(static_cast<size_t>(total));
        ys = ybuf.data();
      }
    } else {
      xs = static_cast<const double*>(x.data);
      ys = static_cast<double*>(y);
    }
    // Work items: a roi's bins (as many as a plan of about 64 KiB holds,
    // usually all: each channel's plane is then read once per roi; blocks
    // of 16 bins when there are fewer rois than threads) and, when that
    // still leaves threads idle, ranges of at least 16 channels.
    struct Item {
      int64_t r, p0, np, c0, c1;
    };
    const int64_t bins = out_h * out_w;
    const int64_t threads = ctx ? static_cast<int64_t>(g_api->concurrency(ctx)) : 1;
    const int64_t want = threads > 1 ? 2 * threads : 1;
    std::vector<Item> items;
    int64_t work = 0;
    for (int64_t r = 0; r < R; ++r) {
      const int64_t taps = 4 * geo[r].grid_h * geo[r].grid_w;
      const int64_t fit = (int64_t{64} << 10) / std::max<int64_t>(1, taps * static_cast<int64_t>(4 + sizeof(F)));
      const int64_t step = R >= want ? std::max(kSampleBlock, fit / kSampleBlock * kSampleBlock) : kSampleBlock;
      for (int64_t p0 = 0; p0 < bins; p0 += step) items.push_back({r, p0, std::min(step, bins - p0), 0, C});
      work += taps * bins * C * 4;
    }
    const int64_t n_items = static_cast<int64_t>(items.size());
    const int64_t parts = n_items >= want ? 1 : std::max<int64_t>(1, std::min(C / 16, (want + n_items - 1) / n_items));
    if (parts > 1) {
      std::vector<Item> split;
      for (const Item& it : items)
        for (int64_t k = 0; k < parts; ++k) split.push_back({it.r, it.p0, it.np, C * k / parts, C * (k + 1) / parts});
      items.swap(split);
    }
    par_for(ctx, static_cast<int64_t>(items.size()), 1, work, pmin, [&](int64_t b, int64_t e) {
      TapPlan<F> plan;
      for (int64_t i = b; i < e; ++i) {
        const Item& it = items[i];
        const RoiGeom<F>& g = geo[it.r];
        build_plan(g, H, W, it.p0, it.np, &plan);
        for (int64_t c = it.c0; c < it.c1; ++c) {
          const F* xp = xs + (g.batch * C + c) * H * W;
          F* yp = ys + (it.r * C + c) * bins + it.p0;
          if constexpr (std::is_same_v<F, float>) {
            if (max_mode) isa.taps_max(yp, xp, plan.idx.data(), plan.w.data(), plan.taps, it.np);
            else isa.taps_sum(yp, xp, plan.idx.data(), plan.w.data(), plan.taps, it.np, static_cast<float>(g.count));
          } else {
            if (max_mode) taps_max_f64(yp, xp, plan);
            else taps_sum_f64(yp, xp, plan, static_cast<double>(g.count));
          }
        }
      }
    });
    if constexpr (std::is_same_v<F, float>) {
      if (dtype != OLC_DTYPE_FLOAT) narrow_f32(ctx, dtype, ys, y, total, pmin);
    }
    return OLC_OK;
  }

  // The taps of bins [p0, p0 + np): per sample (iy, ix) of a bin, four taps
  // in the order (lo, lo), (lo, hi), (hi, lo), (hi, hi).
  template <class F>
  void build_plan(const RoiGeom<F>& g, int64_t H, int64_t W, int64_t p0, int64_t np, TapPlan<F>* plan) const {
    plan->reset(np, 4 * g.grid_h * g.grid_w);
    for (int64_t p = 0; p < np; ++p) {
      const int64_t ph = (p0 + p) / out_w, pw = (p0 + p) % out_w;
      int64_t t = 0;
      for (int64_t iy = 0; iy < g.grid_h; ++iy) {
        const F yy = g.start_h + static_cast<F>(ph) * g.bin_h +
                     static_cast<F>(static_cast<float>(iy) + 0.5f) * g.bin_h / static_cast<F>(g.grid_h);
        const AxisSample<F> sy = axis_sample(yy, H);
        for (int64_t ix = 0; ix < g.grid_w; ++ix, t += 4) {
          const F xx = g.start_w + static_cast<F>(pw) * g.bin_w +
                       static_cast<F>(static_cast<float>(ix) + 0.5f) * g.bin_w / static_cast<F>(g.grid_w);
          const AxisSample<F> sx = axis_sample(xx, W);
          if (!sy.valid || !sx.valid) continue;  // the plan's taps already read 0
          plan->set(p, t, static_cast<int32_t>(sy.lo * W + sx.lo), sy.h * sx.h);
          plan->set(p, t + 1, static_cast<int32_t>(sy.lo * W + sx.hi), sy.h * sx.l);
          plan->set(p, t + 2, static_cast<int32_t>(sy.hi * W + sx.lo), sy.l * sx.h);
          plan->set(p, t + 3, static_cast<int32_t>(sy.hi * W + sx.hi), sy.l * sx.l);
        }
      }
    }
  }
};

Kernel* make_roi_align_kernel(const olc_node_info* node, std::string* error) {
  const int64_t v = node->opset;
  std::vector<const char*> allowed = {"mode", "output_height", "output_width", "sampling_ratio", "spatial_scale"};
  if (v >= 16) allowed.push_back("coordinate_transformation_mode");
  allowed.push_back(nullptr);
  if (!check_attr_names(node, allowed.data(), error)) return nullptr;
  if (node->n_inputs != 3) {
    *error = strf("expects 3 inputs (X, rois, batch_indices), got %d", node->n_inputs);
    return nullptr;
  }
  auto k = std::make_unique<RoiAlign>();
  k->dtype = node->input_dtypes[0];
  if (!float_type(k->dtype) || (k->dtype == OLC_DTYPE_BFLOAT16 && v < 22)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  std::string mode = "avg", ctm = v >= 16 ? "half_pixel" : "output_half_pixel";
  if (!read_str_attr(node, "mode", &mode, error) || !read_str_attr(node, "coordinate_transformation_mode", &ctm, error) ||
      !attr_int(node, "output_height", 1, &k->out_h, error) || !attr_int(node, "output_width", 1, &k->out_w, error) ||
      !attr_int(node, "sampling_ratio", 0, &k->sampling_ratio, error) ||
      !read_float_attr(node, "spatial_scale", 1.0, &k->spatial_scale, error))
    return nullptr;
  if (mode == "avg") k->max_mode = false;
  else if (mode == "max") k->max_mode = true;
  else {
    *error = strf("attribute 'mode' = \"%s\" is not avg or max", mode.c_str());
    return nullptr;
  }
  if (ctm == "half_pixel") k->half_pixel = true;
  else if (ctm == "output_half_pixel") k->half_pixel = false;
  else {
    *error = strf("attribute 'coordinate_transformation_mode' = \"%s\" is not half_pixel or output_half_pixel",
                  ctm.c_str());
    return nullptr;
  }
  if (k->out_h < 1 || k->out_w < 1) {
    *error = strf("output_height (%lld) and output_width (%lld) must be positive", (long long)k->out_h,
                  (long long)k->out_w);
    return nullptr;
  }
  if (k->sampling_ratio < 0) {
    *error = strf("attribute 'sampling_ratio' = %lld must not be negative", (long long)k->sampling_ratio);
    return nullptr;
  }
  if (k->sampling_ratio > 0 && static_cast<double>(k->sampling_ratio) * static_cast<double>(k->sampling_ratio) >
                                   kMaxSamplesPerBin) {
    *error = strf("attribute 'sampling_ratio' = %lld gives more than %g samples per bin", (long long)k->sampling_ratio,
                  kMaxSamplesPerBin);
    return nullptr;
  }
  k->isa = pick_sample();
  return k.release();
}

// ---------------------------------------------------------------- MaxRoiPool

class MaxRoiPool final : public Kernel {
 public:
  int32_t dtype = 0;
  int64_t pooled_h = 1, pooled_w = 1;
  double spatial_scale = 1.0;
  PoolRowsF32 rows{};

  struct Roi {
    int64_t batch, start_h, start_w;
    double bin_h, bin_w;
  };

  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 2 || n_out != 1) return fail(ctx, "unexpected number of inputs (%d) or outputs (%d)", n_in, n_out);
    if (dtype == OLC_DTYPE_DOUBLE) return go<double>(ctx, in);
    return go<float>(ctx, in);
  }

  template <class F>
  int32_t go(olc_context* ctx, const olc_tensor* in) const {
    const olc_tensor& x = in[0];
    const olc_tensor& rois = in[1];
    std::string err;
    if (!check_x(x, dtype, &err)) return fail(ctx, "%s", err.c_str());
    if (rois.dtype != dtype)
      return fail(ctx, "input rois has type %s, X has %s", olc_dtype_name(rois.dtype), olc_dtype_name(dtype));
    if (checked_count(rois) < 0 || rois.ndim != 2 || rois.shape[1] != 5)
      return fail(ctx, "input rois must be [num_rois, 5] (batch index, x1, y1, x2, y2), it is %s",
                  shape_str(rois.shape, rois.ndim).c_str());
    const int64_t R = rois.shape[0], N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    std::vector<F> rv;
    read_values(rois, R * 5, &rv);
    std::vector<Roi> geo(static_cast<size_t>(R));
    const F scale = static_cast<F>(spatial_scale);
    for (int64_t r = 0; r < R; ++r) {
      const F* v = rv.data() + 5 * r;
      for (int j = 0; j < 5; ++j)
        if (!std::isfinite(v[j])) return fail(ctx, "rois[%lld] has a non-finite value", (long long)r);
      // The batch index is truncated toward zero, as onnxruntime reads it.
      const F bt = std::trunc(v[0]);
      if (bt < F(0) || bt >= static_cast<F>(N))
        return fail(ctx, "rois[%lld] has batch index %g, outside [0, %lld)", (long long)r, static_cast<double>(v[0]),
                    (long long)N);
      int64_t c[4];
      for (int j = 0; j < 4; ++j) {
        const F s = std::round(v[1 + j] * scale);
        if (!(std::fabs(s) < F(1 << 30)))
          return fail(ctx, "rois[%lld] has a coordinate (%g after spatial_scale) beyond 2^30", (long long)r,
                      static_cast<double>(v[1 + j] * scale));
        c[j] = static_cast<int64_t>(s);
      }
      Roi& g = geo[r];
      g.batch = static_cast<int64_t>(bt);
      g.start_w = c[0];
      g.start_h = c[1];
      // Malformed rois are forced to 1x1.
      const int64_t rh = std::max<int64_t>(c[3] - c[1] + 1, 1), rw = std::max<int64_t>(c[2] - c[0] + 1, 1);
      g.bin_h = static_cast<double>(static_cast<F>(rh) / static_cast<F>(pooled_h));
      g.bin_w = static_cast<double>(static_cast<F>(rw) / static_cast<F>(pooled_w));
    }
    const int64_t oshape[4] = {R, C, pooled_h, pooled_w};
    void* y = g_api->allocate_output(ctx, 0, dtype, 4, oshape);
    const int64_t total = R * C * pooled_h * pooled_w;
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    g_api->record_usage_detail(ctx, dtype == OLC_DTYPE_DOUBLE ? "scalar" : rows.isa);
    const int64_t pmin = parallel_min_bytes("MaxRoiPool");
    std::vector<float> xbuf, ybuf;
    const F* xs;
    F* ys;
    if constexpr (std::is_same_v<F, float>) {
      xs = widen_f32(ctx, dtype, x.data, N * C * H * W, &xbuf, pmin);
      if (dtype == OLC_DTYPE_FLOAT) {
        ys = static_cast<float*>(y);
      } else {
        ybuf.resize(static_cast<size_t>(total));
        ys = ybuf.data();
      }
    } else {
      xs = static_cast<const double*>(x.data);
      ys = static_cast<double*>(y);
    }
    // Bin bounds: start floor(i * bin), end ceil((i + 1) * bin), offset by
    // the roi's start and clipped to the image.
    const auto bounds = [](double bin, int64_t i, int64_t start, int64_t size, int64_t* lo, int64_t* hi) {
      const float b = static_cast<float>(bin);
      *lo = std::min(std::max<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(i) * b)) + start, 0), size);
      *hi = std::min(std::max<int64_t>(static_cast<int64_t>(std::ceil(static_cast<float>(i + 1) * b)) + start, 0), size);
    };
    const int64_t work = R * C * H * W * static_cast<int64_t>(sizeof(F));
    par_for(ctx, R * C, 1, work, pmin, [&](int64_t b, int64_t e) {
      std::vector<F> row(static_cast<size_t>(W));
      std::vector<const F*> rp(static_cast<size_t>(H));
      std::vector<int64_t> ws(static_cast<size_t>(pooled_w)), we(static_cast<size_t>(pooled_w));
      for (int64_t item = b; item < e; ++item) {
        const int64_t r = item / C, c = item % C;
        const Roi& g = geo[r];
        const F* xp = xs + (g.batch * C + c) * H * W;
        F* yp = ys + item * pooled_h * pooled_w;
        int64_t w_lo = W, w_hi = 0;
        for (int64_t pw = 0; pw < pooled_w; ++pw) {
          bounds(g.bin_w, pw, g.start_w, W, &ws[pw], &we[pw]);
          if (we[pw] > ws[pw]) {
            w_lo = std::min(w_lo, ws[pw]);
            w_hi = std::max(w_hi, we[pw]);
          }
        }
        for (int64_t ph = 0; ph < pooled_h; ++ph) {
          int64_t hs, he;
          bounds(g.bin_h, ph, g.start_h, H, &hs, &he);
          F* yr = yp + ph * pooled_w;
          if (he <= hs || w_hi <= w_lo) {
            std::fill(yr, yr + pooled_w, F(0));
            continue;
          }
          // The rows of this row of bins, reduced over the columns any bin reads.
          for (int64_t h = hs; h < he; ++h) rp[h - hs] = xp + h * W + w_lo;
          const int64_t m = he - hs, n = w_hi - w_lo;
          if constexpr (std::is_same_v<F, float>) {
            rows.rows_max_n(row.data(), rp.data(), m, n);
          } else {
            for (int64_t i = 0; i < n; ++i) {
              F v = rp[0][i];
              for (int64_t k = 1; k < m; ++k) v = fmax_nan(v, rp[k][i]);
              row[i] = v;
            }
          }
          for (int64_t pw = 0; pw < pooled_w; ++pw) {
            if (we[pw] <= ws[pw]) {
              yr[pw] = F(0);
              continue;
            }
            F v = row[ws[pw] - w_lo];
            for (int64_t i = ws[pw] + 1; i < we[pw]; ++i) v = fmax_nan(v, row[i - w_lo]);
            yr[pw] = v;
          }
        }
      }
    });
    if constexpr (std::is_same_v<F, float>) {
      if (dtype != OLC_DTYPE_FLOAT) narrow_f32(ctx, dtype, ys, y, total, pmin);
    }
    return OLC_OK;
  }

  template <class F>
  static F fmax_nan(F a, F b) {  // NaN-ignoring maximum
    return std::isnan(b) ? a : (std::isnan(a) || b > a) ? b : a;
  }
};

Kernel* make_max_roi_pool_kernel(const olc_node_info* node, std::string* error) {
  static const char* const allowed[] = {"pooled_shape", "spatial_scale", nullptr};
  if (!check_attr_names(node, allowed, error)) return nullptr;
  if (node->n_inputs != 2) {
    *error = strf("expects 2 inputs (X, rois), got %d", node->n_inputs);
    return nullptr;
  }
  auto k = std::make_unique<MaxRoiPool>();
  k->dtype = node->input_dtypes[0];
  if (!float_type(k->dtype) || (k->dtype == OLC_DTYPE_BFLOAT16 && node->opset < 22)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  std::vector<int64_t> shape;
  bool has = false;
  if (!attr_ints(node, "pooled_shape", &shape, &has, error) ||
      !read_float_attr(node, "spatial_scale", 1.0, &k->spatial_scale, error))
    return nullptr;
  if (!has || shape.size() != 2 || shape[0] < 1 || shape[1] < 1) {
    *error = has ? strf("attribute 'pooled_shape' must be two positive values, got %zu values", shape.size())
                 : std::string("attribute 'pooled_shape' is required");
    if (has && shape.size() == 2) *error = "attribute 'pooled_shape' must be two positive values";
    return nullptr;
  }
  k->pooled_h = shape[0];
  k->pooled_w = shape[1];
  k->rows = pick_rows();
  return k.release();
}

}  // namespace

Kernel* make_roi_align(const olc_node_info* n, std::string* e) { return make_roi_align_kernel(n, e); }
Kernel* make_max_roi_pool(const olc_node_info* n, std::string* e) { return make_max_roi_pool_kernel(n, e); }

}  // namespace olc_tn
