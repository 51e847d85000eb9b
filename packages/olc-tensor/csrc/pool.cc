// MaxPool, AveragePool, LpPool and GlobalAveragePool, GlobalMaxPool,
// GlobalLpPool over 1-3 spatial axes ([N, C, D1, ...]).
//
// The adapter validates attributes (at create, and against the input rank at
// run) and works out the output shape and per-axis padding; every rank is
// then a 3-D problem [D, H, W] with unit axes in front. Each (n, c) plane is
// one task of the executor. Within a plane the window is reduced
// separably: the input rows (id, ih) under each output row are reduced in
// one pass into a row (one store per element), then a sliding window runs
// along W at the output's stride (1 and 2 vectorized). When the output rows
// tile the input rows (W == stride * OW) all rows of a plane form one block
// and the window runs over it as one long row, the outputs whose window
// crosses a row edge recomputed; otherwise each row goes through a buffer
// padded with the identity (NaN for max, which fmax ignores; 0 for sums).
// When the windows also tile H (no H padding, H == stride * OH) the planes
// of a task run several at once as one tall plane.
// float32 runs on the ISA rows of pool_kernels.h; float16/bfloat16/int8/
// uint8 are widened to float32 per plane (exact) and float64 computes in
// float64 with portable code; the global pools reduce several planes at once.
// MaxPool with the Indices output takes a direct window loop.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>

#include "common.h"
#include "fp_convert.h"
#include "pool_kernels.h"
#include "registry.h"

namespace olc_tn {
namespace {

enum class PKind { Max, Avg, Lp };
enum class AutoPad { NotSet, Valid, SameUpper, SameLower };

// ---- portable rows, for float64 (and the shape of the float32 ones)
template <class F>
inline F fmax1(F a, F b) {
  return std::isnan(b) ? a : (std::isnan(a) || b > a) ? b : a;
}

template <class F>
struct RowsT {
  static void window_max(F* t, const F* x, int64_t n, int64_t k, int64_t d, int64_t st) {
    for (int64_t i = 0; i < n; ++i) {
      F m = x[i * st];
      for (int64_t j = 1; j < k; ++j) m = fmax1(m, x[i * st + j * d]);
      t[i] = m;
    }
  }
  static void window_add(F* t, const F* x, int64_t n, int64_t k, int64_t d, int64_t st) {
    for (int64_t i = 0; i < n; ++i) {
      F s = x[i * st];
      for (int64_t j = 1; j < k; ++j) s += x[i * st + j * d];
      t[i] = s;
    }
  }
  static void rows_max_n(F* dst, const F* const* rows, int64_t m, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      F v = rows[0][i];
      for (int64_t r = 1; r < m; ++r) v = fmax1(v, rows[r][i]);
      dst[i] = v;
    }
  }
  static void rows_add_n(F* dst, const F* const* rows, int64_t m, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      F v = rows[0][i];
      for (int64_t r = 1; r < m; ++r) v += rows[r][i];
      dst[i] = v;
    }
  }
  template <bool Max>
  static void rows_2d(F* dst, const F* src, int64_t m, int64_t pitch, int64_t n, int64_t count, int64_t step) {
    for (int64_t r = 0; r < count; ++r)
      for (int64_t i = 0; i < n; ++i) {
        const F* p = src + r * step + i;
        F v = p[0];
        for (int64_t j = 1; j < m; ++j) v = Max ? fmax1(v, p[j * pitch]) : v + p[j * pitch];
        dst[r * n + i] = v;
      }
  }
  static void mul(F* y, const F* a, const F* b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
  }
  static F sum(const F* x, int64_t n) {
    F s = 0;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    return s;
  }
  static F max(const F* x, int64_t n) {
    F m = x[0];
    for (int64_t i = 1; i < n; ++i) m = fmax1(m, x[i]);
    return m;
  }
};

// The row functions used by one run: float32's from the ISA table.
template <class F>
struct Rows {
  void (*rows_max_n)(F*, const F* const*, int64_t, int64_t) = RowsT<F>::rows_max_n;
  void (*rows_add_n)(F*, const F* const*, int64_t, int64_t) = RowsT<F>::rows_add_n;
  void (*rows_max_2d)(F*, const F*, int64_t, int64_t, int64_t, int64_t, int64_t) = RowsT<F>::template rows_2d<true>;
  void (*rows_add_2d)(F*, const F*, int64_t, int64_t, int64_t, int64_t, int64_t) = RowsT<F>::template rows_2d<false>;
  void (*window_max)(F*, const F*, int64_t, int64_t, int64_t, int64_t) = RowsT<F>::window_max;
  void (*window_add)(F*, const F*, int64_t, int64_t, int64_t, int64_t) = RowsT<F>::window_add;
  void (*mul)(F*, const F*, const F*, int64_t) = RowsT<F>::mul;
  F (*sum)(const F*, int64_t) = RowsT<F>::sum;
  F (*max)(const F*, int64_t) = RowsT<F>::max;
};

Rows<float> rows_of(const PoolRowsF32& r) {
  Rows<float> o;
  o.rows_max_n = r.rows_max_n;
  o.rows_add_n = r.rows_add_n;
  o.rows_max_2d = r.rows_max_2d;
  o.rows_add_2d = r.rows_add_2d;
  o.window_max = r.window_max;
  o.window_add = r.window_add;
  o.mul = r.mul;
  o.sum = r.sum;
  o.max = r.max;
  return o;
}

PoolRowsF32 pick_pool_rows() {
  const int32_t level = g_api->simd_level();
  return level >= OLC_SIMD_AVX512 ? avx512::pool_rows_f32()
         : level >= OLC_SIMD_AVX2 ? avx2::pool_rows_f32()
                                  : scalar::pool_rows_f32();
}

