// GridSample (opsets 16, 20, 22): X [N, C, D1..Dr], grid [N, O1..Or, r]
// (coordinates innermost axis first, normalized to [-1, 1]) -> Y [N, C,
// O1..Or]. Opset 16 takes 2-D images only and names the modes bilinear /
// bicubic; from 20 any r >= 1 and the names linear / cubic.
//
// Each output point becomes taps of one input plane, the same for every
// channel: per spatial axis the coordinate is denormalized (align_corners:
// -1 and 1 are the centres of the corner pixels, else their outer edges),
// and gives one tap (nearest: round half to even), two (linear) or four
// (cubic, Keys a = -0.75); the padding mode then maps each tap index:
// zeros reads 0 outside the image, border clamps to the edge, reflection
// mirrors about the edges (the centres of the corner pixels with
// align_corners, their outer edges without). A point's taps are the
// products of its axes' taps. Padding applies to the taps, as PyTorch's
// grid_sample and onnxruntime do: onnx.reference also clamps or reflects
// the coordinate itself first, which gives the same result for nearest and
// linear and differs for cubic near the border under border / reflection
// padding. A NaN coordinate gives NaN; an infinite one gives 0 (zeros),
// the edge (border) or NaN (reflection).
//
// The taps of a chunk of points form a plan (sample_plan.h); each channel
// is then one pass of SIMD gathers over it. Work items are (image, chunk of
// points, range of channels). float32 computes coordinates in float32 (as onnxruntime);
// float16/bfloat16 inputs are widened to float32 once; float64 in either
// input computes in float64.
#include <algorithm>
#include <cmath>
#include <memory>

#include "common.h"
#include "registry.h"
#include "sample_plan.h"

namespace olc_tn {
namespace {

enum class GMode { Nearest, Linear, Cubic };
enum class GPad { Zeros, Border, Reflection };

constexpr int kMaxSpatial = 5;  // cubic taps per point: 4^r

SampleF32 pick_sample() {
  const int32_t level = g_api->simd_level();
  return level >= OLC_SIMD_AVX512 ? avx512::sample_f32()
         : level >= OLC_SIMD_AVX2 ? avx2::sample_f32()
                                  : scalar::sample_f32();
}

bool float_type(int32_t dt) {
  return dt == OLC_DTYPE_FLOAT || dt == OLC_DTYPE_DOUBLE || dt == OLC_DTYPE_FLOAT16 || dt == OLC_DTYPE_BFLOAT16;
}

template <class F>
inline F load_as(const void* p, int64_t i, int32_t dt) {
  switch (dt) {
    case OLC_DTYPE_FLOAT: return static_cast<F>(static_cast<const float*>(p)[i]);
    case OLC_DTYPE_DOUBLE: return static_cast<F>(static_cast<const double*>(p)[i]);
    case OLC_DTYPE_FLOAT16: return static_cast<F>(f16_to_f32(static_cast<const uint16_t*>(p)[i]));
    default: return static_cast<F>(bf16_to_f32(static_cast<const uint16_t*>(p)[i]));
  }
}

// Up to four taps of one axis: index (-1: reads 0) and weight.
template <class F>
struct AxisTaps {
  int32_t k = 0;
  int64_t idx[4];
  F w[4];
};

class GridSample final : public Kernel {
 public:
  int32_t dtype = 0, grid_dtype = 0;
  int64_t opset = 0;
  GMode mode = GMode::Linear;
  GPad pad = GPad::Zeros;
  bool align = false;
  SampleF32 isa{};

  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 2 || n_out != 1) return fail(ctx, "unexpected number of inputs (%d) or outputs (%d)", n_in, n_out);
    if (dtype == OLC_DTYPE_DOUBLE || grid_dtype == OLC_DTYPE_DOUBLE) return go<double>(ctx, in);
    return go<float>(ctx, in);
  }

