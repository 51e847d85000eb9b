// Transpose, DepthToSpace, SpaceToDepth and the strided copy engine.
// Dimensions of size 1 are dropped and dimensions that stay adjacent are
// merged first, so most permutations reduce to a plain copy, a copy of
// contiguous rows, or a batch of 2-D transposes done in cache-sized tiles.
#include <algorithm>
#include <limits>
#include <memory>

#include "common.h"
#include "registry.h"
#include "strided.h"
#include "transpose_kernels.h"

namespace olc_tn {
namespace {

// Drops size-1 dims and merges dims whose strides chain; returns the rank
// (at least 1).
int simplify(int rank, const int64_t* oshape, const int64_t* istride, int64_t* d, int64_t* s) {
  int r = 0;
  for (int k = 0; k < rank; ++k) {
    if (oshape[k] == 1) continue;
    if (r > 0 && s[r - 1] == istride[k] * oshape[k]) {
      d[r - 1] *= oshape[k];
      s[r - 1] = istride[k];
    } else {
      d[r] = oshape[k];
      s[r] = istride[k];
      ++r;
    }
  }
  if (r == 0) {
    d[0] = 1;
    s[0] = 1;
    r = 1;
  }
  return r;
}

template <class T>
void strided_row(const T* src, int64_t stride, T* dst, int64_t n) {
  if (stride == 0) {
    const T v = *src;
    for (int64_t i = 0; i < n; ++i) dst[i] = v;
  } else if (stride == -1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[-i];
  } else if (stride == 2) {
    // A constant stride the compiler vectorizes (two loads and a shuffle
    // per vector): every other column, as YOLOv5's space-to-depth Slices
    // take them.
    for (int64_t i = 0; i < n; ++i) dst[i] = src[2 * i];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i * stride];
  }
}

}  // namespace

void row_copy(size_t es, const char* src, int64_t stride, char* dst, int64_t n) {
  if (stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * es);
    return;
  }
  switch (es) {
    case 1: strided_row(reinterpret_cast<const uint8_t*>(src), stride, reinterpret_cast<uint8_t*>(dst), n); break;
    case 2: strided_row(reinterpret_cast<const uint16_t*>(src), stride, reinterpret_cast<uint16_t*>(dst), n); break;
    case 4: strided_row(reinterpret_cast<const uint32_t*>(src), stride, reinterpret_cast<uint32_t*>(dst), n); break;
    default: strided_row(reinterpret_cast<const uint64_t*>(src), stride, reinterpret_cast<uint64_t*>(dst), n); break;
  }
}

namespace {

// dst[a * dst_ld + b] = src[b * src_ld + a] for a < na, b < nb (elements).
template <class T>
void transpose_tile(const T* src, int64_t src_ld, T* dst, int64_t dst_ld, int64_t na, int64_t nb) {
  constexpr int64_t kB = 64 / sizeof(T) < 8 ? 8 : 64 / sizeof(T);  // one cache line of T per tile row
  for (int64_t b0 = 0; b0 < nb; b0 += kB) {
    const int64_t b1 = std::min(nb, b0 + kB);
    for (int64_t a0 = 0; a0 < na; a0 += kB) {
      const int64_t a1 = std::min(na, a0 + kB);
      for (int64_t a = a0; a < a1; ++a) {
        T* d = dst + a * dst_ld;
        const T* s = src + a;
        for (int64_t b = b0; b < b1; ++b) d[b] = s[b * src_ld];
      }
    }
  }
}

TransposeFn pick_transpose(size_t es) {
  const bool avx2 = g_api->simd_level() >= OLC_SIMD_AVX2;
  switch (es) {
    case 1: return &scalar::transpose_1;
    case 2: return &scalar::transpose_2;
    case 4: return avx2 ? &avx2::transpose_4 : &scalar::transpose_4;
    default: return avx2 ? &avx2::transpose_8 : &scalar::transpose_8;
  }
}

}  // namespace

