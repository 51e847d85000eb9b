// Data movers that only copy bytes: Gather, GatherElements, Concat, Split,
// Slice, Expand, Tile. Each validates every input (shapes, indices, sizes)
// before allocating any output, then copies by element size (1/2/4/8
// bytes), splitting large copies across the session executor.
#include <algorithm>
#include <memory>
#include <limits>
#include <new>

#include "common.h"
#include "registry.h"
#include "strided.h"

namespace olc_tn {
namespace {

int64_t prod(const int64_t* d, int b, int e) {
  int64_t p = 1;
  for (int i = b; i < e; ++i) p *= d[i];
  return p;
}

// Normalizes an axis against a rank; false when out of range.
bool norm_axis(int64_t axis, int rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

// x as a strided view of itself: its shape, row-major strides in elements.
void contiguous_view(const olc_tensor& x, int64_t* shape, int64_t* stride) {
  int64_t st = 1;
  for (int d = x.ndim - 1; d >= 0; --d) {
    shape[d] = x.shape[d];
    stride[d] = st;
    st *= x.shape[d];
  }
}

bool check_input(olc_context* ctx, const olc_tensor* in, int idx, int32_t dtype) {
  if (dtype != OLC_DTYPE_UNDEFINED && in[idx].dtype != dtype) {
    fail(ctx, "input %d has type %s, the kernel was created for %s", idx, olc_dtype_name(in[idx].dtype),
         olc_dtype_name(dtype));
    return false;
  }
  if (checked_count(in[idx]) < 0) {
    fail(ctx, "input %d has a negative dimension, too many elements or no data", idx);
    return false;
  }
  return true;
}

// Reads index element i of an int32/int64 tensor.
inline int64_t index_at(const olc_tensor& t, int64_t i) {
  return t.dtype == OLC_DTYPE_INT64 ? static_cast<const int64_t*>(t.data)[i]
                                    : static_cast<const int32_t*>(t.data)[i];
}

// ------------------------------------------------------------------ Gather

class Gather final : public Kernel {
 public:
  int32_t dtype;
  int64_t axis;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 2 || n_out != 1) return fail(ctx, "expects 2 inputs and 1 output, got %d and %d", n_in, n_out);
    if (!check_input(ctx, in, 0, dtype) || !check_input(ctx, in, 1, OLC_DTYPE_UNDEFINED)) return OLC_ERROR;
    const olc_tensor& x = in[0];
    const olc_tensor& idx = in[1];
    if (idx.dtype != OLC_DTYPE_INT32 && idx.dtype != OLC_DTYPE_INT64)
      return fail(ctx, "indices must be int32 or int64, got %s", olc_dtype_name(idx.dtype));
    int64_t ax;
    if (!norm_axis(axis, x.ndim, &ax))
      return fail(ctx, "axis %lld is out of range for data of rank %d", (long long)axis, x.ndim);
    const int out_rank = x.ndim - 1 + idx.ndim;
    if (out_rank > kMaxRank) return fail(ctx, "output rank %d is too large", out_rank);
    const int64_t outer = prod(x.shape, 0, (int)ax);
    const int64_t n = x.shape[ax];
    const int64_t inner = prod(x.shape, (int)ax + 1, x.ndim);
    const int64_t m = checked_count(idx);
    // Every index is checked before the output exists.
    std::vector<int64_t> rows(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      int64_t v = index_at(idx, i);
      if (v < -n || v >= n)
        return fail(ctx, "index %lld (at flat position %lld) is out of range for axis %lld of size %lld",
                    (long long)v, (long long)i, (long long)ax, (long long)n);
      rows[i] = v < 0 ? v + n : v;
    }
    int64_t oshape[kMaxRank];
    int r = 0;
    for (int i = 0; i < ax; ++i) oshape[r++] = x.shape[i];
    for (int i = 0; i < idx.ndim; ++i) oshape[r++] = idx.shape[i];
    for (int i = (int)ax + 1; i < x.ndim; ++i) oshape[r++] = x.shape[i];
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, x.dtype, r, oshape));
    const int64_t total = outer * m * inner;
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const size_t es = olc_dtype_size(x.dtype);
    const size_t row_bytes = static_cast<size_t>(inner) * es;
    const char* src = static_cast<const char*>(x.data);
    const int64_t* rp = rows.data();
    // Grain: enough rows for ~16 KiB per range.
    const int64_t grain = std::max<int64_t>(1, (16 << 10) / static_cast<int64_t>(std::max<size_t>(row_bytes, 1)));
    par_for(ctx, outer * m, grain, total * static_cast<int64_t>(es), parallel_min_bytes("Gather"),
            [&](int64_t b, int64_t e) {
              for (int64_t k = b; k < e; ++k) {
                const int64_t o = k / m, j = k - o * m;
                std::memcpy(y + k * row_bytes, src + (o * n + rp[j]) * row_bytes, row_bytes);
              }
            });
    return OLC_OK;
  }
};

// ---------------------------------------------------------- GatherElements

