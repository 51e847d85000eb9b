// Pad: constant, reflect, edge and (opset 19+) wrap; pads as an attribute
// (opset 2-10) or an input (11+), optional constant_value input and (18+)
// axes input. Negative pads crop. Each axis gets an index map from output
// position to source position (-1: the constant); rows are then copied with
// one memcpy for their contiguous middle and per-element moves at the edges.
#include <algorithm>
#include <memory>

#include "common.h"
#include "fp_convert.h"
#include "registry.h"

namespace olc_tn {
namespace {

enum class Mode { Constant, Reflect, Edge, Wrap };

template <class T>
void fill_row(T* dst, const T* src, const int64_t* map, int64_t n, T value, int64_t lo, int64_t hi) {
  // [lo, hi): positions whose sources are consecutive (memcpy'd by the caller).
  for (int64_t i = 0; i < lo; ++i) dst[i] = map[i] < 0 ? value : src[map[i]];
  for (int64_t i = hi; i < n; ++i) dst[i] = map[i] < 0 ? value : src[map[i]];
}

class Pad final : public Kernel {
 public:
  int32_t dtype;
  Mode mode = Mode::Constant;
  bool legacy = false;  // opset 2-10: pads and value are attributes
  std::vector<int64_t> attr_pads;
  double attr_value = 0.0;

  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_out != 1 || n_in < 1 || (legacy ? n_in != 1 : n_in > 4))
      return fail(ctx, "unexpected number of inputs (%d) or outputs (%d)", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype), olc_dtype_name(dtype));
    if (checked_count(x) < 0) return fail(ctx, "input 0 has a negative dimension, too many elements or no data");
    const int rank = x.ndim;
    const size_t es = olc_dtype_size(x.dtype);
    std::vector<int64_t> pads;
    std::string err;
    alignas(8) unsigned char value[8] = {};
    if (legacy) {
      pads = attr_pads;
      // The float attribute converted to T (opset 2-10 T is a float type).
      if (x.dtype == OLC_DTYPE_FLOAT) {
        const float v = static_cast<float>(attr_value);
        std::memcpy(value, &v, 4);
      } else if (x.dtype == OLC_DTYPE_DOUBLE) {
        std::memcpy(value, &attr_value, 8);
      } else if (x.dtype == OLC_DTYPE_FLOAT16) {
        const uint16_t v = f64_to_f16(attr_value);
        std::memcpy(value, &v, 2);
      } else {
        return fail(ctx, "type %s cannot be padded at this opset", olc_dtype_name(x.dtype));
      }
    } else {
      if (in[1].dtype != OLC_DTYPE_INT64) return fail(ctx, "input 'pads' must be int64, got %s", olc_dtype_name(in[1].dtype));
      if (!read_int_tensor(in[1], "input 'pads'", &pads, &err)) return fail(ctx, "%s", err.c_str());
      if (n_in > 2 && in[2].dtype != OLC_DTYPE_UNDEFINED) {
        const olc_tensor& c = in[2];
        if (c.dtype != x.dtype)
          return fail(ctx, "constant_value has type %s, the data %s", olc_dtype_name(c.dtype), olc_dtype_name(x.dtype));
        const int64_t cn = checked_count(c);
        if (cn < 0) return fail(ctx, "constant_value has an invalid shape or no data");
        if (cn > 1) return fail(ctx, "constant_value must hold one value, got %lld", (long long)cn);
        if (cn == 1) std::memcpy(value, c.data, es);
      }
    }
    // Expand pads over the axes (opset 18 input, else every axis in order).
    std::vector<int64_t> begin(rank, 0), end(rank, 0);
    if (!legacy && n_in > 3 && in[3].dtype != OLC_DTYPE_UNDEFINED) {
      std::vector<int64_t> axes;
      if (!read_int_tensor(in[3], "input 'axes'", &axes, &err)) return fail(ctx, "%s", err.c_str());
      if (pads.size() != 2 * axes.size())
        return fail(ctx, "pads has %zu values for %zu axes (expected twice as many)", pads.size(), axes.size());
      std::vector<bool> seen(rank, false);
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = axes[i];
        if (a < -rank || a >= rank) return fail(ctx, "axis %lld is out of range for an input of rank %d", (long long)a, rank);
        if (a < 0) a += rank;
        if (seen[a]) return fail(ctx, "axis %lld is repeated in axes", (long long)a);
        seen[a] = true;
        begin[a] = pads[i];
        end[a] = pads[i + axes.size()];
      }
    } else {
      if (pads.size() != 2 * static_cast<size_t>(rank))
        return fail(ctx, "pads has %zu values, the input has rank %d (expected %d)", pads.size(), rank, 2 * rank);
      for (int d = 0; d < rank; ++d) {
        begin[d] = pads[d];
        end[d] = pads[d + rank];
      }
    }
    // Negative pads crop first (as onnxruntime does); the modes then work on
    // the cropped extent [c0, c0 + dd) of each axis.
    int64_t oshape[kMaxRank], c0[kMaxRank], dd[kMaxRank], pb[kMaxRank];
    for (int d = 0; d < rank; ++d) {
      const int64_t dim = x.shape[d];
      const int64_t o = dim + begin[d] + end[d];
      if (begin[d] < -dim || end[d] < -dim || o < 0)
        return fail(ctx, "pads %lld, %lld crop more than axis %d of size %lld", (long long)begin[d], (long long)end[d], d,
                    (long long)dim);
      oshape[d] = o;
      c0[d] = begin[d] < 0 ? -begin[d] : 0;
      dd[d] = dim - c0[d] - (end[d] < 0 ? -end[d] : 0);
      if (dd[d] < 0) dd[d] = 0;
      pb[d] = begin[d] > 0 ? begin[d] : 0;
      if (mode != Mode::Constant && dd[d] == 0 && o > 0)
        return fail(ctx, "axis %d has size 0 after cropping: %s padding has nothing to repeat", d,
                    mode == Mode::Reflect ? "reflect" : mode == Mode::Edge ? "edge" : "wrap");
    }
    // Index maps: output position -> source position, -1 for the constant.
    std::vector<std::vector<int64_t>> maps(rank);
    for (int d = 0; d < rank; ++d) {
      const int64_t n = dd[d];
      maps[d].resize(static_cast<size_t>(oshape[d]));
      for (int64_t i = 0; i < oshape[d]; ++i) {
        int64_t s = i - pb[d];
        if (s < 0 || s >= n) {
          switch (mode) {
            case Mode::Constant: s = -1; break;
            case Mode::Edge: s = s < 0 ? 0 : n - 1; break;
            case Mode::Wrap: s = ((s % n) + n) % n; break;
            case Mode::Reflect: {
              if (n == 1) {
                s = 0;
              } else {
                const int64_t period = 2 * (n - 1);
                s = ((s % period) + period) % period;
                if (s >= n) s = period - s;
              }
              break;
            }
          }
        }
        maps[d][i] = s < 0 ? -1 : s + c0[d];
      }
    }
    int64_t total = 1;
    for (int d = 0; d < rank; ++d) total *= oshape[d];
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, x.dtype, rank, oshape));
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    if (rank == 0) {
      std::memcpy(y, x.data, es);
      return OLC_OK;
    }
    int64_t istride[kMaxRank];
    int64_t st = 1;
    for (int d = rank - 1; d >= 0; --d) {
      istride[d] = st;
      st *= x.shape[d];
    }
    const int64_t inner = oshape[rank - 1];
    const int64_t* lmap = maps[rank - 1].data();
    // The contiguous middle of the last axis: outputs whose sources run 0, 1, 2...
    const int64_t lo = pb[rank - 1];
    const int64_t hi = std::max(lo, std::min<int64_t>(inner, pb[rank - 1] + dd[rank - 1]));
    const int64_t rows = total / inner;
    const char* xs = static_cast<const char*>(x.data);
    par_for(ctx, rows, std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(1, inner * static_cast<int64_t>(es))),
            total * static_cast<int64_t>(es), parallel_min_bytes("Pad"), [&](int64_t b, int64_t e) {
              for (int64_t row = b; row < e; ++row) {
                int64_t rem = row, off = 0;
                bool constant = false;
                for (int d = rank - 2; d >= 0; --d) {
                  const int64_t i = rem % oshape[d];
                  rem /= oshape[d];
                  const int64_t s = maps[d][i];
                  if (s < 0) constant = true;
                  off += s * istride[d];
                }
                char* dst = y + row * inner * static_cast<int64_t>(es);
                const char* src = xs + off * static_cast<int64_t>(es);
                switch (es) {
                  case 1: pad_row<uint8_t>(dst, src, lmap, inner, value, lo, hi, constant); break;
                  case 2: pad_row<uint16_t>(dst, src, lmap, inner, value, lo, hi, constant); break;
                  case 4: pad_row<uint32_t>(dst, src, lmap, inner, value, lo, hi, constant); break;
                  default: pad_row<uint64_t>(dst, src, lmap, inner, value, lo, hi, constant); break;
                }
              }
            });
    return OLC_OK;
  }

  template <class T>
  static void pad_row(char* dst, const char* src, const int64_t* map, int64_t n, const unsigned char* value, int64_t lo,
                      int64_t hi, bool constant) {
    T v;
    std::memcpy(&v, value, sizeof(T));
    T* d = reinterpret_cast<T*>(dst);
    if (constant) {
      for (int64_t i = 0; i < n; ++i) d[i] = v;
      return;
    }
    const T* s = reinterpret_cast<const T*>(src);
    if (hi > lo) std::memcpy(d + lo, s + map[lo], static_cast<size_t>(hi - lo) * sizeof(T));
    fill_row(d, s, map, n, v, lo, hi);
  }
};

}  // namespace