  template <class F>
  int32_t go(olc_context* ctx, const olc_tensor* in) const {
    const olc_tensor& x = in[0];
    const olc_tensor& grid = in[1];
    if (x.dtype != dtype || grid.dtype != grid_dtype)
      return fail(ctx, "inputs have types %s and %s, the kernel was created for %s and %s", olc_dtype_name(x.dtype),
                  olc_dtype_name(grid.dtype), olc_dtype_name(dtype), olc_dtype_name(grid_dtype));
    if (checked_count(x) < 0 || checked_count(grid) < 0)
      return fail(ctx, "an input has a negative dimension, too many elements or no data");
    const int r = x.ndim - 2;
    if (opset < 20 && x.ndim != 4)
      return fail(ctx, "GridSample-%lld takes a 4-D X [N, C, H, W], it is %s", (long long)opset,
                  shape_str(x.shape, x.ndim).c_str());
    if (r < 1 || r > kMaxSpatial)
      return fail(ctx, "X must be [N, C, D1, ...] with 1 to %d spatial axes, it is %s", kMaxSpatial,
                  shape_str(x.shape, x.ndim).c_str());
    if (grid.ndim != x.ndim || grid.shape[grid.ndim - 1] != r || grid.shape[0] != x.shape[0])
      return fail(ctx, "grid must be [N, O1, ..., O%d, %d] with N = %lld (X is %s), it is %s", r, r,
                  (long long)x.shape[0], shape_str(x.shape, x.ndim).c_str(), shape_str(grid.shape, grid.ndim).c_str());
    const int64_t N = x.shape[0], C = x.shape[1];
    int64_t in_plane = 1, points = 1;
    int64_t oshape[kMaxSpatial + 2] = {N, C};
    for (int a = 0; a < r; ++a) {
      in_plane *= x.shape[2 + a];
      points *= grid.shape[1 + a];
      oshape[2 + a] = grid.shape[1 + a];
    }
    if (in_plane > std::numeric_limits<int32_t>::max())
      return fail(ctx, "X's planes (%s) have more than 2^31 - 1 elements", shape_str(x.shape, x.ndim).c_str());
    void* y = g_api->allocate_output(ctx, 0, dtype, x.ndim, oshape);
    const int64_t total = N * C * points;
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const bool f32 = std::is_same_v<F, float>;
    g_api->record_usage_detail(ctx, f32 ? isa.isa : "scalar");
    const int64_t pmin = parallel_min_bytes("GridSample");
    // X and Y in F: float32 views (float16/bfloat16 widened), or float64
    // (every other type widened when the grid is float64).
    std::vector<F> xbuf, ybuf;
    std::vector<float> xf;
    const F* xs;
    F* ys;
    const int64_t n_x = N * C * in_plane;
    if constexpr (std::is_same_v<F, float>) {
      xs = widen_f32(ctx, dtype, x.data, n_x, &xf, pmin);
    } else {
      if (dtype == OLC_DTYPE_DOUBLE) {
        xs = static_cast<const double*>(x.data);
      } else {
        xbuf.resize(static_cast<size_t>(n_x));
        for (int64_t i = 0; i < n_x; ++i) xbuf[i] = load_as<double>(x.data, i, dtype);
        xs = xbuf.data();
      }
    }
    const bool direct = (f32 && dtype == OLC_DTYPE_FLOAT) || (!f32 && dtype == OLC_DTYPE_DOUBLE);
    if (direct) {
      ys = static_cast<F*>(y);
    } else {
      ybuf.resize(static_cast<size_t>(total));
      ys = ybuf.data();
    }
    int64_t taps = 1;
    const int32_t k = mode == GMode::Nearest ? 1 : mode == GMode::Linear ? 2 : 4;
    for (int a = 0; a < r; ++a) taps *= k;
    // Work items: an image's points in chunks (a plan of about 32 KiB, which
    // stays in L1 while every channel runs through it: 1024 points of
    // bilinear taps; and at least two chunks per thread when there are
    // enough points), split by channels only when there are still fewer
    // items than threads and enough channels per part to pay for building
    // the plan again.
    const int64_t threads = ctx ? static_cast<int64_t>(g_api->concurrency(ctx)) : 1;
    const int64_t want = threads > 1 ? 2 * threads : 1;
    const int64_t fit = (int64_t{32} << 10) / (taps * static_cast<int64_t>(4 + sizeof(F)));
    const int64_t even = (points / std::max<int64_t>(1, (want + N - 1) / N) + kSampleBlock - 1) / kSampleBlock * kSampleBlock;
    const int64_t chunk = std::max(kSampleBlock, std::min(fit / kSampleBlock * kSampleBlock, std::max<int64_t>(256, even)));
    const int64_t chunks = (points + chunk - 1) / chunk;
    const int64_t parts = N * chunks >= want ? 1 : std::max<int64_t>(1, std::min(C / 16, want / (N * chunks)));
    par_for(ctx, N * chunks * parts, 1, total * taps * 4, pmin, [&](int64_t b, int64_t e) {
      TapPlan<F> plan;
      for (int64_t item = b; item < e; ++item) {
        const int64_t part = item % parts, nc = item / parts;
        const int64_t n = nc / chunks, p0 = (nc % chunks) * chunk;
        const int64_t np = std::min(chunk, points - p0);
        build_plan<F>(x, grid, n, points, p0, np, taps, &plan);
        for (int64_t c = C * part / parts; c < C * (part + 1) / parts; ++c) {
          const F* xp = xs + (n * C + c) * in_plane;
          F* yp = ys + (n * C + c) * points + p0;
          if constexpr (std::is_same_v<F, float>) isa.taps_sum(yp, xp, plan.idx.data(), plan.w.data(), taps, np, 1.0f);
          else taps_sum_f64(yp, xp, plan, 1.0);
        }
      }
    });
    if (!direct) {
      if constexpr (std::is_same_v<F, float>) {
        narrow_f32(ctx, dtype, ys, y, total, pmin);
      } else {
        // float64 grid, narrower X: round the float64 results once.
        for (int64_t i = 0; i < total; ++i) {
          const double v = ys[i];
          if (dtype == OLC_DTYPE_FLOAT) static_cast<float*>(y)[i] = static_cast<float>(v);
          else if (dtype == OLC_DTYPE_FLOAT16) static_cast<uint16_t*>(y)[i] = f64_to_f16(v);
          else static_cast<uint16_t*>(y)[i] = f64_to_bf16(v);
        }
      }
    }
    return OLC_OK;
  }