template <class T>
void gather_elements_typed(const T* x, T* y, const olc_tensor& idx, const int64_t* dshape, int rank, int ax,
                           int64_t lo, int64_t hi) {
  // Output element k at multi-index i (shape of indices): x[i with i[ax] = index].
  int64_t dstride[kMaxRank];
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    dstride[d] = s;
    s *= dshape[d];
  }
  const int64_t n_ax = dshape[ax];
  for (int64_t k = lo; k < hi; ++k) {
    int64_t rem = k, off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t id = rem % idx.shape[d];
      rem /= idx.shape[d];
      if (d != ax) off += id * dstride[d];
    }
    int64_t v = index_at(idx, k);
    if (v < 0) v += n_ax;
    y[k] = x[off + v * dstride[ax]];
  }
}

class GatherElements final : public Kernel {
 public:
  int32_t dtype;
  int64_t axis;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 2 || n_out != 1) return fail(ctx, "expects 2 inputs and 1 output, got %d and %d", n_in, n_out);
    if (!check_input(ctx, in, 0, dtype) || !check_input(ctx, in, 1, OLC_DTYPE_UNDEFINED)) return OLC_ERROR;
    const olc_tensor& x = in[0];
    const olc_tensor& idx = in[1];
    if (idx.dtype != OLC_DTYPE_INT32 && idx.dtype != OLC_DTYPE_INT64)
      return fail(ctx, "indices must be int32 or int64, got %s", olc_dtype_name(idx.dtype));
    if (x.ndim < 1) return fail(ctx, "data must have rank >= 1");
    if (idx.ndim != x.ndim)
      return fail(ctx, "indices rank %d differs from data rank %d", idx.ndim, x.ndim);
    int64_t ax;
    if (!norm_axis(axis, x.ndim, &ax))
      return fail(ctx, "axis %lld is out of range for data of rank %d", (long long)axis, x.ndim);
    for (int d = 0; d < x.ndim; ++d)
      if (d != ax && idx.shape[d] > x.shape[d])
        return fail(ctx, "indices shape %s exceeds data shape %s on axis %d", shape_str(idx.shape, idx.ndim).c_str(),
                    shape_str(x.shape, x.ndim).c_str(), d);
    const int64_t m = checked_count(idx);
    const int64_t n_ax = x.shape[ax];
    for (int64_t i = 0; i < m; ++i) {
      const int64_t v = index_at(idx, i);
      if (v < -n_ax || v >= n_ax)
        return fail(ctx, "index %lld (at flat position %lld) is out of range for axis %lld of size %lld",
                    (long long)v, (long long)i, (long long)ax, (long long)n_ax);
    }
    void* y = g_api->allocate_output(ctx, 0, x.dtype, idx.ndim, idx.shape);
    if (!y && m > 0) return OLC_ERROR;
    if (m == 0) return OLC_OK;
    const size_t es = olc_dtype_size(x.dtype);
    par_for(ctx, m, 4096, m * static_cast<int64_t>(es) * 2, parallel_min_bytes("GatherElements"),
            [&](int64_t b, int64_t e) {
              switch (es) {
                case 1: gather_elements_typed(static_cast<const uint8_t*>(x.data), static_cast<uint8_t*>(y), idx, x.shape, x.ndim, (int)ax, b, e); break;
                case 2: gather_elements_typed(static_cast<const uint16_t*>(x.data), static_cast<uint16_t*>(y), idx, x.shape, x.ndim, (int)ax, b, e); break;
                case 4: gather_elements_typed(static_cast<const uint32_t*>(x.data), static_cast<uint32_t*>(y), idx, x.shape, x.ndim, (int)ax, b, e); break;
                default: gather_elements_typed(static_cast<const uint64_t*>(x.data), static_cast<uint64_t*>(y), idx, x.shape, x.ndim, (int)ax, b, e); break;
              }
            });
    return OLC_OK;
  }
};

// ------------------------------------------------------------------ Concat

// The output shape of a Concat along axis ax of n parts of one rank, part
// i's shape at shape_of(i): every dim but ax as part 0's, ax summed. false
// (after fail) when a part differs off the axis. Shared by Concat and the
// Concat of Slices, whose parts are views.
template <class ShapeOf>
bool concat_shape(olc_context* ctx, int64_t n, int rank, int64_t ax, ShapeOf shape_of, int64_t* oshape) {
  const int64_t* s0 = shape_of(0);
  for (int d = 0; d < rank; ++d) oshape[d] = s0[d];
  oshape[ax] = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t* si = shape_of(i);
    for (int d = 0; d < rank; ++d)
      if (d != ax && si[d] != s0[d]) {
        fail(ctx, "input %lld has shape %s, input 0 has shape %s: they differ on axis %d, not only on the concat "
                  "axis %lld", (long long)i, shape_str(si, rank).c_str(), shape_str(s0, rank).c_str(), d,
             (long long)ax);
        return false;
      }
    oshape[ax] += si[ax];
  }
  return true;
}