Kernel* make_pad(const olc_node_info* node, std::string* error) {
  auto k = std::make_unique<Pad>();
  k->legacy = node->opset < 11;
  static const char* const kLegacy[] = {"mode", "pads", "value", nullptr};
  static const char* const kNew[] = {"mode", nullptr};
  if (!check_attr_names(node, k->legacy ? kLegacy : kNew, error)) return nullptr;
  k->dtype = node->input_dtypes[0];
  if (!movable(k->dtype)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  if (const olc_attribute* m = find_attr(node, "mode")) {
    const std::string s = m->type == OLC_ATTR_STRING && m->s ? m->s : "";
    if (s == "constant") k->mode = Mode::Constant;
    else if (s == "reflect") k->mode = Mode::Reflect;
    else if (s == "edge") k->mode = Mode::Edge;
    else if (s == "wrap" && node->opset >= 19) k->mode = Mode::Wrap;
    else {
      *error = strf("attribute 'mode' = \"%s\" is not a padding mode at opset %lld", s.c_str(), (long long)node->opset);
      return nullptr;
    }
  }
  if (k->legacy) {
    bool has = false;
    if (!attr_ints(node, "pads", &k->attr_pads, &has, error)) return nullptr;
    if (!has) {
      *error = "attribute 'pads' is required";
      return nullptr;
    }
    if (const olc_attribute* v = find_attr(node, "value")) {
      if (v->type != OLC_ATTR_FLOAT) {
        *error = "attribute 'value' must be a float";
        return nullptr;
      }
      k->attr_value = v->f;
    }
  }
  return k.release();
}

}  // namespace olc_tn
