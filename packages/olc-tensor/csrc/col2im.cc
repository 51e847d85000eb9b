// Col2Im (opset 18) and MaxUnpool (9, 11, 22).
//
// Col2Im: input [N, C * prod(block), L] -> [N, C, *image_shape] at any
// number of spatial axes, with dilations, pads and strides. Each (n, c)
// plane is one task: the plane is zeroed, then every kernel offset adds its
// row of L block values at their image positions (positions in the padding
// are dropped). Offsets go in order, so each image element sums its
// contributions in increasing offset order, as onnx.reference does (float32
// gives the same bits). Along the innermost axis a unit stride is a
// contiguous SIMD row add. float16/bfloat16 accumulate in float32 and round
// once; integers wrap.
//
// MaxUnpool: the output (output_shape, or the shape the attributes infer:
// (in - 1) * stride - pads + kernel per axis) is zero but for Y[I[i]] =
// X[i]. The indices are flat over the inferred shape, whole-tensor (as
// MaxPool's Indices), and with a larger output_shape the inferred block sits
// at its start, each axis padded at the end (as onnx.reference and the node
// suite; onnxruntime reads the indices as flat over output_shape itself, the
// same whenever output_shape is the inferred shape). Every index is checked
// before it is used and a bad one fails the run (the output buffer, new and
// the runtime's, is then dropped unseen); a duplicate index keeps the last
// value in X's order. When every index of a plane stays in that plane,
// planes run in parallel.
#include <algorithm>
#include <atomic>
#include <memory>

#include "common.h"
#include "registry.h"
#include "sample_plan.h"

namespace olc_tn {
namespace {

SampleF32 pick_sample() {
  const int32_t level = g_api->simd_level();
  return level >= OLC_SIMD_AVX512 ? avx512::sample_f32()
         : level >= OLC_SIMD_AVX2 ? avx2::sample_f32()
                                  : scalar::sample_f32();
}

bool read_shape_input(const olc_tensor& t, const char* what, std::vector<int64_t>* out, std::string* err) {
  if (t.dtype != OLC_DTYPE_INT64) {
    *err = strf("input '%s' must be int64, got %s", what, olc_dtype_name(t.dtype));
    return false;
  }
  return read_int_tensor(t, (std::string("input '") + what + "'").c_str(), out, err);
}

// ------------------------------------------------------------------- Col2Im

struct Col2ImGeom {
  int r = 0;
  int64_t N = 0, C = 0, K = 0, L = 0, plane = 1;
  std::vector<int64_t> image, block, dil, pb, stride, nblocks;
};

class Col2Im final : public Kernel {
 public:
  int32_t dtype = 0;
  std::vector<int64_t> dilations, pads, strides;
  bool has_dil = false, has_pads = false, has_strides = false;
  SampleF32 isa{};

  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 3 || n_out != 1) return fail(ctx, "unexpected number of inputs (%d) or outputs (%d)", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    if (checked_count(x) < 0) return fail(ctx, "the input has a negative dimension, too many elements or no data");
    Col2ImGeom g;
    std::string err;
    if (!geometry(x, in[1], in[2], &g, &err)) return fail(ctx, "%s", err.c_str());
    std::vector<int64_t> oshape = {g.N, g.C};
    oshape.insert(oshape.end(), g.image.begin(), g.image.end());
    void* y = g_api->allocate_output(ctx, 0, dtype, static_cast<int32_t>(oshape.size()), oshape.data());
    const int64_t total = g.N * g.C * g.plane;
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const int64_t pmin = parallel_min_bytes("Col2Im");
    const bool half = dtype == OLC_DTYPE_FLOAT16 || dtype == OLC_DTYPE_BFLOAT16;
    g_api->record_usage_detail(ctx, dtype == OLC_DTYPE_FLOAT || half ? isa.isa : "scalar");
    switch (dtype) {
      case OLC_DTYPE_FLOAT: fold<float>(ctx, g, static_cast<const float*>(x.data), static_cast<float*>(y), pmin); break;
      case OLC_DTYPE_DOUBLE: fold<double>(ctx, g, static_cast<const double*>(x.data), static_cast<double*>(y), pmin); break;
      case OLC_DTYPE_FLOAT16: case OLC_DTYPE_BFLOAT16: {
        std::vector<float> xb, yb(static_cast<size_t>(total));
        const float* xs = widen_f32(ctx, dtype, x.data, g.N * g.C * g.K * g.L, &xb, pmin);
        fold<float>(ctx, g, xs, yb.data(), pmin);
        narrow_f32(ctx, dtype, yb.data(), y, total, pmin);
        break;
      }
      case OLC_DTYPE_INT8: case OLC_DTYPE_UINT8: fold<uint8_t>(ctx, g, static_cast<const uint8_t*>(x.data), static_cast<uint8_t*>(y), pmin); break;
      case OLC_DTYPE_INT16: case OLC_DTYPE_UINT16: fold<uint16_t>(ctx, g, static_cast<const uint16_t*>(x.data), static_cast<uint16_t*>(y), pmin); break;
      case OLC_DTYPE_INT32: case OLC_DTYPE_UINT32: fold<uint32_t>(ctx, g, static_cast<const uint32_t*>(x.data), static_cast<uint32_t*>(y), pmin); break;
      default: fold<uint64_t>(ctx, g, static_cast<const uint64_t*>(x.data), static_cast<uint64_t*>(y), pmin); break;
    }
    return OLC_OK;
  }