class Concat final : public Kernel {
 public:
  int32_t dtype;
  int64_t axis;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in < 1 || n_out != 1) return fail(ctx, "expects at least 1 input and 1 output, got %d and %d", n_in, n_out);
    for (int i = 0; i < n_in; ++i)
      if (!check_input(ctx, in, i, dtype)) return OLC_ERROR;
    const olc_tensor& x0 = in[0];
    const int rank = x0.ndim;
    if (rank < 1) return fail(ctx, "inputs must have rank >= 1");
    int64_t ax;
    if (!norm_axis(axis, rank, &ax))
      return fail(ctx, "axis %lld is out of range for inputs of rank %d", (long long)axis, rank);
    for (int i = 0; i < n_in; ++i)
      if (in[i].ndim != rank)
        return fail(ctx, "input %d has rank %d, input 0 has rank %d (all inputs must have the same rank)", i,
                    in[i].ndim, rank);
    int64_t oshape[kMaxRank];
    if (!concat_shape(ctx, n_in, rank, ax, [&](int64_t i) { return in[i].shape; }, oshape)) return OLC_ERROR;
    const int64_t axis_total = oshape[ax];
    const int64_t outer = prod(x0.shape, 0, (int)ax);
    const int64_t inner = prod(x0.shape, (int)ax + 1, rank);
    const int64_t total = outer * axis_total * inner;
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, x0.dtype, rank, oshape));
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const int64_t es = static_cast<int64_t>(olc_dtype_size(x0.dtype));
    const int64_t out_row = axis_total * inner * es;
    std::vector<int64_t> blk(n_in), off(n_in);
    int64_t o = 0;
    for (int i = 0; i < n_in; ++i) {
      blk[i] = in[i].shape[ax] * inner * es;
      off[i] = o;
      o += blk[i];
    }
    const int64_t bytes = total * es;
    if (outer == 1) {
      // One block per input: split each large one into chunks.
      constexpr int64_t kChunk = 64 << 10;
      std::vector<int64_t> first(n_in + 1, 0);
      for (int i = 0; i < n_in; ++i) first[i + 1] = first[i] + (blk[i] + kChunk - 1) / kChunk;
      par_for(ctx, first[n_in], 1, bytes, parallel_min_bytes("Concat"), [&](int64_t b, int64_t e) {
        for (int i = 0; i < n_in; ++i) {
          const int64_t lo = std::max(b, first[i]), hi = std::min(e, first[i + 1]);
          for (int64_t c = lo; c < hi; ++c) {
            const int64_t s = (c - first[i]) * kChunk, len = std::min(kChunk, blk[i] - s);
            std::memcpy(y + off[i] + s, static_cast<const char*>(in[i].data) + s, static_cast<size_t>(len));
          }
        }
      });
      return OLC_OK;
    }
    const int64_t grain = std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(out_row, 1));
    par_for(ctx, outer, grain, bytes, parallel_min_bytes("Concat"), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        for (int i = 0; i < n_in; ++i)
          copy_bytes(y + r * out_row + off[i], static_cast<const char*>(in[i].data) + r * blk[i],
                     static_cast<size_t>(blk[i]));
    });
    return OLC_OK;
  }
};

// ------------------------------------------------------------------- Split