// ---- element conversion
template <class T, class F>
inline F load_any(const void* base, int64_t i, int32_t dtype) {
  const T* p = static_cast<const T*>(base);
  if constexpr (std::is_same_v<T, uint16_t>) {
    return static_cast<F>(dtype == OLC_DTYPE_BFLOAT16 ? bf16_to_f32(p[i]) : f16_to_f32(p[i]));
  } else {
    return static_cast<F>(p[i]);
  }
}

template <class T, class F>
inline T store_any(F v, int32_t dtype) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return dtype == OLC_DTYPE_BFLOAT16 ? f32_to_bf16(static_cast<float>(v)) : f32_to_f16(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return std::numeric_limits<T>::lowest();  // a window of padding only
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// ---- geometry
struct Geometry {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  int64_t planes;
  int64_t in_plane, out_plane;
};

class Pool final : public Kernel {
 public:
  PKind kind = PKind::Max;
  bool global = false;
  int32_t dtype = 0;
  AutoPad auto_pad = AutoPad::NotSet;
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool has_strides = false, has_pads = false, has_dilations = false;
  int64_t ceil_mode = 0, count_include_pad = 0, storage_order = 0;
  double p = 2.0;
  bool indices = false;
  PoolRowsF32 isa{};
  std::string op;

  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 1 || n_out < 1 || n_out > 2) return fail(ctx, "unexpected number of inputs (%d) or outputs (%d)", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    if (checked_count(x) < 0) return fail(ctx, "the input has a negative dimension, too many elements or no data");
    const int rank = x.ndim;
    if (rank < 3 || (rank > 5 && !global))
      return fail(ctx, "%s takes [N, C, D1, ...] with 1 to 3 spatial axes, the input is %s", op.c_str(),
                  shape_str(x.shape, rank).c_str());
    const int sp = rank - 2;
    std::string err;
    Geometry g;
    if (!geometry(x, sp, &g, &err)) return fail(ctx, "%s", err.c_str());
    int64_t oshape[kMaxRank];
    oshape[0] = x.shape[0];
    oshape[1] = x.shape[1];
    for (int a = 0; a < sp; ++a) oshape[2 + a] = global ? 1 : g.out[3 - sp + a];
    const bool want_idx = indices && n_out == 2;
    void* y = g_api->allocate_output(ctx, 0, dtype, rank, oshape);
    const int64_t total = g.planes * g.out_plane;
    if (!y && total > 0) return OLC_ERROR;
    int64_t* yi = nullptr;
    if (want_idx) {
      yi = static_cast<int64_t*>(g_api->allocate_output(ctx, 1, OLC_DTYPE_INT64, rank, oshape));
      if (!yi && total > 0) return OLC_ERROR;
    }
    if (total == 0) return OLC_OK;
    g_api->record_usage_detail(ctx, dtype == OLC_DTYPE_DOUBLE ? "scalar" : isa.isa);
    switch (olc_dtype_size(dtype)) {
      case 1:
        if (dtype == OLC_DTYPE_INT8) return go<int8_t, float>(ctx, g, x.data, y, yi);
        return go<uint8_t, float>(ctx, g, x.data, y, yi);
      case 2: return go<uint16_t, float>(ctx, g, x.data, y, yi);
      case 8: return go<double, double>(ctx, g, x.data, y, yi);
      default: return go<float, float>(ctx, g, x.data, y, yi);
    }
  }

  bool geometry(const olc_tensor& x, int sp, Geometry* g, std::string* err) const {
    g->planes = x.shape[0] * x.shape[1];
    for (int a = 0; a < 3; ++a) {
      g->in[a] = g->out[a] = g->k[a] = g->s[a] = g->d[a] = 1;
      g->pb[a] = g->pe[a] = 0;
    }
    const int off = 3 - sp;
    if (global) {
      // Any number of spatial axes: one window over the whole plane.
      int64_t n = 1;
      for (int a = 0; a < sp; ++a) n *= x.shape[2 + a];
      g->in[2] = g->k[2] = n;
    } else {
      for (int a = 0; a < sp; ++a) g->in[off + a] = x.shape[2 + a];
      const size_t n = static_cast<size_t>(sp);
      if (kernel.size() != n) {
        *err = strf("kernel_shape has %zu values, the input has %d spatial axes", kernel.size(), sp);
        return false;
      }
      if (has_strides && strides.size() != n) {
        *err = strf("strides has %zu values, the input has %d spatial axes", strides.size(), sp);
        return false;
      }
      if (has_dilations && dilations.size() != n) {
        *err = strf("dilations has %zu values, the input has %d spatial axes", dilations.size(), sp);
        return false;
      }
      if (has_pads && pads.size() != 2 * n) {
        *err = strf("pads has %zu values, the input has %d spatial axes (expected %d)", pads.size(), sp, 2 * sp);
        return false;
      }
      for (int a = 0; a < sp; ++a) {
        const int b = off + a;
        g->k[b] = kernel[a];
        g->s[b] = has_strides ? strides[a] : 1;
        g->d[b] = has_dilations ? dilations[a] : 1;
        const int64_t in_a = g->in[b];
        const int64_t ext = (g->k[b] - 1) * g->d[b] + 1;
        if (auto_pad == AutoPad::NotSet) {
          g->pb[b] = has_pads ? pads[a] : 0;
          g->pe[b] = has_pads ? pads[a + sp] : 0;
          const int64_t span = in_a + g->pb[b] + g->pe[b] - ext;
          if (span < 0) {
            *err = strf("spatial axis %d: the window (%lld with dilation) is larger than the padded input (%lld)", a,
                        (long long)ext, (long long)(in_a + g->pb[b] + g->pe[b]));
            return false;
          }
          int64_t o = (ceil_mode ? (span + g->s[b] - 1) / g->s[b] : span / g->s[b]) + 1;
          // A last window starting in the tail padding is dropped.
          if (ceil_mode && (o - 1) * g->s[b] >= in_a + g->pb[b]) --o;
          g->out[b] = o;
        } else if (auto_pad == AutoPad::Valid) {
          if (in_a < ext) {
            *err = strf("spatial axis %d: the window (%lld with dilation) is larger than the input (%lld)", a,
                        (long long)ext, (long long)in_a);
            return false;
          }
          g->out[b] = (in_a - ext) / g->s[b] + 1;
        } else {
          const int64_t o = (in_a + g->s[b] - 1) / g->s[b];
          const int64_t tot = std::max<int64_t>(0, (o - 1) * g->s[b] + ext - in_a);
          g->out[b] = o;
          g->pb[b] = auto_pad == AutoPad::SameUpper ? tot / 2 : tot - tot / 2;
          g->pe[b] = tot - g->pb[b];
        }
      }
    }
    g->in_plane = g->in[0] * g->in[1] * g->in[2];
    g->out_plane = g->out[0] * g->out[1] * g->out[2];
    return true;
  }

  // Per axis: for each output position, the count the average divides by:
  // window positions inside the input, or (count_include_pad) inside the
  // padded extent (a ceil_mode window's overhang past the end padding never
  // counts).
  struct AxisMap {
    std::vector<int64_t> divisor;
    std::vector<float> inverse_f;
    std::vector<double> inverse_d;
  };
  void axis_map(const Geometry& g, int a, AxisMap* m) const {
    const int64_t o = g.out[a];
    m->divisor.assign(static_cast<size_t>(o), 0);
    for (int64_t i = 0; i < o; ++i) {
      const int64_t start = i * g.s[a] - g.pb[a];
      int64_t nv = 0, ninc = 0;
      for (int64_t j = 0; j < g.k[a]; ++j) {
        const int64_t pos = start + j * g.d[a];
        if (pos >= 0 && pos < g.in[a]) ++nv;
        if (pos < g.in[a] + g.pe[a]) ++ninc;
      }
      m->divisor[i] = count_include_pad ? ninc : nv;
    }
    // Divisors lie in [0, k]: each reciprocal computed once.
    std::vector<double> rd(static_cast<size_t>(g.k[a] + 1));
    std::vector<float> rf(rd.size());
    for (size_t v = 0; v < rd.size(); ++v) {
      rd[v] = 1.0 / static_cast<double>(v);
      rf[v] = 1.0f / static_cast<float>(v);
    }
    m->inverse_f.resize(static_cast<size_t>(o));
    m->inverse_d.resize(static_cast<size_t>(o));
    for (int64_t i = 0; i < o; ++i) {
      m->inverse_d[i] = rd[m->divisor[i]];
      m->inverse_f[i] = rf[m->divisor[i]];
    }
  }

  template <class T, class F>
  int32_t go(olc_context* ctx, const Geometry& g, const void* xv, void* yv, int64_t* yi) const {
    Rows<F> r;
    if constexpr (std::is_same_v<F, float>) r = rows_of(isa);
    const T* x = static_cast<const T*>(xv);
    T* y = static_cast<T*>(yv);
    AxisMap m[3];
    std::vector<F> scale;  // AveragePool: 1 / count of every output position of a plane
    if (!global) {
      // The divisors only for AveragePool (a long 1-D max pool spent most of
      // its time here), their reciprocals from a table of the few values.
      if (kind == PKind::Avg) {
        for (int a = 0; a < 3; ++a) axis_map(g, a, &m[a]);
        const int64_t kvol = g.k[0] * g.k[1] * g.k[2];
        std::vector<F> recip(kvol <= 4096 ? static_cast<size_t>(kvol + 1) : 0);
        for (size_t v = 1; v < recip.size(); ++v) recip[v] = static_cast<F>(1.0 / static_cast<double>(v));
        scale.resize(static_cast<size_t>(g.out_plane));
        int64_t i = 0;
        for (int64_t od = 0; od < g.out[0]; ++od)
          for (int64_t oh = 0; oh < g.out[1]; ++oh)
            for (int64_t ow = 0; ow < g.out[2]; ++ow, ++i) {
              const int64_t dv = m[0].divisor[od] * m[1].divisor[oh] * m[2].divisor[ow];
              scale[i] = dv < static_cast<int64_t>(recip.size()) && dv > 0
                             ? recip[dv]
                             : static_cast<F>(1.0 / static_cast<double>(dv));
            }
      }
    }
    // Outputs along W whose window leaves the row: (ow, first and end tap).
    std::vector<std::array<int64_t, 3>> edges;
    if (!global) {
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        const int64_t st = ow * g.s[2] - g.pb[2];
        if (st >= 0 && st + (g.k[2] - 1) * g.d[2] < g.in[2]) continue;
        int64_t jlo = -1, jhi = -1;
        for (int64_t j = 0; j < g.k[2]; ++j) {
          const int64_t iw = st + j * g.d[2];
          if (iw < 0 || iw >= g.in[2]) continue;
          if (jlo < 0) jlo = j;
          jhi = j + 1;
        }
        edges.push_back({ow, jlo, jhi});
      }
    }
    const int64_t es = static_cast<int64_t>(olc_dtype_size(dtype));
    // Tasks of about task_bytes of input. A windowed pool splits from a small
    // size on (Pool parallel_min_bytes) into at least one task per thread: its
    // input mostly comes from a threaded Conv and lies in both cores' caches,
    // which one thread reads slower than two. The global pools, one pass of
    // light work, keep their own larger threshold.
    int64_t grain = std::max<int64_t>(1, pool_task_bytes() / std::max<int64_t>(1, g.in_plane * es));
    if (!global && ctx) {
      const int64_t threads = std::max(1, g_api->concurrency(ctx));
      grain = std::max<int64_t>(1, std::min(grain, (g.planes + threads - 1) / threads));
    }
    // Planes whose windows tile H exactly (no H padding, H == stride * OH;
    // 1-D and 2-D) and take the block path run several at once as one tall
    // plane: no window crosses from one plane into the next, and the
    // per-plane calls of small planes (16x16, 1-D rows) cost more than
    // their work.
    const bool block = !global && g.in[2] == g.s[2] * g.out[2] && g.out[2] > 1;
    const bool merge = block && std::is_same_v<T, F> && kind != PKind::Lp && !yi && g.in[0] == 1 && g.k[0] == 1 &&
                       g.pb[1] == 0 && g.pe[1] == 0 && g.in[1] == g.s[1] * g.out[1];
    const bool row1d = !global && !yi && !merge && kind != PKind::Lp && g.in[0] == 1 && g.in[1] == 1 && g.k[0] == 1 &&
                       g.k[1] == 1 && g.out[0] == 1 && g.out[1] == 1 && g.pb[2] == 0 &&
                       (g.out[2] - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] < g.in[2];
    const int64_t mcap = merge ? std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(1, g.in_plane * es)) : 1;
    if (merge && kind == PKind::Avg) {
      const size_t n = scale.size();
      scale.resize(n * static_cast<size_t>(mcap));
      for (int64_t c = 1; c < mcap; ++c) std::copy(scale.begin(), scale.begin() + n, scale.begin() + c * n);
    }
    const int64_t min_bytes = parallel_min_bytes(global ? "GlobalPool" : "Pool");
    par_for(ctx, g.planes, grain, g.planes * g.in_plane * es, min_bytes, [&](int64_t b, int64_t e) {
      std::vector<F> plane, row, padded, outrow;
      std::vector<int64_t> ids;  // per-plane scratch, allocated once per range
      std::vector<const F*> rp;
      if constexpr (std::is_same_v<T, F>) {
        if (row1d) {
          // 1-D planes of one row whose windows all lie inside it (the audio
          // stacks' [1, 256, 31] pool of 4): the window straight from the
          // input into the output, no per-plane scratch.
          for (int64_t pc = b; pc < e; ++pc) {
            T* yr = y + pc * g.out[2];
            const F* xr = x + pc * g.in[2];
            if (kind == PKind::Max) {
              r.window_max(yr, xr, g.out[2], g.k[2], g.d[2], g.s[2]);
            } else {
              r.window_add(yr, xr, g.out[2], g.k[2], g.d[2], g.s[2]);
              if constexpr (std::is_same_v<F, float>) r.mul(yr, yr, m[2].inverse_f.data(), g.out[2]);
              else r.mul(yr, yr, m[2].inverse_d.data(), g.out[2]);
            }
          }
          return;
        }
        if (merge) {
          for (int64_t pc = b; pc < e; pc += mcap) {
            const int64_t cnt = std::min(mcap, e - pc);
            Geometry gm = g;
            gm.in[1] *= cnt;
            gm.out[1] *= cnt;
            plane_block<T, F>(gm, r, x + pc * g.in_plane, y + pc * g.out_plane, row, outrow, padded, ids, rp, scale,
                              edges);
          }
          return;
        }
      }
      if constexpr (std::is_same_v<T, float>) {
        if (global && kind != PKind::Lp && !yi) {
          // Whole planes at once, several in flight.
          if (kind == PKind::Max) {
            isa.plane_maxes(x + b * g.in_plane, g.in_plane, e - b, y + b);
          } else {
            isa.plane_sums(x + b * g.in_plane, g.in_plane, e - b, y + b);
            const float n = static_cast<float>(g.in_plane);
            for (int64_t pc = b; pc < e; ++pc) y[pc] /= n;
          }
          return;
        }
      }
      for (int64_t pc = b; pc < e; ++pc) {
        const T* xp = x + pc * g.in_plane;
        const F* src = nullptr;
        const bool direct = std::is_same_v<T, F> && kind != PKind::Lp;
        if constexpr (std::is_same_v<T, F>) src = xp;
        if (!direct) {
          plane.resize(static_cast<size_t>(g.in_plane));
          for (int64_t i = 0; i < g.in_plane; ++i) {
            F v = load_any<T, F>(xp, i, dtype);
            if (kind == PKind::Lp) v = p == 1.0 ? std::fabs(v) : p == 2.0 ? v * v : std::pow(std::fabs(v), static_cast<F>(p));
            plane[i] = v;
          }
          src = plane.data();
        }
        if (yi) {
          max_with_indices<T, F>(g, m, src, y + pc * g.out_plane, yi + pc * g.out_plane, pc * g.in_plane);
          continue;
        }
        T* yp = y + pc * g.out_plane;
        if (global) {
          F v;
          if (kind == PKind::Max) v = g.in_plane ? r.max(src, g.in_plane) : std::numeric_limits<F>::quiet_NaN();
          else v = r.sum(src, g.in_plane);
          yp[0] = finish<T, F>(v, g.in_plane);
          continue;
        }
        if (block) plane_block<T, F>(g, r, src, yp, row, outrow, padded, ids, rp, scale, edges);
        else plane_rows<T, F>(g, m, r, src, yp, row, outrow, rp);
      }
    });
    return OLC_OK;
  }

  template <class T, class F>
  T finish(F v, int64_t divisor) const {
    if (kind == PKind::Avg) v = v / static_cast<F>(divisor);
    else if (kind == PKind::Lp) v = p == 1.0 ? v : p == 2.0 ? std::sqrt(v) : std::pow(v, static_cast<F>(1.0 / p));
    return store_any<T, F>(v, dtype);
  }

  template <class T, class F>
  void plane_rows(const Geometry& g, const AxisMap* m, const Rows<F>& r, const F* src, T* yp, std::vector<F>& row,
                  std::vector<F>& outrow, std::vector<const F*>& rp) const {
    const int64_t W = g.in[2], H = g.in[1], OW = g.out[2];
    const int64_t kw = g.k[2], sw = g.s[2], dw = g.d[2], pw = g.pb[2];
    const int64_t span = (OW - 1) * sw + 1;  // window starts spanned by the outputs
    const int64_t L = std::max(pw + W, span + (kw - 1) * dw);
    const bool inside = pw == 0 && span + (kw - 1) * dw <= W;  // every window within the row
    const F ident = kind == PKind::Max ? std::numeric_limits<F>::quiet_NaN() : F(0);
    row.assign(static_cast<size_t>(L), ident);
    outrow.resize(static_cast<size_t>(OW));
    F* rb = row.data() + pw;
    const bool is_max = kind == PKind::Max;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const int64_t d0 = od * g.s[0] - g.pb[0], h0 = oh * g.s[1] - g.pb[1];
        rp.clear();
        for (int64_t jd = 0; jd < g.k[0]; ++jd) {
          const int64_t id = d0 + jd * g.d[0];
          if (id < 0 || id >= g.in[0]) continue;
          for (int64_t jh = 0; jh < g.k[1]; ++jh) {
            const int64_t ih = h0 + jh * g.d[1];
            if (ih >= 0 && ih < H) rp.push_back(src + (id * H + ih) * W);
          }
        }
        const F* wrow = row.data();
        if (inside && rp.size() == 1) wrow = rp[0];  // one input row, no padding needed: read in place
        else if (rp.empty()) std::fill(rb, rb + W, ident);
        else if (is_max) r.rows_max_n(rb, rp.data(), static_cast<int64_t>(rp.size()), W);
        else r.rows_add_n(rb, rp.data(), static_cast<int64_t>(rp.size()), W);
        T* yr = yp + (od * g.out[1] + oh) * OW;
        F* res = outrow.data();
        if constexpr (std::is_same_v<T, F>) {
          if (is_max) res = yr;  // straight into the output row
        }
        if (is_max) r.window_max(res, wrow, OW, kw, dw, sw);
        else r.window_add(res, wrow, OW, kw, dw, sw);
        if (kind == PKind::Max) {
          if constexpr (!std::is_same_v<T, F>) {
            for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = store_any<T, F>(outrow[ow], dtype);
          }
        } else if (kind == PKind::Avg) {
          const F* inv;
          if constexpr (std::is_same_v<F, float>) inv = m[2].inverse_f.data();
          else inv = m[2].inverse_d.data();
          const F idh = static_cast<F>(1) / static_cast<F>(m[0].divisor[od] * m[1].divisor[oh]);
          if constexpr (std::is_same_v<T, F>) {
            for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = outrow[ow] * (idh * inv[ow]);
          } else {
            for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = store_any<T, F>(outrow[ow] * (idh * inv[ow]), dtype);
          }
        } else {
          for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = finish<T, F>(outrow[ow], 1);
        }
      }
    }
  }

  // The same reduction over whole blocks when the output rows tile the input
  // rows exactly (W == stride * OW: "same" padding at stride 1, even widths
  // at stride 2): the rows under the windows are reduced into a [OH, W]
  // block V (consecutive output rows at stride 1 in one call per tap row),
  // then one sliding window runs over V as a single long row; the few
  // outputs per row whose window crosses a row edge are recomputed.
  template <class T, class F>
  void plane_block(const Geometry& g, const Rows<F>& r, const F* src, T* yp, std::vector<F>& vb, std::vector<F>& yb,
                   std::vector<F>& pad, std::vector<int64_t>& ids, std::vector<const F*>& rp,
                   const std::vector<F>& scale, const std::vector<std::array<int64_t, 3>>& edges) const {
    const int64_t W = g.in[2], H = g.in[1], OW = g.out[2], OH = g.out[1];
    const int64_t kw = g.k[2], sw = g.s[2], dw = g.d[2], pw = g.pb[2];
    const int64_t kh = g.k[1], sh = g.s[1], dh = g.d[1], ph = g.pb[1];
    const bool is_max = kind == PKind::Max;
    const F ident = is_max ? std::numeric_limits<F>::quiet_NaN() : F(0);
    // The taps of the edge outputs, each recomputed with scalar code: many
    // against the row's width choose the padded long row below instead.
    int64_t edge_taps = 0;
    for (const auto& e : edges) edge_taps += std::max<int64_t>(0, e[2] - e[1]);
    const bool padded_rows = edge_taps * 5 > W;
    // Scratch only where it is used: a long 1-D row read in place and
    // written straight to the output needs none (sizing it would zero
    // megabytes per run).
    const bool direct_out = std::is_same_v<T, F> && kind != PKind::Lp;
    const bool in_place = kh == 1 && sh == 1 && ph == 0 && g.pe[1] == 0 && g.out[0] == 1 && g.in[0] == 1;
    if (!in_place) vb.resize(static_cast<size_t>(OH * W));
    if (!direct_out) yb.resize(static_cast<size_t>(OH * OW));
    F* const Vw = vb.data();  // the reduced rows, unless read in place
    const auto reduce_rows = [&](F* dst, int64_t n) {
      if (rp.empty()) std::fill(dst, dst + n, ident);
      else if (is_max) r.rows_max_n(dst, rp.data(), static_cast<int64_t>(rp.size()), n);
      else r.rows_add_n(dst, rp.data(), static_cast<int64_t>(rp.size()), n);
    };
    for (int64_t od = 0; od < g.out[0]; ++od) {
      // Depth taps first (3-D): the valid input planes of this od.
      ids.clear();
      for (int64_t jd = 0; jd < g.k[0]; ++jd) {
        const int64_t id = od * g.s[0] - g.pb[0] + jd * g.d[0];
        if (id >= 0 && id < g.in[0]) ids.push_back(id);
      }
      // Output rows [a0, a1) have every tap row inside the input: at stride
      // 1 one call over all of them (their tap rows are consecutive), at
      // larger strides one call per depth tap set (2-D: the rows at a pitch).
      int64_t a0 = std::min<int64_t>(OH, (ph + sh - 1) / sh);
      const int64_t last = H - 1 + ph - (kh - 1) * dh;  // the last window start inside
      int64_t a1 = last < 0 ? a0 : std::max<int64_t>(a0, std::min<int64_t>(OH, last / sh + 1));
      if (sh != 1 && ids.size() != 1) a0 = a1 = 0;
      const F* V = Vw;
      if (in_place) {
        V = src;  // each output row is one input row: read in place
      } else if (a1 > a0 && sh == 1) {
        rp.clear();
        for (int64_t id : ids)
          for (int64_t jh = 0; jh < kh; ++jh) rp.push_back(src + (id * H + a0 - ph + jh * dh) * W);
        reduce_rows(Vw + a0 * W, (a1 - a0) * W);
      } else if (a1 > a0) {
        const F* s0 = src + (ids[0] * H + a0 * sh - ph) * W;
        if (is_max) r.rows_max_2d(Vw + a0 * W, s0, kh, dh * W, W, a1 - a0, sh * W);
        else r.rows_add_2d(Vw + a0 * W, s0, kh, dh * W, W, a1 - a0, sh * W);
      }
      // The other rows one by one: [0, a0) and [a1, OH) (all rows when a0 == a1 == 0).
      const auto one_row = [&](int64_t oh) {
        rp.clear();
        for (int64_t id : ids)
          for (int64_t jh = 0; jh < kh; ++jh) {
            const int64_t ih = oh * sh - ph + jh * dh;
            if (ih >= 0 && ih < H) rp.push_back(src + (id * H + ih) * W);
          }
        reduce_rows(Vw + oh * W, W);
      };
      for (int64_t oh = 0; oh < a0; ++oh) one_row(oh);
      for (int64_t oh = a1; oh < OH; ++oh) one_row(oh);
      // The long row: outputs i in [i0, i1) read V[i * sw - pw + j * dw].
      const int64_t n_all = OH * OW, len = OH * W;
      const int64_t i0 = (pw + sw - 1) / sw;
      int64_t i1 = (len - 1 + pw - (kw - 1) * dw);
      i1 = i1 < 0 ? 0 : i1 / sw + 1;
      i1 = std::min(i1, n_all);
      T* yo = yp + od * n_all;
      F* out = yb.data();
      if constexpr (std::is_same_v<T, F>) {
        if (kind != PKind::Lp) out = yo;
      }
      if (padded_rows) {
        // Windows nearly as wide as the row (SPP's 5, 9 and 13 at 13x13:
        // every output an edge, whose recomputation tap by tap took 4x the
        // time of the whole pool): V's rows copied between margins of the
        // identity, wide enough for every window, and one long window over
        // them (a multiple of sw wide, so each row's outputs start at a
        // window position).
        const int64_t Wp = (std::max(pw + W, (OW - 1) * sw + (kw - 1) * dw + 1) + sw - 1) / sw * sw;
        const int64_t nq = (OH - 1) * (Wp / sw) + OW;
        // The margins are never written: filled once for the range's planes.
        if (pad.size() != static_cast<size_t>(OH * Wp + nq)) pad.assign(static_cast<size_t>(OH * Wp + nq), ident);
        F* const P = pad.data();
        F* const t = P + OH * Wp;
        for (int64_t oh = 0; oh < OH; ++oh) std::copy(V + oh * W, V + oh * W + W, P + oh * Wp + pw);
        if (is_max) r.window_max(t, P, nq, kw, dw, sw);
        else r.window_add(t, P, nq, kw, dw, sw);
        for (int64_t oh = 0; oh < OH; ++oh) std::copy(t + oh * (Wp / sw), t + oh * (Wp / sw) + OW, out + oh * OW);
      } else {
        if (i1 > i0) {
          if (is_max) r.window_max(out + i0, V + i0 * sw - pw, i1 - i0, kw, dw, sw);
          else r.window_add(out + i0, V + i0 * sw - pw, i1 - i0, kw, dw, sw);
        }
        // Edge outputs: windows that leave their row (the long row read the
        // neighbouring row there), one edge position down every row at a time.
        for (const auto& [ow, jlo, jhi] : edges) {
          F* o = out + ow;
          if (jlo < 0) {
            for (int64_t oh = 0; oh < OH; ++oh) o[oh * OW] = ident;
            continue;
          }
          // Taps [jlo, jhi) are the ones inside the row (positions rise with j).
          const F* v0 = V + ow * sw - pw + jlo * dw;
          const int64_t nt = jhi - jlo;
          if (is_max) {
            for (int64_t oh = 0; oh < OH; ++oh) {
              const F* vr = v0 + oh * W;
              F v = vr[0];
              for (int64_t j = 1; j < nt; ++j) v = fmax1(v, vr[j * dw]);
              o[oh * OW] = v;
            }
          } else if (nt == 2) {
            for (int64_t oh = 0; oh < OH; ++oh) o[oh * OW] = v0[oh * W] + v0[oh * W + dw];
          } else {
            for (int64_t oh = 0; oh < OH; ++oh) {
              const F* vr = v0 + oh * W;
              F v = vr[0];
              for (int64_t j = 1; j < nt; ++j) v += vr[j * dw];
              o[oh * OW] = v;
            }
          }
        }
      }
      if (kind == PKind::Avg) {
        if constexpr (std::is_same_v<T, F>) {
          r.mul(yo, out, scale.data() + od * n_all, n_all);
        } else {
          const F* sc = scale.data() + od * n_all;
          for (int64_t i = 0; i < n_all; ++i) yo[i] = store_any<T, F>(out[i] * sc[i], dtype);
        }
      } else if (kind == PKind::Max) {
        if constexpr (!std::is_same_v<T, F>) {
          for (int64_t i = 0; i < n_all; ++i) yo[i] = store_any<T, F>(out[i], dtype);
        }
      } else {
        for (int64_t i = 0; i < n_all; ++i) yo[i] = finish<T, F>(out[i], 1);
      }
    }
  }

  // MaxPool with Indices: the first largest (NaN ignored) in row-major
  // window order; flat indices over the whole input, the spatial part
  // row-major (storage_order 0) or column-major (1).
  template <class T, class F>
  void max_with_indices(const Geometry& g, const AxisMap*, const F* src, T* yp, int64_t* ip, int64_t base) const {
    const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
    int64_t o = 0;
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
          F best = std::numeric_limits<F>::quiet_NaN();
          int64_t bi = -1, bd = 0, bh = 0, bw = 0;
          for (int64_t jd = 0; jd < g.k[0]; ++jd) {
            const int64_t id = od * g.s[0] - g.pb[0] + jd * g.d[0];
            if (id < 0 || id >= D) continue;
            for (int64_t jh = 0; jh < g.k[1]; ++jh) {
              const int64_t ih = oh * g.s[1] - g.pb[1] + jh * g.d[1];
              if (ih < 0 || ih >= H) continue;
              for (int64_t jw = 0; jw < g.k[2]; ++jw) {
                const int64_t iw = ow * g.s[2] - g.pb[2] + jw * g.d[2];
                if (iw < 0 || iw >= W) continue;
                const F v = src[(id * H + ih) * W + iw];
                if (bi < 0 || (!std::isnan(v) && (std::isnan(best) || v > best))) {
                  best = v;
                  bi = 1;
                  bd = id;
                  bh = ih;
                  bw = iw;
                }
              }
            }
          }
          yp[o] = store_any<T, F>(best, dtype);
          // Column-major over the spatial axes as the input names them
          // (the unit axes in front contribute nothing).
          const int64_t sidx = storage_order ? (bd + bh * D + bw * D * H) : (bd * H + bh) * W + bw;
          ip[o] = base + sidx;
        }
  }
};