  bool geometry(const olc_tensor& x, const olc_tensor& image, const olc_tensor& block, Col2ImGeom* g,
                std::string* err) const {
    if (x.ndim != 3) {
      *err = strf("input must be 3-D [N, C * prod(block_shape), L], it is %s", shape_str(x.shape, x.ndim).c_str());
      return false;
    }
    if (!read_shape_input(image, "image_shape", &g->image, err) || !read_shape_input(block, "block_shape", &g->block, err))
      return false;
    g->r = static_cast<int>(g->image.size());
    const size_t r = g->image.size();
    if (r == 0 || g->block.size() != r) {
      *err = strf("image_shape (%zu values) and block_shape (%zu values) must have the same, non-zero length", r,
                  g->block.size());
      return false;
    }
    if ((has_dil && dilations.size() != r) || (has_strides && strides.size() != r) || (has_pads && pads.size() != 2 * r)) {
      *err = strf("dilations (%zu), strides (%zu) and pads (%zu) must have %zu, %zu and %zu values for %zu spatial axes",
                  dilations.size(), strides.size(), pads.size(), r, r, 2 * r, r);
      return false;
    }
    g->N = x.shape[0];
    g->K = 1;
    g->plane = 1;
    g->L = 1;
    for (size_t a = 0; a < r; ++a) {
      if (g->block[a] < 1 || g->image[a] < 0) {
        *err = strf("block_shape[%zu] = %lld must be positive and image_shape[%zu] = %lld not negative", a,
                    (long long)g->block[a], a, (long long)g->image[a]);
        return false;
      }
      const int64_t d = has_dil ? dilations[a] : 1, s = has_strides ? strides[a] : 1;
      const int64_t p0 = has_pads ? pads[a] : 0, p1 = has_pads ? pads[a + r] : 0;
      const int64_t span = g->image[a] + p0 + p1 - d * (g->block[a] - 1) - 1;
      if (span < 0) {
        *err = strf("spatial axis %zu: the block (%lld with dilation) is larger than the padded image (%lld)", a,
                    (long long)(d * (g->block[a] - 1) + 1), (long long)(g->image[a] + p0 + p1));
        return false;
      }
      g->dil.push_back(d);
      g->stride.push_back(s);
      g->pb.push_back(p0);
      g->nblocks.push_back(span / s + 1);
      g->K *= g->block[a];
      g->plane *= g->image[a];
      g->L *= g->nblocks[a];
    }
    if (x.shape[1] % g->K != 0) {
      *err = strf("input dimension 1 (%lld) is not a multiple of prod(block_shape) = %lld", (long long)x.shape[1],
                  (long long)g->K);
      return false;
    }
    g->C = x.shape[1] / g->K;
    if (x.shape[2] != g->L) {
      *err = strf("input dimension 2 (%lld) must be the number of blocks, %lld", (long long)x.shape[2], (long long)g->L);
      return false;
    }
    return true;
  }