class Split final : public Kernel {
 public:
  int32_t dtype;
  int64_t axis;
  int64_t opset;
  bool has_split_attr = false;
  std::vector<int64_t> split_attr;
  int64_t num_outputs = 0;  // 0: not given
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in < 1 || n_in > 2 || n_out < 1)
      return fail(ctx, "expects 1 or 2 inputs and at least 1 output, got %d and %d", n_in, n_out);
    if (!check_input(ctx, in, 0, dtype)) return OLC_ERROR;
    const olc_tensor& x = in[0];
    const int rank = x.ndim;
    int64_t ax;
    if (!norm_axis(axis, rank, &ax))
      return fail(ctx, "axis %lld is out of range for input of rank %d", (long long)axis, rank);
    const int64_t dim = x.shape[ax];
    std::vector<int64_t> sizes;
    bool given = false;
    if (n_in == 2 && in[1].dtype != OLC_DTYPE_UNDEFINED) {
      std::string err;
      if (!read_int_tensor(in[1], "input 'split'", &sizes, &err)) return fail(ctx, "%s", err.c_str());
      given = true;
    } else if (has_split_attr) {
      sizes = split_attr;
      given = true;
    }
    if (given) {
      if ((int64_t)sizes.size() != n_out)
        return fail(ctx, "invalid split sizes: %zu sizes for %d outputs", sizes.size(), n_out);
      for (size_t i = 0; i < sizes.size(); ++i)
        if (sizes[i] < 0) return fail(ctx, "invalid split sizes: size %zu is negative (%lld)", i, (long long)sizes[i]);
      int64_t sum = 0;
      bool over = false;
      for (int64_t v : sizes) {
        if (v > dim - sum) {  // sum + v > dim, without overflow
          over = true;
          break;
        }
        sum += v;
      }
      if (over || sum != dim) {
        std::string list;
        for (size_t i = 0; i < sizes.size() && i < 16; ++i) list += (i ? ", " : "") + std::to_string(sizes[i]);
        return fail(ctx, "invalid split sizes: [%s%s] %s the split axis %lld of size %lld", list.c_str(),
                    sizes.size() > 16 ? ", ..." : "", over ? "sum to more than" : "do not add up to", (long long)ax,
                    (long long)dim);
      }
    } else {
      const int64_t parts = num_outputs > 0 ? num_outputs : n_out;
      if (parts != n_out)
        return fail(ctx, "attribute num_outputs = %lld but the node has %d outputs", (long long)parts, n_out);
      if (dim % parts == 0) {
        sizes.assign(parts, dim / parts);
      } else if (opset >= 18) {
        // Chunks of ceil(dim / parts); the last one takes the remainder.
        const int64_t chunk = dim / parts + 1;
        const int64_t last = dim - chunk * (parts - 1);
        if (last < 0)
          return fail(ctx, "invalid split: axis of size %lld cannot be cut into %lld chunks of %lld",
                      (long long)dim, (long long)parts, (long long)chunk);
        sizes.assign(parts, chunk);
        sizes.back() = last;
      } else {
        return fail(ctx, "invalid split: axis %lld of size %lld does not divide into %lld equal parts",
                    (long long)ax, (long long)dim, (long long)parts);
      }
    }
    const int64_t outer = prod(x.shape, 0, (int)ax);
    const int64_t inner = prod(x.shape, (int)ax + 1, rank);
    const int64_t es = static_cast<int64_t>(olc_dtype_size(x.dtype));
    std::vector<char*> ys(n_out);
    int64_t oshape[kMaxRank];
    for (int d = 0; d < rank; ++d) oshape[d] = x.shape[d];
    for (int j = 0; j < n_out; ++j) {
      oshape[ax] = sizes[j];
      ys[j] = static_cast<char*>(g_api->allocate_output(ctx, j, x.dtype, rank, oshape));
      if (!ys[j] && outer * sizes[j] * inner > 0) return OLC_ERROR;
    }
    const int64_t total = outer * dim * inner;
    if (total == 0) return OLC_OK;
    std::vector<int64_t> blk(n_out), off(n_out);
    int64_t o = 0;
    for (int j = 0; j < n_out; ++j) {
      blk[j] = sizes[j] * inner * es;
      off[j] = o;
      o += blk[j];
    }
    const int64_t in_row = dim * inner * es;
    const char* src = static_cast<const char*>(x.data);
    const int64_t grain = std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(in_row, 1));
    if (outer == 1) {
      constexpr int64_t kChunk = 64 << 10;
      std::vector<int64_t> first(n_out + 1, 0);
      for (int j = 0; j < n_out; ++j) first[j + 1] = first[j] + (blk[j] + kChunk - 1) / kChunk;
      par_for(ctx, first[n_out], 1, total * es, parallel_min_bytes("Split"), [&](int64_t b, int64_t e) {
        for (int j = 0; j < n_out; ++j) {
          const int64_t lo = std::max(b, first[j]), hi = std::min(e, first[j + 1]);
          for (int64_t c = lo; c < hi; ++c) {
            const int64_t s = (c - first[j]) * kChunk, len = std::min(kChunk, blk[j] - s);
            std::memcpy(ys[j] + s, src + off[j] + s, static_cast<size_t>(len));
          }
        }
      });
      return OLC_OK;
    }
    par_for(ctx, outer, grain, total * es, parallel_min_bytes("Split"), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        for (int j = 0; j < n_out; ++j)
          copy_bytes(ys[j] + r * blk[j], src + r * in_row + off[j], static_cast<size_t>(blk[j]));
    });
    return OLC_OK;
  }
};

// The ending Slice, Expand and Tile share: output 0 of shape out_shape is
// the input read through a strided view (view_shape, view_stride, from
// element base), copied by strided_copy.
int32_t emit_strided_view(olc_context* ctx, const olc_tensor& x, int out_rank, const int64_t* out_shape,
                          int64_t base, int view_rank, const int64_t* view_shape, const int64_t* view_stride,
                          const char* kernel) {
  const olc_tensor probe{x.dtype, view_rank, view_shape, nullptr};
  const int64_t total = olc_element_count(&probe);
  if (total < 0) return fail(ctx, "output shape %s is too large", shape_str(out_shape, out_rank).c_str());
  void* y = g_api->allocate_output(ctx, 0, x.dtype, out_rank, out_shape);
  if (!y && total > 0) return OLC_ERROR;
  if (total == 0) return OLC_OK;
  strided_copy(ctx, olc_dtype_size(x.dtype), static_cast<const char*>(x.data), base, static_cast<char*>(y), view_rank,
               view_shape, view_stride, parallel_min_bytes(kernel));
  return OLC_OK;
}

// ------------------------------------------------------------------- Slice