namespace scalar {
void transpose_1(const void* s, int64_t sld, void* d, int64_t dld, int64_t na, int64_t nb) {
  transpose_tile(static_cast<const uint8_t*>(s), sld, static_cast<uint8_t*>(d), dld, na, nb);
}
void transpose_2(const void* s, int64_t sld, void* d, int64_t dld, int64_t na, int64_t nb) {
  transpose_tile(static_cast<const uint16_t*>(s), sld, static_cast<uint16_t*>(d), dld, na, nb);
}
void transpose_4(const void* s, int64_t sld, void* d, int64_t dld, int64_t na, int64_t nb) {
  transpose_tile(static_cast<const uint32_t*>(s), sld, static_cast<uint32_t*>(d), dld, na, nb);
}
void transpose_8(const void* s, int64_t sld, void* d, int64_t dld, int64_t na, int64_t nb) {
  transpose_tile(static_cast<const uint64_t*>(s), sld, static_cast<uint64_t*>(d), dld, na, nb);
}
}  // namespace scalar

void strided_copy(olc_context* ctx, size_t es, const char* src, int64_t base, char* dst, int rank,
                  const int64_t* oshape, const int64_t* istride, int64_t min_parallel_bytes) {
  int64_t d[kMaxRank], s[kMaxRank];
  const int r = simplify(rank, oshape, istride, d, s);
  int64_t total = 1;
  for (int k = 0; k < r; ++k) total *= d[k];
  const int64_t bytes = total * static_cast<int64_t>(es);
  if (r == 1 && s[0] == 1) {
    parallel_copy(ctx, dst, src + base * static_cast<int64_t>(es), bytes, min_parallel_bytes);
    return;
  }
  const int64_t es64 = static_cast<int64_t>(es);
  // A 2-D transpose inside: the output's inner dim is strided and some other
  // dim j is the input's contiguous one. Tile over (j, inner).
  int j = -1;
  if (s[r - 1] != 1 && s[r - 1] != 0 && s[r - 1] != -1 && d[r - 1] >= 4)
    for (int k = 0; k < r - 1; ++k)
      if (s[k] == 1) j = k;
  if (j >= 0) {
    int64_t ostride[kMaxRank];
    int64_t o = 1;
    for (int k = r - 1; k >= 0; --k) {
      ostride[k] = o;
      o *= d[k];
    }
    // Batch dims: every dim except j and r-1; tasks: batch x blocks of j.
    int64_t bd[kMaxRank], bs[kMaxRank], bo[kMaxRank];
    int nb = 0;
    for (int k = 0; k < r - 1; ++k)
      if (k != j) {
        bd[nb] = d[k];
        bs[nb] = s[k];
        bo[nb] = ostride[k];
        ++nb;
      }
    int64_t batch = 1;
    for (int k = 0; k < nb; ++k) batch *= bd[k];
    const int64_t na = d[j], ncol = d[r - 1];
    const int64_t a_blk = std::max<int64_t>(16, (16 << 10) / std::max<int64_t>(1, ncol * es64) / 16 * 16);
    const int64_t a_tasks = (na + a_blk - 1) / a_blk;
    const TransposeFn tfn = pick_transpose(es);
    par_for(ctx, batch * a_tasks, 1, bytes, min_parallel_bytes, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t bi = t / a_tasks;
        const int64_t a0 = (t - bi * a_tasks) * a_blk, a1 = std::min(na, a0 + a_blk);
        int64_t in_off = base, out_off = 0;
        for (int k = nb - 1; k >= 0; --k) {
          const int64_t i = bi % bd[k];
          bi /= bd[k];
          in_off += i * bs[k];
          out_off += i * bo[k];
        }
        tfn(src + (in_off + a0) * es64, s[r - 1], dst + (out_off + a0 * ostride[j]) * es64, ostride[j], a1 - a0,
            ncol);
      }
    });
    return;
  }
  const int64_t n_inner = d[r - 1], s_inner = s[r - 1];
  const int64_t rows = total / n_inner;
  const int64_t row_bytes = n_inner * es64;
  const int64_t grain = std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(row_bytes, 1));
  par_for(ctx, rows, grain, bytes, min_parallel_bytes, [&](int64_t b, int64_t e) {
    // Odometer over the outer dims, started at row b.
    int64_t idx[kMaxRank];
    int64_t rem = b, off = base;
    for (int k = r - 2; k >= 0; --k) {
      idx[k] = rem % d[k];
      rem /= d[k];
      off += idx[k] * s[k];
    }
    for (int64_t row = b; row < e; ++row) {
      row_copy(es, src + off * es64, s_inner, dst + row * row_bytes, n_inner);
      for (int k = r - 2; k >= 0; --k) {
        off += s[k];
        if (++idx[k] < d[k]) break;
        off -= s[k] * d[k];
        idx[k] = 0;
      }
    }
  });
}