bool parse_pool(const olc_node_info* node, Pool* k, std::string* error) {
  k->op = node->op_type;
  const int64_t v = node->opset;
  std::vector<const char*> allowed;
  if (!k->global) {
    allowed = {"auto_pad", "kernel_shape", "pads", "strides"};
    if (k->kind == PKind::Max) {
      if (v >= 8) allowed.push_back("storage_order");
      if (v >= 10) allowed.insert(allowed.end(), {"ceil_mode", "dilations"});
    } else if (k->kind == PKind::Avg) {
      if (v >= 7) allowed.push_back("count_include_pad");
      if (v >= 10) allowed.push_back("ceil_mode");
      if (v >= 19) allowed.push_back("dilations");
    } else {
      allowed.push_back("p");
      if (v >= 18) allowed.insert(allowed.end(), {"ceil_mode", "dilations"});
    }
  } else if (k->kind == PKind::Lp) {
    allowed = {"p"};
  }
  allowed.push_back(nullptr);
  if (!check_attr_names(node, allowed.data(), error)) return false;
  k->dtype = node->input_dtypes[0];
  switch (k->dtype) {
    case OLC_DTYPE_FLOAT: case OLC_DTYPE_DOUBLE: case OLC_DTYPE_FLOAT16: break;
    case OLC_DTYPE_BFLOAT16:
      if (v < 22) {
        *error = "bfloat16 joins the pooling schemas at opset 22";
        return false;
      }
      break;
    case OLC_DTYPE_INT8: case OLC_DTYPE_UINT8:
      if (k->kind == PKind::Max && !k->global && v >= 12) break;
      [[fallthrough]];
    default:
      *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
      return false;
  }
  if (k->kind == PKind::Lp) {
    if (const olc_attribute* a = find_attr(node, "p")) {
      if (a->type == OLC_ATTR_INT) k->p = static_cast<double>(a->i);
      else if (a->type == OLC_ATTR_FLOAT) k->p = a->f;
      else {
        *error = "attribute 'p' must be a number";
        return false;
      }
      if (!(k->p > 0) || !std::isfinite(k->p)) {
        *error = strf("attribute 'p' must be positive, got %g", k->p);
        return false;
      }
    }
  }
  if (k->global) return true;
  bool has_k = false;
  if (!attr_ints(node, "kernel_shape", &k->kernel, &has_k, error) ||
      !attr_ints(node, "strides", &k->strides, &k->has_strides, error) ||
      !attr_ints(node, "pads", &k->pads, &k->has_pads, error) ||
      !attr_ints(node, "dilations", &k->dilations, &k->has_dilations, error) ||
      !attr_int(node, "ceil_mode", 0, &k->ceil_mode, error) ||
      !attr_int(node, "count_include_pad", 0, &k->count_include_pad, error) ||
      !attr_int(node, "storage_order", 0, &k->storage_order, error))
    return false;
  if (!has_k || k->kernel.empty() || k->kernel.size() > 3) {
    *error = has_k ? strf("kernel_shape must have 1 to 3 values, it has %zu", k->kernel.size())
                   : std::string("attribute 'kernel_shape' is required");
    return false;
  }
  const size_t n = k->kernel.size();
  if (node->n_inputs >= 1 && node->input_ranks && node->input_ranks[0] >= 0 &&
      node->input_ranks[0] != static_cast<int32_t>(n) + 2) {
    *error = strf("kernel_shape has %zu values, the input has rank %d (expected %zu)", n, node->input_ranks[0], n + 2);
    return false;
  }
  for (size_t i = 0; i < n; ++i)
    if (k->kernel[i] < 1) {
      *error = strf("kernel_shape[%zu] = %lld must be positive", i, (long long)k->kernel[i]);
      return false;
    }
  if (k->has_strides) {
    if (k->strides.size() != n) {
      *error = strf("strides has %zu values, kernel_shape %zu", k->strides.size(), n);
      return false;
    }
    for (size_t i = 0; i < n; ++i)
      if (k->strides[i] < 1) {
        *error = strf("strides[%zu] = %lld must be positive", i, (long long)k->strides[i]);
        return false;
      }
  }
  if (k->has_dilations) {
    if (k->dilations.size() != n) {
      *error = strf("dilations has %zu values, kernel_shape %zu", k->dilations.size(), n);
      return false;
    }
    for (size_t i = 0; i < n; ++i)
      if (k->dilations[i] < 1) {
        *error = strf("dilations[%zu] = %lld must be positive", i, (long long)k->dilations[i]);
        return false;
      }
  }
  if (k->has_pads) {
    if (k->pads.size() != 2 * n) {
      *error = strf("pads has %zu values, expected %zu (begin and end of each of the %zu axes)", k->pads.size(), 2 * n, n);
      return false;
    }
    for (size_t i = 0; i < 2 * n; ++i) {
      if (k->pads[i] < 0) {
        *error = strf("pads[%zu] = %lld must not be negative", i, (long long)k->pads[i]);
        return false;
      }
      if (k->pads[i] >= k->kernel[i % n]) {
        *error = strf("pads[%zu] = %lld must be smaller than kernel_shape[%zu] = %lld", i, (long long)k->pads[i], i % n,
                      (long long)k->kernel[i % n]);
        return false;
      }
    }
  }
  if (const olc_attribute* a = find_attr(node, "auto_pad")) {
    const std::string s = a->type == OLC_ATTR_STRING && a->s ? a->s : "";
    if (s == "NOTSET" || s.empty()) k->auto_pad = AutoPad::NotSet;
    else if (s == "VALID") k->auto_pad = AutoPad::Valid;
    else if (s == "SAME_UPPER") k->auto_pad = AutoPad::SameUpper;
    else if (s == "SAME_LOWER") k->auto_pad = AutoPad::SameLower;
    else {
      *error = strf("attribute 'auto_pad' = \"%s\" is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", s.c_str());
      return false;
    }
  }
  if (k->ceil_mode != 0 && k->ceil_mode != 1) {
    *error = strf("attribute 'ceil_mode' must be 0 or 1, got %lld", (long long)k->ceil_mode);
    return false;
  }
  if (k->count_include_pad != 0 && k->count_include_pad != 1) {
    *error = strf("attribute 'count_include_pad' must be 0 or 1, got %lld", (long long)k->count_include_pad);
    return false;
  }
  if (k->storage_order != 0 && k->storage_order != 1) {
    *error = strf("attribute 'storage_order' must be 0 or 1, got %lld", (long long)k->storage_order);
    return false;
  }
  k->indices = k->kind == PKind::Max && node->n_outputs >= 2 && node->opset >= 8;
  return true;
}

Kernel* make_pool(const olc_node_info* node, PKind kind, bool global, std::string* error) {
  if (node->n_inputs != 1) {
    *error = "expects one input";
    return nullptr;
  }
  auto k = std::make_unique<Pool>();
  k->kind = kind;
  k->global = global;
  if (!parse_pool(node, k.get(), error)) return nullptr;
  k->isa = pick_pool_rows();
  return k.release();
}

}  // namespace

Kernel* make_max_pool(const olc_node_info* n, std::string* e) { return make_pool(n, PKind::Max, false, e); }
Kernel* make_average_pool(const olc_node_info* n, std::string* e) { return make_pool(n, PKind::Avg, false, e); }
Kernel* make_lp_pool(const olc_node_info* n, std::string* e) { return make_pool(n, PKind::Lp, false, e); }
Kernel* make_global_max_pool(const olc_node_info* n, std::string* e) { return make_pool(n, PKind::Max, true, e); }
Kernel* make_global_average_pool(const olc_node_info* n, std::string* e) { return make_pool(n, PKind::Avg, true, e); }
Kernel* make_global_lp_pool(const olc_node_info* n, std::string* e) { return make_pool(n, PKind::Lp, true, e); }

}  // namespace olc_tn