// One Slice step on a strided view (shape, stride in elements, first
// element base): axis a cut to [start, end) by step, both clamped as the
// Slice schema says (negative values count from the end). Shared by Slice
// and the Concat of Slices, which applies a chain of them.
void slice_view_axis(int64_t* shape, int64_t* stride, int64_t* base, int a, int64_t start, int64_t end,
                     int64_t step) {
  const int64_t d = shape[a];
  // d >= 0 and start, end < 0 here: the sums cannot overflow.
  if (start < 0) start += d;
  if (end < 0) end += d;
  int64_t len = 0;  // an empty dim stays empty
  if (d > 0 && step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
    len = end > start ? (end - start - 1) / step + 1 : 0;
  } else if (d > 0) {
    start = std::clamp<int64_t>(start, 0, d - 1);
    end = std::clamp<int64_t>(end, -1, d - 1);
    len = start > end ? (start - end - 1) / (-step) + 1 : 0;
  }
  if (len > 0) *base += start * stride[a];
  // With two or more elements |step| < d, so the product stays within the
  // tensor's element count; a step that large otherwise may not.
  if (len > 1) stride[a] *= step;
  shape[a] = len;
}

class Slice final : public Kernel {
 public:
  int32_t dtype;
  bool legacy = false;  // opset 1-9: starts/ends/axes attributes
  std::vector<int64_t> a_starts, a_ends, a_axes;
  bool a_has_axes = false;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_out != 1) return fail(ctx, "expects 1 output, got %d", n_out);
    if (legacy ? n_in != 1 : (n_in < 3 || n_in > 5))
      return fail(ctx, "expects %s inputs, got %d", legacy ? "1" : "3 to 5", n_in);
    if (!check_input(ctx, in, 0, dtype)) return OLC_ERROR;
    const olc_tensor& x = in[0];
    const int rank = x.ndim;
    std::vector<int64_t> starts, ends, axes, steps;
    bool has_axes = false, has_steps = false;
    std::string err;
    if (legacy) {
      starts = a_starts;
      ends = a_ends;
      axes = a_axes;
      has_axes = a_has_axes;
    } else {
      if (!read_int_tensor(in[1], "input 'starts'", &starts, &err) ||
          !read_int_tensor(in[2], "input 'ends'", &ends, &err))
        return fail(ctx, "%s", err.c_str());
      if (in[1].dtype != in[2].dtype) return fail(ctx, "starts and ends must have the same type");
      if (n_in > 3 && in[3].dtype != OLC_DTYPE_UNDEFINED) {
        if (!read_int_tensor(in[3], "input 'axes'", &axes, &err)) return fail(ctx, "%s", err.c_str());
        has_axes = true;
      }
      if (n_in > 4 && in[4].dtype != OLC_DTYPE_UNDEFINED) {
        if (!read_int_tensor(in[4], "input 'steps'", &steps, &err)) return fail(ctx, "%s", err.c_str());
        has_steps = true;
      }
    }
    const size_t k = starts.size();
    if (ends.size() != k) return fail(ctx, "starts has %zu values, ends %zu", k, ends.size());
    if (has_axes && axes.size() != k) return fail(ctx, "axes has %zu values, starts %zu", axes.size(), k);
    if (has_steps && steps.size() != k) return fail(ctx, "steps has %zu values, starts %zu", steps.size(), k);
    if (!has_axes) {
      if (k > static_cast<size_t>(rank)) return fail(ctx, "%zu starts for an input of rank %d", k, rank);
      axes.resize(k);
      for (size_t i = 0; i < k; ++i) axes[i] = static_cast<int64_t>(i);
    }
    if (!has_steps) steps.assign(k, 1);
    int64_t vshape[kMaxRank], vstride[kMaxRank], base = 0;
    contiguous_view(x, vshape, vstride);
    bool seen[kMaxRank] = {};
    for (size_t i = 0; i < k; ++i) {
      int64_t a;
      if (!norm_axis(axes[i], rank, &a))
        return fail(ctx, "axis %lld is out of range for an input of rank %d", (long long)axes[i], rank);
      if (seen[a]) return fail(ctx, "axis %lld is repeated in axes", (long long)a);
      seen[a] = true;
      if (steps[i] == 0) return fail(ctx, "step for axis %lld is 0", (long long)a);
      slice_view_axis(vshape, vstride, &base, static_cast<int>(a), starts[i], ends[i], steps[i]);
    }
    return emit_strided_view(ctx, x, rank, vshape, base, rank, vshape, vstride, "Slice");
  }
};

// -------------------------------------------------------- Concat of Slices