namespace {

class Transpose final : public Kernel {
 public:
  int32_t dtype;
  bool has_perm = false;
  std::vector<int64_t> perm;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 1 || n_out != 1) return fail(ctx, "expects 1 input and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype),
                  olc_dtype_name(dtype));
    const int64_t total = checked_count(x);
    if (total < 0) return fail(ctx, "input 0 has a negative dimension, too many elements or no data");
    const int rank = x.ndim;
    int64_t p[kMaxRank];
    if (has_perm) {
      if (static_cast<int>(perm.size()) != rank)
        return fail(ctx, "perm has %zu values, the input has rank %d", perm.size(), rank);
      bool seen[kMaxRank] = {};
      for (int k = 0; k < rank; ++k) {
        int64_t v = perm[k];
        if (v < 0) v += rank;  // negative entries count from the back, as numpy does
        if (v < 0 || v >= rank || seen[v]) return fail(ctx, "perm is not a permutation of 0..%d", rank - 1);
        seen[v] = true;
        p[k] = v;
      }
    } else {
      for (int k = 0; k < rank; ++k) p[k] = rank - 1 - k;
    }
    int64_t oshape[kMaxRank], istride[kMaxRank], xs[kMaxRank];
    int64_t st = 1;
    for (int k = rank - 1; k >= 0; --k) {
      xs[k] = st;
      st *= x.shape[k];
    }
    for (int k = 0; k < rank; ++k) {
      oshape[k] = x.shape[p[k]];
      istride[k] = xs[p[k]];
    }
    void* y = g_api->allocate_output(ctx, 0, x.dtype, rank, oshape);
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    strided_copy(ctx, olc_dtype_size(x.dtype), static_cast<const char*>(x.data), 0, static_cast<char*>(y), rank,
                 oshape, istride, parallel_min_bytes("Transpose"));
    return OLC_OK;
  }
};

// SpaceToDepth by input rows: row (n, c, h = h2 * bs + i) holds, at column
// w2 * bs + j, the element of output channel (i * bs + j) * C + c (DCR) or
// (c * bs + i) * bs + j (CRD), row h2, column w2. Each input row is read
// once and feeds bs output rows, every one written in order.
// kBs > 0: the block size as a constant (the compiler then turns the
// strided reads into shuffles); 0: `bs` at run time.
template <class U, int64_t kBs>
void space_to_depth_rows(const U* x, U* y, int64_t C, int64_t H, int64_t W, int64_t bs_run, bool crd, int64_t lo,
                         int64_t hi) {
  const int64_t bs = kBs > 0 ? kBs : bs_run;
  const int64_t h2 = H / bs, w2 = W / bs;
  for (int64_t r = lo; r < hi; ++r) {
    const int64_t h = r % H, c = (r / H) % C, n = r / (H * C);
    const int64_t i = h % bs, hh = h / bs;
    const U* in = x + r * W;
    for (int64_t j = 0; j < bs; ++j) {
      const int64_t oc = crd ? (c * bs + i) * bs + j : (i * bs + j) * C + c;
      U* out = y + ((n * C * bs * bs + oc) * h2 + hh) * w2;
      const U* src = in + j;
      for (int64_t w = 0; w < w2; ++w) out[w] = src[w * bs];
    }
  }
}