  // Index of tap c on an axis of `len` under the padding mode; -1 reads 0.
  int64_t pad_index(int64_t c, int64_t len) const {
    if (c >= 0 && c < len) return c;
    if (pad == GPad::Zeros) return -1;
    if (pad == GPad::Border) return c < 0 ? 0 : len - 1;
    if (align) {  // mirrored about the centres of the corner pixels
      if (len == 1) return 0;
      const int64_t period = 2 * (len - 1);
      int64_t m = c % period;
      if (m < 0) m += period;
      return m >= len ? period - m : m;
    }
    const int64_t period = 2 * len;  // mirrored about the outer edges
    int64_t m = c % period;
    if (m < 0) m += period;
    return m >= len ? period - 1 - m : m;
  }

  // The taps of one axis for the normalized coordinate v.
  template <class F>
  void axis_taps(F v, int64_t len, AxisTaps<F>* t) const {
    const int32_t k = mode == GMode::Nearest ? 1 : mode == GMode::Linear ? 2 : 4;
    t->k = k;
    F xc = align ? (v + F(1)) / F(2) * static_cast<F>(len - 1) : ((v + F(1)) * static_cast<F>(len) - F(1)) / F(2);
    if (!(std::fabs(xc) < F(1 << 22))) {
      // NaN, infinite or far outside: no integer arithmetic on it.
      const bool nan_point = std::isnan(xc) || (pad == GPad::Reflection && std::isinf(xc));
      if (nan_point || pad == GPad::Zeros) {
        for (int32_t j = 0; j < k; ++j) {
          t->idx[j] = -1;
          t->w[j] = nan_point ? std::numeric_limits<F>::quiet_NaN() : F(0);
        }
        return;
      }
      if (pad == GPad::Border) {
        xc = std::min(std::max(xc, F(-1)), static_cast<F>(len));
      } else {
        // Reflection is periodic: move the coordinate by whole periods
        // (fmod is exact), which leaves every tap's mirrored index as it was.
        const double period = align ? 2.0 * static_cast<double>(len - 1) : 2.0 * static_cast<double>(len);
        double m = period > 0 ? std::fmod(static_cast<double>(xc), period) : 0.0;
        if (m < 0) m += period;
        xc = static_cast<F>(m);
      }
    }
    if (mode == GMode::Nearest) {
      t->idx[0] = pad_index(static_cast<int64_t>(std::nearbyint(xc)), len);
      t->w[0] = F(1);
      return;
    }
    const F fl = std::floor(xc);
    const int64_t x0 = static_cast<int64_t>(fl);
    if (mode == GMode::Linear) {
      t->idx[0] = pad_index(x0, len);
      t->idx[1] = pad_index(x0 + 1, len);
      t->w[0] = (fl + F(1)) - xc;
      t->w[1] = xc - fl;
      return;
    }
    // Keys' cubic convolution, a = -0.75, at distances 1 + d, d, 1 - d, 2 - d.
    const F a = F(-0.75), d = xc - fl;
    const F d1 = d + F(1), d2 = F(1) - d, d3 = F(2) - d;
    t->w[0] = ((a * d1 - F(5) * a) * d1 + F(8) * a) * d1 - F(4) * a;
    t->w[1] = ((a + F(2)) * d - (a + F(3))) * d * d + F(1);
    t->w[2] = ((a + F(2)) * d2 - (a + F(3))) * d2 * d2 + F(1);
    t->w[3] = ((a * d3 - F(5) * a) * d3 + F(8) * a) * d3 - F(4) * a;
    for (int32_t j = 0; j < 4; ++j) t->idx[j] = pad_index(x0 - 1 + j, len);
  }