// A Concat whose every input is a chain of Slices of one tensor x, as the
// olc-tensor graph pass restates it (domain olc.tensor, x its one input):
// each input is x read through the strided view its chain makes, copied
// straight into its place in the output. YOLOv5's space-to-depth (eight
// Slices and a Concat) wrote and read every value twice more on the way.
class ConcatSlices final : public Kernel {
 public:
  int32_t dtype;
  int64_t axis;
  std::vector<int64_t> chain;                      // Slices per Concat input
  std::vector<int64_t> starts, ends, axes, steps;  // the Slices, input by input, in chain order
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 1 || n_out != 1) return fail(ctx, "expects 1 input and 1 output, got %d and %d", n_in, n_out);
    if (!check_input(ctx, in, 0, dtype)) return OLC_ERROR;
    const olc_tensor& x = in[0];
    const int rank = x.ndim;
    if (rank < 1) return fail(ctx, "inputs must have rank >= 1");
    int64_t ax;
    if (!norm_axis(axis, rank, &ax))
      return fail(ctx, "axis %lld is out of range for inputs of rank %d", (long long)axis, rank);
    const size_t n = chain.size();
    std::vector<int64_t> vshape(n * rank), vstride(n * rank), vbase(n, 0);
    size_t j = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t* sh = vshape.data() + i * rank;
      int64_t* st = vstride.data() + i * rank;
      contiguous_view(x, sh, st);
      for (int64_t c = 0; c < chain[i]; ++c, ++j) {
        int64_t a;
        if (!norm_axis(axes[j], rank, &a))
          return fail(ctx, "input %zu: Slice axis %lld is out of range for an input of rank %d", i,
                      (long long)axes[j], rank);
        slice_view_axis(sh, st, &vbase[i], static_cast<int>(a), starts[j], ends[j], steps[j]);
      }
    }
    int64_t oshape[kMaxRank];
    if (!concat_shape(ctx, static_cast<int64_t>(n), rank, ax, [&](int64_t i) { return vshape.data() + i * rank; },
                      oshape))
      return OLC_ERROR;
    const olc_tensor probe{x.dtype, rank, oshape, nullptr};
    const int64_t total = olc_element_count(&probe);
    if (total < 0) return fail(ctx, "output shape %s is too large", shape_str(oshape, rank).c_str());
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, x.dtype, rank, oshape));
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const size_t es = olc_dtype_size(x.dtype);
    const int64_t outer = prod(oshape, 0, static_cast<int>(ax)), out_row = total / outer;
    const int64_t inner = prod(oshape, static_cast<int>(ax) + 1, rank);
    bool same = true;
    for (size_t i = 1; i < n; ++i)
      same = same && std::equal(vshape.begin(), vshape.begin() + rank, vshape.begin() + i * rank);
    if (same) {
      copy_interleaved(ctx, x, y, rank, ax, vshape.data(), vstride, vbase, total);
      return OLC_OK;
    }
    for (int64_t o = 0; o < outer; ++o) {
      int64_t off = o * out_row;
      for (size_t i = 0; i < n; ++i) {
        const int64_t* sh = vshape.data() + i * rank;
        const int64_t* st = vstride.data() + i * rank;
        // Outer index o in the view: its digits over the dims before the axis.
        int64_t base = vbase[i];
        for (int64_t d = ax - 1, r = o; d >= 0; --d) {
          base += (r % sh[d]) * st[d];
          r /= sh[d];
        }
        strided_copy(ctx, es, static_cast<const char*>(x.data), base, y + off * static_cast<int64_t>(es),
                     rank - static_cast<int>(ax), sh + ax, st + ax, parallel_min_bytes("Concat"));
        off += sh[ax] * inner;
      }
    }
    return OLC_OK;
  }

 private:
  // Parts of one shape: output rows (every dim but the last) go to the
  // executor in chunks, and each row index is copied for every part in
  // turn, so parts that read the same input rows (YOLOv5's even and odd
  // columns of a row) read them while they are cached: part by part, each
  // read the whole image again, from beyond L2 at 416x416.
  void copy_interleaved(olc_context* ctx, const olc_tensor& x, char* y, int rank, int64_t ax, const int64_t* shape,
                        const std::vector<int64_t>& vstride, const std::vector<int64_t>& vbase, int64_t total) const {
    const size_t n = chain.size(), es = olc_dtype_size(x.dtype);
    const int64_t n_inner = shape[rank - 1];
    const int64_t rows = n_inner > 0 ? total / static_cast<int64_t>(n) / n_inner : 0;
    const int64_t part_rows = prod(shape, static_cast<int>(ax), rank - 1);  // a part's rows per outer index
    const int64_t row_bytes = n_inner * static_cast<int64_t>(es);
    const char* src = static_cast<const char*>(x.data);
    const int64_t grain = std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(row_bytes * static_cast<int64_t>(n), 1));
    par_for(ctx, rows, grain, total * static_cast<int64_t>(es), parallel_min_bytes("Concat"), [&](int64_t b, int64_t e) {
      std::vector<int64_t> idx(static_cast<size_t>(rank), 0), off(vbase);
      // Odometer over the dims before the last, started at row b.
      int64_t r = b;
      for (int d = rank - 2; d >= 0; --d) {
        idx[d] = r % shape[d];
        r /= shape[d];
        for (size_t i = 0; i < n; ++i) off[i] += idx[d] * vstride[i * rank + d];
      }
      for (int64_t row = b; row < e; ++row) {
        // Output row: outer index, then part i's block, then the row within it.
        const int64_t o = row / part_rows, q = row % part_rows;
        for (size_t i = 0; i < n; ++i)
          row_copy(es, src + off[i] * static_cast<int64_t>(es), vstride[i * rank + rank - 1],
                   y + ((o * static_cast<int64_t>(n) + static_cast<int64_t>(i)) * part_rows + q) * row_bytes, n_inner);
        for (int d = rank - 2; d >= 0; --d) {
          for (size_t i = 0; i < n; ++i) off[i] += vstride[i * rank + d];
          if (++idx[d] < shape[d]) break;
          for (size_t i = 0; i < n; ++i) off[i] -= vstride[i * rank + d] * shape[d];
          idx[d] = 0;
        }
      }
    });
  }
};