// DepthToSpace by output rows, the mirror of the above: output row
// (n, c, h * bs + i) interleaves, at columns w * bs + j, input row (n, ch, h)
// of channel ch = (i * bs + j) * C' + c (DCR) or (c * bs + i) * bs + j (CRD).
template <class U, int64_t kBs>
void depth_to_space_rows(const U* x, U* y, int64_t C, int64_t H, int64_t W, int64_t bs_run, bool crd, int64_t lo,
                         int64_t hi) {
  const int64_t bs = kBs > 0 ? kBs : bs_run;
  const int64_t c2 = C / (bs * bs), oh = H * bs, ow = W * bs;
  for (int64_t r = lo; r < hi; ++r) {
    const int64_t hh = r % oh, c = (r / oh) % c2, n = r / (oh * c2);
    const int64_t h = hh / bs, i = hh % bs;
    U* out = y + r * ow;
    for (int64_t j = 0; j < bs; ++j) {
      const int64_t ch = crd ? (c * bs + i) * bs + j : (i * bs + j) * c2 + c;
      const U* in = x + ((n * C + ch) * H + h) * W;
      U* dst = out + j;
      for (int64_t w = 0; w < W; ++w) dst[w * bs] = in[w];
    }
  }
}

// DepthToSpace and SpaceToDepth: the spec's reshape, 6-D permutation and
// reshape done row by row (above), every input row read once and every
// output row written in order. (As one strided copy, the innermost run
// would be a single block row of bs elements.)
class BlockRearrange final : public Kernel {
 public:
  int32_t dtype;
  bool to_space;  // DepthToSpace (else SpaceToDepth)
  bool crd = false;
  int64_t bs = 0;
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 1 || n_out != 1) return fail(ctx, "expects 1 input and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != dtype)
      return fail(ctx, "input 0 has type %s, the kernel was created for %s", olc_dtype_name(x.dtype),
                  olc_dtype_name(dtype));
    const int64_t total = checked_count(x);
    if (total < 0) return fail(ctx, "input 0 has a negative dimension, too many elements or no data");
    if (x.ndim != 4) return fail(ctx, "input must be 4-D [N, C, H, W], got shape %s", shape_str(x.shape, x.ndim).c_str());
    const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    int64_t oshape[4];
    if (to_space) {
      if (bs > C || C % (bs * bs) != 0)
        return fail(ctx, "channels %lld are not a multiple of blocksize^2 = %lld", (long long)C, (long long)(bs * bs));
      const int64_t c2 = C / (bs * bs);
      if (H > std::numeric_limits<int64_t>::max() / bs || W > std::numeric_limits<int64_t>::max() / bs)
        return fail(ctx, "output shape is too large");
      oshape[0] = N;
      oshape[1] = c2;
      oshape[2] = H * bs;
      oshape[3] = W * bs;
    } else {
      if (H % bs != 0 || W % bs != 0)
        return fail(ctx, "height %lld and width %lld must be multiples of blocksize %lld", (long long)H, (long long)W,
                    (long long)bs);
      const int64_t h2 = H / bs, w2 = W / bs;
      if (C > std::numeric_limits<int64_t>::max() / (bs * bs)) return fail(ctx, "output shape is too large");
      oshape[0] = N;
      oshape[1] = C * bs * bs;
      oshape[2] = h2;
      oshape[3] = w2;
    }
    void* y = g_api->allocate_output(ctx, 0, x.dtype, 4, oshape);
    if (!y && total > 0) return OLC_ERROR;
    if (total == 0) return OLC_OK;
    const size_t es = olc_dtype_size(x.dtype);
    // Rows: output rows for DepthToSpace, input rows for SpaceToDepth (the
    // same count of W * bs or W elements).
    const int64_t rows = to_space ? oshape[0] * oshape[1] * oshape[2] : N * C * H;
    const int64_t row_bytes = (to_space ? oshape[3] : W) * static_cast<int64_t>(es);
    const int64_t grain = std::max<int64_t>(1, (16 << 10) / std::max<int64_t>(1, row_bytes));
    auto run_typed = [&](auto tag, int64_t lo, int64_t hi) {
      using U = decltype(tag);
      const U* xs = static_cast<const U*>(x.data);
      U* ys = static_cast<U*>(y);
      if (to_space) {
        switch (bs) {
          case 2: depth_to_space_rows<U, 2>(xs, ys, C, H, W, bs, crd, lo, hi); break;
          case 4: depth_to_space_rows<U, 4>(xs, ys, C, H, W, bs, crd, lo, hi); break;
          default: depth_to_space_rows<U, 0>(xs, ys, C, H, W, bs, crd, lo, hi); break;
        }
        return;
      }
      switch (bs) {
        case 2: space_to_depth_rows<U, 2>(xs, ys, C, H, W, bs, crd, lo, hi); break;
        case 4: space_to_depth_rows<U, 4>(xs, ys, C, H, W, bs, crd, lo, hi); break;
        default: space_to_depth_rows<U, 0>(xs, ys, C, H, W, bs, crd, lo, hi); break;
      }
    };
    par_for(ctx, rows, grain, total * static_cast<int64_t>(es) * 2, parallel_min_bytes(to_space ? "DepthToSpace" : "SpaceToDepth"),
            [&](int64_t lo, int64_t hi) {
              switch (es) {
                case 1: run_typed(uint8_t{}, lo, hi); break;
                case 2: run_typed(uint16_t{}, lo, hi); break;
                case 4: run_typed(uint32_t{}, lo, hi); break;
                default: run_typed(uint64_t{}, lo, hi); break;
              }
            });
    return OLC_OK;
  }
};