  // dst[r * dst_stride + i * stride] += src[r * src_stride + i], i < n, r < rows.
  template <class T>
  void add_block(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t n, int64_t stride,
                 int64_t rows) const {
    if constexpr (std::is_same_v<T, float>) {
      if (stride == 1) {
        isa.add_rows(dst, dst_stride, src, src_stride, n, rows);
        return;
      }
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i) dst[r * dst_stride + i * stride] += src[r * src_stride + i];  // unsigned wrap
  }

  template <class T>
  void fold(olc_context* ctx, const Col2ImGeom& g, const T* x, T* y, int64_t pmin) const {
    const int r = g.r, last = r - 1;
    const int64_t S = g.stride[last];
    // Image strides and block-grid strides of each axis.
    std::vector<int64_t> istr(static_cast<size_t>(r)), cstr(static_cast<size_t>(r));
    int64_t si = 1, sc = 1;
    for (int a = r - 1; a >= 0; --a) {
      istr[a] = si;
      cstr[a] = sc;
      si *= g.image[a];
      sc *= g.nblocks[a];
    }
    const int64_t es = static_cast<int64_t>(sizeof(T));
    par_for(ctx, g.N * g.C, 1, g.N * g.C * g.K * g.L * es, pmin, [&](int64_t b, int64_t e) {
      std::vector<int64_t> koff(static_cast<size_t>(r)), p0(static_cast<size_t>(r)), lo(static_cast<size_t>(r)),
          hi(static_cast<size_t>(r)), j(static_cast<size_t>(r));
      for (int64_t item = b; item < e; ++item) {
        T* yp = y + item * g.plane;
        std::fill(yp, yp + g.plane, T(0));
        for (int64_t k = 0; k < g.K; ++k) {
          // Kernel offset k as a multi-index (row-major over block_shape);
          // per axis, block j lands on j * stride + p0, inside the image
          // for j in [lo, hi).
          int64_t rem = k;
          bool empty = false;
          for (int a = r - 1; a >= 0; --a) {
            koff[a] = rem % g.block[a];
            rem /= g.block[a];
            const int64_t s = g.stride[a];
            p0[a] = koff[a] * g.dil[a] - g.pb[a];
            lo[a] = p0[a] >= 0 ? 0 : (-p0[a] + s - 1) / s;
            hi[a] = g.image[a] - p0[a] <= 0 ? 0 : std::min(g.nblocks[a], (g.image[a] - 1 - p0[a]) / s + 1);
            empty = empty || hi[a] <= lo[a];
          }
          if (empty) continue;
          const T* col = x + (item * g.K + k) * g.L + lo[last];
          T* dst = yp + p0[last] + lo[last] * S;
          const int64_t n = hi[last] - lo[last];
          // The axis before the innermost is the rows of one block call; an
          // odometer runs over the axes before it.
          const int rows_axis = last - 1;
          const int64_t rows = rows_axis >= 0 ? hi[rows_axis] - lo[rows_axis] : 1;
          const int64_t dstr = rows_axis >= 0 ? g.stride[rows_axis] * istr[rows_axis] : 0;
          const int64_t cstr_r = rows_axis >= 0 ? cstr[rows_axis] : 0;
          for (int a = 0; a < last; ++a) j[a] = lo[a];
          for (;;) {
            int64_t io = 0, co = 0;
            for (int a = 0; a < last; ++a) {
              io += (j[a] * g.stride[a] + p0[a]) * istr[a];
              co += j[a] * cstr[a];
            }
            add_block<T>(dst + io, dstr, col + co, cstr_r, n, S, rows);
            int a = rows_axis - 1;  // odometer over the axes before the rows axis
            for (; a >= 0; --a) {
              if (++j[a] < hi[a]) break;
              j[a] = lo[a];
            }
            if (a < 0) break;
          }
        }
      }
    });
  }
};

Kernel* make_col2im_kernel(const olc_node_info* node, std::string* error) {
  static const char* const allowed[] = {"dilations", "pads", "strides", nullptr};
  if (!check_attr_names(node, allowed, error)) return nullptr;
  if (node->n_inputs != 3) {
    *error = strf("expects 3 inputs (input, image_shape, block_shape), got %d", node->n_inputs);
    return nullptr;
  }
  auto k = std::make_unique<Col2Im>();
  k->dtype = node->input_dtypes[0];
  switch (k->dtype) {
    case OLC_DTYPE_FLOAT: case OLC_DTYPE_DOUBLE: case OLC_DTYPE_FLOAT16: case OLC_DTYPE_BFLOAT16:
    case OLC_DTYPE_INT8: case OLC_DTYPE_UINT8: case OLC_DTYPE_INT16: case OLC_DTYPE_UINT16:
    case OLC_DTYPE_INT32: case OLC_DTYPE_UINT32: case OLC_DTYPE_INT64: case OLC_DTYPE_UINT64: break;
    default:
      *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
      return nullptr;
  }
  if (!attr_ints(node, "dilations", &k->dilations, &k->has_dil, error) ||
      !attr_ints(node, "pads", &k->pads, &k->has_pads, error) ||
      !attr_ints(node, "strides", &k->strides, &k->has_strides, error))
    return nullptr;
  for (int64_t v : k->dilations)
    if (v < 1) {
      *error = strf("dilations must be positive, got %lld", (long long)v);
      return nullptr;
    }
  for (int64_t v : k->strides)
    if (v < 1) {
      *error = strf("strides must be positive, got %lld", (long long)v);
      return nullptr;
    }
  for (int64_t v : k->pads)
    if (v < 0) {
      *error = strf("pads must not be negative, got %lld", (long long)v);
      return nullptr;
    }
  if (k->has_pads && k->pads.size() % 2 != 0) {
    *error = strf("pads has %zu values; it needs a begin and an end per axis", k->pads.size());
    return nullptr;
  }
  k->isa = pick_sample();
  return k.release();
}

// ----------------------------------------------------------------- MaxUnpool

class MaxUnpool final : public Kernel {
 public:
  int32_t dtype = 0;
  SampleF32 isa;  // for its index check
  std::vector<int64_t> kernel, pads, strides;
  bool has_pads = false, has_strides = false;

  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in < 2 || n_in > 3 || n_out != 1)
      return fail(ctx, "unexpected number of inputs (%d) or outputs (%d)", n_in, n_out);
    const olc_tensor& x = in[0];
    const olc_tensor& ind = in[1];
    if (x.dtype != dtype)
      return fail(ctx, "input X has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    if (ind.dtype != OLC_DTYPE_INT64) return fail(ctx, "input I must be int64, got %s", olc_dtype_name(ind.dtype));
    if (checked_count(x) < 0 || checked_count(ind) < 0)
      return fail(ctx, "an input has a negative dimension, too many elements or no data");
    const int rank = x.ndim;
    const size_t sp = kernel.size();
    if (rank != static_cast<int>(sp) + 2)
      return fail(ctx, "X is %s; kernel_shape has %zu values, so X must have rank %zu", shape_str(x.shape, rank).c_str(),
                  sp, sp + 2);
    if (ind.ndim != rank || !std::equal(x.shape, x.shape + rank, ind.shape))
      return fail(ctx, "I is %s, it must have X's shape %s", shape_str(ind.shape, ind.ndim).c_str(),
                  shape_str(x.shape, rank).c_str());
    std::vector<int64_t> inferred(x.shape, x.shape + rank);
    for (size_t a = 0; a < sp; ++a) {
      const int64_t s = has_strides ? strides[a] : 1;
      const int64_t p = has_pads ? pads[a] + pads[a + sp] : 0;
      inferred[2 + a] = (x.shape[2 + a] - 1) * s - p + kernel[a];
      if (inferred[2 + a] < 0)
        return fail(ctx, "spatial axis %zu: the unpooled size (%lld - 1) * %lld - %lld + %lld is negative", a,
                    (long long)x.shape[2 + a], (long long)s, (long long)p, (long long)kernel[a]);
    }
    std::vector<int64_t> oshape = inferred;
    std::string err;
    if (n_in == 3 && in[2].dtype != OLC_DTYPE_UNDEFINED) {
      if (in[2].dtype != OLC_DTYPE_INT64 || !read_int_tensor(in[2], "input 'output_shape'", &oshape, &err))
        return fail(ctx, "%s", err.empty() ? "input 'output_shape' must be int64" : err.c_str());
      if (static_cast<int>(oshape.size()) != rank)
        return fail(ctx, "output_shape has %zu values, X has rank %d", oshape.size(), rank);
      if (oshape[0] != x.shape[0] || oshape[1] != x.shape[1])
        return fail(ctx, "output_shape %s must keep X's N and C (%lld, %lld)",
                    shape_str(oshape.data(), rank).c_str(), (long long)x.shape[0], (long long)x.shape[1]);
      for (int a = 2; a < rank; ++a)
        if (oshape[a] < inferred[a])
          return fail(ctx, "output_shape %s is smaller than the unpooled shape %s",
                      shape_str(oshape.data(), rank).c_str(), shape_str(inferred.data(), rank).c_str());
    }
    int64_t total_in = 1, total_inf = 1, total_out = 1;
    for (int a = 0; a < rank; ++a) {
      total_in *= x.shape[a];
      total_inf *= inferred[a];
      total_out *= oshape[a];
    }
    const int64_t planes = x.shape[0] * x.shape[1];
    const int64_t in_plane = planes ? total_in / planes : 0, inf_plane = planes ? total_inf / planes : 0;
    const int64_t* I = static_cast<const int64_t*>(ind.data);
    void* y = g_api->allocate_output(ctx, 0, dtype, rank, oshape.data());
    if (!y && total_out > 0) return OLC_ERROR;
    if (total_out == 0) return OLC_OK;
    const bool same = oshape == inferred;
    const int64_t out_plane = total_out / planes;
    auto scatter = [&](int64_t p0, int64_t p1, bool local) {
      // Output planes [p0, p1) zeroed, then the values of input planes [p0, p1).
      switch (olc_dtype_size(dtype)) {
        case 2: place<uint16_t>(x.data, I, y, p0, p1, in_plane, out_plane, same, local, inferred, oshape); break;
        case 4: place<uint32_t>(x.data, I, y, p0, p1, in_plane, out_plane, same, local, inferred, oshape); break;
        default: place<uint64_t>(x.data, I, y, p0, p1, in_plane, out_plane, same, local, inferred, oshape); break;
      }
    };
    // The usual case, every index inside its own plane: planes in parallel,
    // each checked (one vectorized pass) right before its scatter, while its
    // indices are in cache; a plane that fails is left unwritten. A separate
    // check of every index before the output exists read the indices once
    // more from memory: a quarter of the one-thread time. The buffer is the
    // runtime's and new, so a failed run still shows no output.
    std::atomic<bool> stray{false};
    const int64_t es = static_cast<int64_t>(olc_dtype_size(dtype));
    par_for(ctx, planes, 1, total_out * es, parallel_min_bytes("MaxUnpool"), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        if (isa.within(I + p * in_plane, in_plane, p * inf_plane, inf_plane)) {
          scatter(p, p + 1, true);
        } else {
          stray.store(true, std::memory_order_relaxed);
        }
      }
    });
    if (!stray.load()) return OLC_OK;
    // Some index leaves its plane: an error unless it is inside the
    // unpooled shape; then every plane again, in order, indices crossing planes.
    for (int64_t i = 0; i < total_in; ++i) {
      if (I[i] < 0 || I[i] >= total_inf)
        return fail(ctx, "I[%lld] = %lld is outside [0, %lld) (the unpooled shape %s)", (long long)i,
                    (long long)I[i], (long long)total_inf, shape_str(inferred.data(), rank).c_str());
    }
    scatter(0, planes, false);
    return OLC_OK;
  }

  template <class U>
  static void place(const void* xv, const int64_t* I, void* yv, int64_t p0, int64_t p1, int64_t in_plane,
                    int64_t out_plane, bool same, bool local, const std::vector<int64_t>& inf, const std::vector<int64_t>& out) {
    const U* x = static_cast<const U*>(xv);
    U* y = static_cast<U*>(yv);
    // Plane by plane, so the zeroed plane is still in cache when its values land.
    for (int64_t p = p0; p < p1; ++p) {
      std::fill(y + p * out_plane, y + (p + 1) * out_plane, U(0));
      if (local) scatter_values(x, I, y, p * in_plane, (p + 1) * in_plane, same, inf, out);
    }
    // Indices that cross planes: every plane zeroed first.
    if (!local) scatter_values(x, I, y, p0 * in_plane, p1 * in_plane, same, inf, out);
  }

  // y[I[i]] = x[i] for i in [i0, i1), I's flat indices over the inferred
  // shape remapped to the output's unless they are the same shape (the
  // usual case, its loop kept free of the remapping).
  template <class U>
  static void scatter_values(const U* x, const int64_t* I, U* y, int64_t i0, int64_t i1, bool same,
                             const std::vector<int64_t>& inf, const std::vector<int64_t>& out) {
    if (same) {
      for (int64_t i = i0; i < i1; ++i) y[I[i]] = x[i];
    } else {
      for (int64_t i = i0; i < i1; ++i) y[to_output(I[i], inf, out)] = x[i];
    }
  }

  // A flat index over the inferred shape as a flat index over the output
  // (the inferred block at the start of every axis).
  static int64_t to_output(int64_t i, const std::vector<int64_t>& inf, const std::vector<int64_t>& out) {
    int64_t o = 0, mul = 1;
    for (int a = static_cast<int>(inf.size()) - 1; a >= 0; --a) {
      o += (i % inf[a]) * mul;
      i /= inf[a];
      mul *= out[a];
    }
    return o;
  }
};