// ------------------------------------------------------------------ Expand

class Expand final : public Kernel {
 public:
  int32_t dtype;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 2 || n_out != 1) return fail(ctx, "expects 2 inputs and 1 output, got %d and %d", n_in, n_out);
    if (!check_input(ctx, in, 0, dtype)) return OLC_ERROR;
    const olc_tensor& x = in[0];
    std::vector<int64_t> shape;
    std::string err;
    if (in[1].dtype != OLC_DTYPE_INT64) return fail(ctx, "input 'shape' must be int64, got %s", olc_dtype_name(in[1].dtype));
    if (!read_int_tensor(in[1], "input 'shape'", &shape, &err)) return fail(ctx, "%s", err.c_str());
    const int rank = std::max<int>(x.ndim, static_cast<int>(shape.size()));
    if (rank > kMaxRank) return fail(ctx, "output rank %d is too large", rank);
    int64_t oshape[kMaxRank], istride[kMaxRank];
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const int xi = d - (rank - x.ndim), si = d - (rank - static_cast<int>(shape.size()));
      const int64_t xd = xi >= 0 ? x.shape[xi] : 1;
      const int64_t sd = si >= 0 ? shape[si] : 1;
      if (sd < 0) return fail(ctx, "shape value %lld is negative", (long long)sd);
      int64_t od;
      if (xd == sd || sd == 1) od = xd;
      else if (xd == 1) od = sd;
      else
        return fail(ctx, "input shape %s cannot be broadcast to shape %s", shape_str(x.shape, x.ndim).c_str(),
                    shape_str(shape.data(), static_cast<int>(shape.size())).c_str());
      oshape[d] = od;
      istride[d] = (xd == 1) ? 0 : stride;
      stride *= xd;
    }
    return emit_strided_view(ctx, x, rank, oshape, 0, rank, oshape, istride, "Expand");
  }
};

// -------------------------------------------------------------------- Tile

class Tile final : public Kernel {
 public:
  int32_t dtype;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 2 || n_out != 1) return fail(ctx, "expects 2 inputs and 1 output, got %d and %d", n_in, n_out);
    if (!check_input(ctx, in, 0, dtype)) return OLC_ERROR;
    const olc_tensor& x = in[0];
    std::vector<int64_t> reps;
    std::string err;
    if (in[1].dtype != OLC_DTYPE_INT64) return fail(ctx, "input 'repeats' must be int64, got %s", olc_dtype_name(in[1].dtype));
    if (!read_int_tensor(in[1], "input 'repeats'", &reps, &err)) return fail(ctx, "%s", err.c_str());
    const int rank = x.ndim;
    if (static_cast<int>(reps.size()) != rank)
      return fail(ctx, "repeats has %zu values, the input has rank %d", reps.size(), rank);
    if (2 * rank > kMaxRank) return fail(ctx, "input rank %d is too large", rank);
    int64_t oshape[kMaxRank];
    // The output viewed as [r0, d0, r1, d1, ...] is an expansion of the input.
    int64_t vshape[kMaxRank], vstride[kMaxRank];
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (reps[d] < 0) return fail(ctx, "repeats value %lld is negative", (long long)reps[d]);
      oshape[d] = x.shape[d] * reps[d];
      vshape[2 * d] = reps[d];
      vstride[2 * d] = 0;
      vshape[2 * d + 1] = x.shape[d];
      vstride[2 * d + 1] = stride;
      stride *= x.shape[d];
    }
    return emit_strided_view(ctx, x, rank, oshape, 0, 2 * rank, vshape, vstride, "Tile");
  }
};

// ------------------------------------------------------------- factories

bool common_create(const olc_node_info* node, int expect_min_in, int32_t* dtype, std::string* error) {
  if (node->n_inputs < expect_min_in) {
    *error = strf("expects at least %d inputs, got %d", expect_min_in, node->n_inputs);
    return false;
  }
  *dtype = node->input_dtypes[0];
  if (!movable(*dtype)) {
    *error = strf("unsupported input type %s", olc_dtype_name(*dtype));
    return false;
  }
  return true;
}

}  // namespace

Kernel* make_gather(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"axis", nullptr};
  auto k = std::make_unique<Gather>();
  if (!check_attr_names(node, kAttrs, error) || !common_create(node, 2, &k->dtype, error) ||
      !attr_int(node, "axis", 0, &k->axis, error))
    return nullptr;
  return k.release();
}

Kernel* make_gather_elements(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"axis", nullptr};
  auto k = std::make_unique<GatherElements>();
  if (!check_attr_names(node, kAttrs, error) || !common_create(node, 2, &k->dtype, error) ||
      !attr_int(node, "axis", 0, &k->axis, error))
    return nullptr;
  return k.release();
}