Kernel* make_block_rearrange(const olc_node_info* node, bool to_space, std::string* error) {
  static const char* const kAttrs[] = {"blocksize", "mode", nullptr};
  auto k = std::make_unique<BlockRearrange>();
  k->to_space = to_space;
  if (!check_attr_names(node, kAttrs, error) || !attr_int(node, "blocksize", 0, &k->bs, error)) return nullptr;
  if (!find_attr(node, "blocksize")) {
    *error = "attribute 'blocksize' is required";
    return nullptr;
  }
  if (k->bs < 1 || k->bs > (int64_t{1} << 31)) {
    *error = strf("attribute 'blocksize' must be >= 1, got %lld", (long long)k->bs);
    return nullptr;
  }
  const int64_t mode_since = to_space ? 11 : 28;
  if (const olc_attribute* a = find_attr(node, "mode")) {
    const std::string m = a->type == OLC_ATTR_STRING && a->s ? a->s : "";
    if (node->opset < mode_since || (m != "DCR" && m != "CRD")) {
      *error = strf("attribute 'mode' = \"%s\" is not supported at opset %lld (DCR or CRD, from opset %lld)", m.c_str(),
                    (long long)node->opset, (long long)mode_since);
      return nullptr;
    }
    k->crd = m == "CRD";
  }
  if (node->n_inputs != 1) {
    *error = strf("expects 1 input, got %d", node->n_inputs);
    return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  if (!movable(k->dtype)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  return k.release();
}

}  // namespace

Kernel* make_depth_to_space(const olc_node_info* node, std::string* error) {
  return make_block_rearrange(node, true, error);
}
Kernel* make_space_to_depth(const olc_node_info* node, std::string* error) {
  return make_block_rearrange(node, false, error);
}

Kernel* make_transpose(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"perm", nullptr};
  auto k = std::make_unique<Transpose>();
  if (!check_attr_names(node, kAttrs, error) || !attr_ints(node, "perm", &k->perm, &k->has_perm, error)) return nullptr;
  if (node->n_inputs != 1) {
    *error = strf("expects 1 input, got %d", node->n_inputs);
    return nullptr;
  }
  k->dtype = node->input_dtypes[0];
  if (!movable(k->dtype)) {
    *error = strf("unsupported input type %s", olc_dtype_name(k->dtype));
    return nullptr;
  }
  if (k->perm.size() > static_cast<size_t>(kMaxRank)) {
    *error = "perm is too long";
    return nullptr;
  }
  return k.release();
}

}  // namespace olc_tn