  // The taps of points [p0, p0 + np) of image n: every combination of the
  // axes' taps, the outermost axis slowest; weights multiplied outermost first.
  template <class F>
  void build_plan(const olc_tensor& x, const olc_tensor& grid, int64_t n, int64_t points, int64_t p0, int64_t np,
                  int64_t taps, TapPlan<F>* plan) const {
    const int r = x.ndim - 2;
    plan->reset(np, taps);
    int64_t stride[kMaxSpatial];
    int64_t s = 1;
    for (int a = r - 1; a >= 0; --a) {
      stride[a] = s;
      s *= x.shape[2 + a];
    }
    AxisTaps<F> at[kMaxSpatial];
    for (int64_t p = 0; p < np; ++p) {
      const int64_t g = (n * points + p0 + p) * r;
      // grid lists the coordinates innermost axis first.
      for (int a = 0; a < r; ++a) axis_taps<F>(load_as<F>(grid.data, g + (r - 1 - a), grid_dtype), x.shape[2 + a], &at[a]);
      int32_t j[kMaxSpatial] = {0};
      for (int64_t t = 0; t < taps; ++t) {
        int64_t off = 0;
        bool valid = true;
        F w = at[0].w[j[0]];
        for (int a = 0; a < r; ++a) {
          const int64_t i = at[a].idx[j[a]];
          valid = valid && i >= 0;
          off += i * stride[a];
          if (a > 0) w *= at[a].w[j[a]];
        }
        plan->set(p, t, valid ? static_cast<int32_t>(off) : -1, w);
        for (int a = r - 1; a >= 0; --a) {  // odometer, innermost axis fastest
          if (++j[a] < at[a].k) break;
          j[a] = 0;
        }
      }
    }
  }
};

Kernel* make_grid_sample_kernel(const olc_node_info* node, std::string* error) {
  static const char* const allowed[] = {"align_corners", "mode", "padding_mode", nullptr};
  if (!check_attr_names(node, allowed, error)) return nullptr;
  if (node->n_inputs != 2) {
    *error = strf("expects 2 inputs (X, grid), got %d", node->n_inputs);
    return nullptr;
  }
  auto k = std::make_unique<GridSample>();
  k->opset = node->opset;
  k->dtype = node->input_dtypes[0];
  k->grid_dtype = node->input_dtypes[1];
  for (int32_t dt : {k->dtype, k->grid_dtype})
    if (!float_type(dt) || (dt == OLC_DTYPE_BFLOAT16 && node->opset < 22)) {
      *error = strf("unsupported input type %s", olc_dtype_name(dt));
      return nullptr;
    }
  const bool v20 = node->opset >= 20;
  std::string mode = v20 ? "linear" : "bilinear", pad = "zeros";
  int64_t align = 0;
  for (const char* name : {"mode", "padding_mode"}) {
    const olc_attribute* a = find_attr(node, name);
    if (!a) continue;
    if (a->type != OLC_ATTR_STRING || !a->s) {
      *error = strf("attribute '%s' must be a string", name);
      return nullptr;
    }
    (name[0] == 'm' ? mode : pad) = a->s;
  }
  if (!attr_int(node, "align_corners", 0, &align, error)) return nullptr;
  if (mode == "nearest") k->mode = GMode::Nearest;
  else if (mode == (v20 ? "linear" : "bilinear")) k->mode = GMode::Linear;
  else if (mode == (v20 ? "cubic" : "bicubic")) k->mode = GMode::Cubic;
  else {
    *error = strf("attribute 'mode' = \"%s\" is not %s", mode.c_str(),
                  v20 ? "linear, nearest or cubic" : "bilinear, nearest or bicubic");
    return nullptr;
  }
  if (pad == "zeros") k->pad = GPad::Zeros;
  else if (pad == "border") k->pad = GPad::Border;
  else if (pad == "reflection") k->pad = GPad::Reflection;
  else {
    *error = strf("attribute 'padding_mode' = \"%s\" is not zeros, border or reflection", pad.c_str());
    return nullptr;
  }
  if (align != 0 && align != 1) {
    *error = strf("attribute 'align_corners' must be 0 or 1, got %lld", (long long)align);
    return nullptr;
  }
  k->align = align == 1;
  if (node->input_ranks && node->input_ranks[0] >= 0) {
    const int32_t rank = node->input_ranks[0];
    if ((!v20 && rank != 4) || rank < 3 || rank > kMaxSpatial + 2) {
      *error = strf("X has rank %d; GridSample-%lld takes %s", rank, (long long)node->opset,
                    v20 ? "ranks 3 to 7" : "rank 4");
      return nullptr;
    }
    if (node->input_ranks[1] >= 0 && node->input_ranks[1] != rank) {
      *error = strf("grid has rank %d, X rank %d: they must be equal", node->input_ranks[1], rank);
      return nullptr;
    }
  }
  k->isa = pick_sample();
  return k.release();
}

}  // namespace

Kernel* make_grid_sample(const olc_node_info* n, std::string* e) { return make_grid_sample_kernel(n, e); }

}  // namespace olc_tn