// The Concat of Slices the graph pass restates (domain olc.tensor).
Kernel* make_concat_slices(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"axis", "chain", "starts", "ends", "axes", "steps", nullptr};
  auto k = std::make_unique<ConcatSlices>();
  bool has[5];
  if (!check_attr_names(node, kAttrs, error) || !common_create(node, 1, &k->dtype, error) ||
      !attr_int(node, "axis", 0, &k->axis, error) || !attr_ints(node, "chain", &k->chain, &has[0], error) ||
      !attr_ints(node, "starts", &k->starts, &has[1], error) || !attr_ints(node, "ends", &k->ends, &has[2], error) ||
      !attr_ints(node, "axes", &k->axes, &has[3], error) || !attr_ints(node, "steps", &k->steps, &has[4], error))
    return nullptr;
  int64_t slices = 0;
  for (int64_t c : k->chain) {
    if (c < 1) {
      *error = "every value of attribute 'chain' must be >= 1";
      return nullptr;
    }
    slices += c;
  }
  const size_t m = static_cast<size_t>(slices);
  if (k->chain.empty() || k->starts.size() != m || k->ends.size() != m || k->axes.size() != m ||
      k->steps.size() != m) {
    *error = strf("attributes 'starts', 'ends', 'axes' and 'steps' need one value per Slice of 'chain' (%lld)",
                  (long long)slices);
    return nullptr;
  }
  for (int64_t v : k->steps)
    if (v == 0) {
      *error = "a Slice step is 0";
      return nullptr;
    }
  return k.release();
}

Kernel* make_concat(const olc_node_info* node, std::string* error) {
  if (!std::strcmp(node->domain, "olc.tensor")) return make_concat_slices(node, error);
  static const char* const kAttrs[] = {"axis", nullptr};
  auto k = std::make_unique<Concat>();
  if (!check_attr_names(node, kAttrs, error) || !common_create(node, 1, &k->dtype, error)) return nullptr;
  if (!find_attr(node, "axis")) {
    *error = "attribute 'axis' is required";
    return nullptr;
  }
  if (!attr_int(node, "axis", 0, &k->axis, error)) return nullptr;
  return k.release();
}

Kernel* make_split(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"axis", "split", "num_outputs", nullptr};
  auto k = std::make_unique<Split>();
  if (!check_attr_names(node, kAttrs, error) || !common_create(node, 1, &k->dtype, error) ||
      !attr_int(node, "axis", 0, &k->axis, error) || !attr_int(node, "num_outputs", 0, &k->num_outputs, error) ||
      !attr_ints(node, "split", &k->split_attr, &k->has_split_attr, error))
    return nullptr;
  k->opset = node->opset;
  if (node->opset >= 13 && k->has_split_attr) {
    *error = "attribute 'split' is an input since opset 13";
    return nullptr;
  }
  if (find_attr(node, "num_outputs")) {
    if (node->opset < 18) {
      *error = "attribute 'num_outputs' exists only from opset 18";
      return nullptr;
    }
    if (k->num_outputs < 1) {
      *error = strf("attribute 'num_outputs' must be >= 1, got %lld", (long long)k->num_outputs);
      return nullptr;
    }
    if (node->n_inputs > 1 && node->input_dtypes[1] != OLC_DTYPE_UNDEFINED) {
      *error = "input 'split' and attribute 'num_outputs' are both given";
      return nullptr;
    }
  }
  return k.release();
}

Kernel* make_slice(const olc_node_info* node, std::string* error) {
  auto k = std::make_unique<Slice>();
  k->legacy = node->opset < 10;
  if (k->legacy) {
    static const char* const kAttrs[] = {"starts", "ends", "axes", nullptr};
    bool has_s, has_e;
    if (!check_attr_names(node, kAttrs, error) || !common_create(node, 1, &k->dtype, error) ||
        !attr_ints(node, "starts", &k->a_starts, &has_s, error) || !attr_ints(node, "ends", &k->a_ends, &has_e, error) ||
        !attr_ints(node, "axes", &k->a_axes, &k->a_has_axes, error))
      return nullptr;
    if (!has_s || !has_e) {
      *error = "attributes 'starts' and 'ends' are required";
      return nullptr;
    }
  } else {
    static const char* const kAttrs[] = {nullptr};
    if (!check_attr_names(node, kAttrs, error) || !common_create(node, 3, &k->dtype, error)) return nullptr;
  }
  return k.release();
}

Kernel* make_expand(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {nullptr};
  auto k = std::make_unique<Expand>();
  if (!check_attr_names(node, kAttrs, error) || !common_create(node, 2, &k->dtype, error)) return nullptr;
  return k.release();
}

Kernel* make_tile(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {nullptr};
  auto k = std::make_unique<Tile>();
  if (!check_attr_names(node, kAttrs, error) || !common_create(node, 2, &k->dtype, error)) return nullptr;
  return k.release();
}

}  // namespace olc_tn