Kernel* make_max_unpool_kernel(const olc_node_info* node, std::string* error) {
  static const char* const allowed[] = {"kernel_shape", "pads", "strides", nullptr};
  if (!check_attr_names(node, allowed, error)) return nullptr;
  if (node->n_inputs < 2 || node->n_inputs > 3) {
    *error = strf("expects 2 or 3 inputs (X, I, output_shape), got %d", node->n_inputs);
    return nullptr;
  }
  auto k = std::make_unique<MaxUnpool>();
  k->isa = pick_sample();
  k->dtype = node->input_dtypes[0];
  switch (k->dtype) {
    case OLC_DTYPE_FLOAT: case OLC_DTYPE_DOUBLE: case OLC_DTYPE_FLOAT16: break;
    case OLC_DTYPE_BFLOAT16:
      if (node->opset >= 22) break;
      [[fallthrough]];
    default:
      *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
      return nullptr;
  }
  bool has_k = false;
  if (!attr_ints(node, "kernel_shape", &k->kernel, &has_k, error) ||
      !attr_ints(node, "pads", &k->pads, &k->has_pads, error) ||
      !attr_ints(node, "strides", &k->strides, &k->has_strides, error))
    return nullptr;
  const size_t n = k->kernel.size();
  if (!has_k || n == 0) {
    *error = "attribute 'kernel_shape' is required";
    return nullptr;
  }
  for (int64_t v : k->kernel)
    if (v < 1) {
      *error = strf("kernel_shape values must be positive, got %lld", (long long)v);
      return nullptr;
    }
  if ((k->has_strides && k->strides.size() != n) || (k->has_pads && k->pads.size() != 2 * n)) {
    *error = strf("strides (%zu values) and pads (%zu) must have %zu and %zu values for kernel_shape's %zu axes",
                  k->strides.size(), k->pads.size(), n, 2 * n, n);
    return nullptr;
  }
  for (int64_t v : k->strides)
    if (v < 1) {
      *error = strf("strides must be positive, got %lld", (long long)v);
      return nullptr;
    }
  for (int64_t v : k->pads)
    if (v < 0) {
      *error = strf("pads must not be negative, got %lld", (long long)v);
      return nullptr;
    }
  if (node->input_ranks && node->input_ranks[0] >= 0 && node->input_ranks[0] != static_cast<int32_t>(n) + 2) {
    *error = strf("kernel_shape has %zu values, X has rank %d (expected %zu)", n, node->input_ranks[0], n + 2);
    return nullptr;
  }
  return k.release();
}

}  // namespace

Kernel* make_col2im(const olc_node_info* n, std::string* e) { return make_col2im_kernel(n, e); }
Kernel* make_max_unpool(const olc_node_info* n, std::string* e) { return make_max_unpool_kernel(n, e); }

}  // namespace olc_tn
