// N-ary broadcast plan: multidirectional (numpy-style) broadcasting of up to
// kMaxBroadcastInputs dense C-contiguous inputs into one output, reduced to
// the fewest loop dimensions, with a block traversal that needs no division
// per element. Dependency-free (standard headers only) and plain data, so
// any translation unit may include it, whatever its ISA flags.
//
// Interface (namespace olc_ew):
//
//   BroadcastPlan plan;
//   char err[128];
//   bool ok = build_broadcast_plan(n_inputs, ranks, shapes, &plan, err, sizeof err);
//
//     n_inputs  1..kMaxBroadcastInputs
//     ranks[i]  rank of input i (0 for a scalar), at most kMaxBroadcastRank
//     shapes[i] its dimensions (may be nullptr when ranks[i] == 0)
//   On failure (incompatible dimensions, negative dimension, rank or input
//   count too large, element count overflowing int64) it returns false and
//   writes a message naming the reason into err.
//
//   Result, all in elements (not bytes):
//     plan.out_rank, plan.out_shape[]   right-aligned output shape (what to
//                                       allocate; unit dims kept)
//     plan.count                        output element count (0: empty)
//     plan.rank, plan.dims[]            the loop space: unit dims removed,
//                                       adjacent dims merged when every input
//                                       is contiguous across them; rank >= 1,
//                                       dims[rank-1] is the inner block length
//                                       (a scalar output has rank 1, dims {1})
//     plan.strides[i][d]                input i's element stride along loop
//                                       dim d; 0 where input i is broadcast
//     plan.inner                        dims[rank-1]
//     plan.blocks                       count / inner: the number of inner blocks
//     plan.inner_stride[i]              strides[i][rank-1]: 1 or 0 (0: input i
//                                       is one value for the whole block)
//     plan.family                       LoopFamily (see below)
//   With an empty output, rank == 1, dims {0}, blocks == 0: a traversal
//   visits nothing and no input is read.
//
//   Traversal over inner blocks [begin, end) (0 <= begin <= end <= blocks):
//
//     for_each_block(plan, begin, end, [&](int64_t out_off, const int64_t* in_off) {
//       // elements out_off .. out_off + plan.inner - 1 of the output;
//       // input i's first element is at in_off[i], advancing by
//       // plan.inner_stride[i] per element
//     });
//
//   or by hand with a BlockCursor (seek() divides once per dimension; next()
//   only adds and compares). Output offsets are block * inner. Starting at
//   any block index lets a scheduler split work across threads at inner
//   block boundaries.
//
//   For families whose plan has a single block (contiguous, scalars), split
//   the inner block itself: element e of the output reads input i at
//   e * inner_stride[i].
//
// Loop families (classification of the reduced plan; every family is handled
// correctly by the generic traversal, the family only guides kernels and
// scheduling). "full" below means an input covering the whole loop space.
//   kContiguous     rank 1, every input full
//   kLeftScalar     rank 1, input 0 is a single value (binary: A scalar)
//   kRightScalar    rank 1, some input other than 0 is a single value
//   kInnerVector    rank 2 [M, N]: other inputs have strides (0, 1) or are
//                   scalars: one vector of N repeated along M
//                   ([M,N] op [N], NHWC op [C], leading-rank expansion)
//   kOuterBroadcast rank 2 [M, N]: other inputs have strides (1, 0) or are
//                   scalars: one value per row of N, broadcast along the row
//                   ([M,N] op [M,1])
//   kRepeatedBlock  rank 3 [P, C, Q]: other inputs have strides (0, 1, 0) or
//                   are scalars: per-channel values over contiguous blocks of
//                   Q ([N,C,H,W] op [C,1,1], [B,H,S,S] op [1,H,1,1])
//   kGeneral        anything else (outer products, alternating singletons)
#ifndef OLC_ELEMENTWISE_BROADCAST_H_
#define OLC_ELEMENTWISE_BROADCAST_H_

#include <cstdint>
#include <cstdio>

namespace olc_ew {

constexpr int kMaxBroadcastInputs = 16;
constexpr int kMaxBroadcastRank = 16;

enum class LoopFamily : int {
  kContiguous = 0,
  kLeftScalar,
  kRightScalar,
  kRepeatedBlock,
  kInnerVector,
  kOuterBroadcast,
  kGeneral,
  kCount
};

inline const char* loop_family_name(LoopFamily f) {
  switch (f) {
    case LoopFamily::kContiguous: return "contiguous";
    case LoopFamily::kLeftScalar: return "left_scalar";
    case LoopFamily::kRightScalar: return "right_scalar";
    case LoopFamily::kRepeatedBlock: return "repeated_block";
    case LoopFamily::kInnerVector: return "inner_vector";
    case LoopFamily::kOuterBroadcast: return "outer_broadcast";
    case LoopFamily::kGeneral: return "general";
    default: return "?";
  }
}

struct BroadcastPlan {
  int n_inputs = 0;
  int out_rank = 0;
  int64_t out_shape[kMaxBroadcastRank] = {};
  int64_t count = 0;
  int rank = 0;
  int64_t dims[kMaxBroadcastRank] = {};
  int64_t strides[kMaxBroadcastInputs][kMaxBroadcastRank] = {};
  int64_t inner = 0;
  int64_t blocks = 0;
  int64_t inner_stride[kMaxBroadcastInputs] = {};
  LoopFamily family = LoopFamily::kContiguous;

  // True when input i is one value for the whole output.
  bool is_scalar(int i) const {
    for (int d = 0; d < rank; ++d)
      if (strides[i][d] != 0 && dims[d] != 1) return false;
    return true;
  }
  // True when input i covers the whole output in output order.
  bool is_full(int i) const {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (strides[i][d] != s && dims[d] != 1) return false;
      s *= dims[d];
    }
    return true;
  }
};

namespace broadcast_detail {
inline bool fail(char* err, size_t n, const char* msg) {
  if (err && n) std::snprintf(err, n, "%s", msg);
  return false;
}
}  // namespace broadcast_detail

inline bool build_broadcast_plan(int n_inputs, const int32_t* ranks, const int64_t* const* shapes,
                                 BroadcastPlan* plan, char* err, size_t err_size) {
  using broadcast_detail::fail;
  BroadcastPlan& p = *plan;
  p = BroadcastPlan();
  if (n_inputs < 1 || n_inputs > kMaxBroadcastInputs)
    return fail(err, err_size, "broadcast: unsupported number of inputs");
  p.n_inputs = n_inputs;
  int out_rank = 0;
  for (int i = 0; i < n_inputs; ++i) {
    if (ranks[i] < 0 || ranks[i] > kMaxBroadcastRank)
      return fail(err, err_size, "broadcast: input rank above the supported maximum of 16");
    if (ranks[i] > out_rank) out_rank = ranks[i];
  }
  p.out_rank = out_rank;
  // Right-aligned output shape.
  for (int d = 0; d < out_rank; ++d) {
    int64_t size = 1;
    for (int i = 0; i < n_inputs; ++i) {
      const int off = out_rank - ranks[i];
      if (d < off) continue;
      const int64_t s = shapes[i][d - off];
      if (s < 0) return fail(err, err_size, "broadcast: negative dimension");
      if (s == 1) continue;
      if (size == 1) size = s;
      else if (s != size) {
        if (err && err_size)
          std::snprintf(err, err_size,
                        "shapes cannot be broadcast: input %d has dimension %lld where another input has %lld "
                        "(output axis %d)",
                        i, static_cast<long long>(s), static_cast<long long>(size), d);
        return false;
      }
    }
    p.out_shape[d] = size;
  }
  int64_t count = 1;
  for (int d = 0; d < out_rank; ++d) {
    const int64_t s = p.out_shape[d];
    if (s != 0 && count > INT64_MAX / s) return fail(err, err_size, "broadcast: output element count overflows int64");
    count *= s;
  }
  p.count = count;
  if (count == 0) {
    p.rank = 1;
    p.dims[0] = 0;
    p.inner = 0;
    p.blocks = 0;
    p.family = LoopFamily::kContiguous;
    return true;
  }
  // Element strides per input over the output dims (0 where broadcast),
  // dropping unit output dims.
  int64_t dims[kMaxBroadcastRank];
  int64_t st[kMaxBroadcastInputs][kMaxBroadcastRank];
  int r = 0;
  {
    int64_t run[kMaxBroadcastInputs];
    for (int i = 0; i < n_inputs; ++i) run[i] = 1;
    // Walk from the innermost dim outwards so strides accumulate.
    int64_t tmp_dims[kMaxBroadcastRank];
    int64_t tmp_st[kMaxBroadcastInputs][kMaxBroadcastRank];
    int k = 0;
    for (int d = out_rank - 1; d >= 0; --d) {
      const int64_t size = p.out_shape[d];
      if (size == 1) continue;
      tmp_dims[k] = size;
      for (int i = 0; i < n_inputs; ++i) {
        const int off = out_rank - ranks[i];
        const int64_t s = d < off ? 1 : shapes[i][d - off];
        if (s == 1) {
          tmp_st[i][k] = 0;
        } else {
          tmp_st[i][k] = run[i];
          run[i] *= s;
        }
      }
      ++k;
    }
    // Reverse into outermost-first order.
    for (int j = 0; j < k; ++j) {
      dims[j] = tmp_dims[k - 1 - j];
      for (int i = 0; i < n_inputs; ++i) st[i][j] = tmp_st[i][k - 1 - j];
    }
    r = k;
  }
  if (r == 0) {  // every output dim is 1: one element
    p.rank = 1;
    p.dims[0] = 1;
    for (int i = 0; i < n_inputs; ++i) p.strides[i][0] = 0;
  } else {
    // Coalesce: dim j-1 merges into dim j (its inner neighbour) when, for
    // every input, stride[j-1] == stride[j] * dims[j] (contiguous across the
    // pair, which holds for two broadcast dims too: 0 == 0 * n).
    int out = 0;
    p.dims[0] = dims[0];
    for (int i = 0; i < n_inputs; ++i) p.strides[i][0] = st[i][0];
    for (int j = 1; j < r; ++j) {
      bool merge = true;
      for (int i = 0; i < n_inputs && merge; ++i) merge = p.strides[i][out] == st[i][j] * dims[j];
      if (merge) {
        p.dims[out] *= dims[j];
        for (int i = 0; i < n_inputs; ++i) p.strides[i][out] = st[i][j];
      } else {
        ++out;
        p.dims[out] = dims[j];
        for (int i = 0; i < n_inputs; ++i) p.strides[i][out] = st[i][j];
      }
    }
    p.rank = out + 1;
  }
  p.inner = p.dims[p.rank - 1];
  p.blocks = count / p.inner;
  for (int i = 0; i < n_inputs; ++i) p.inner_stride[i] = p.strides[i][p.rank - 1];

  // Family.
  bool all_full = true;
  for (int i = 0; i < n_inputs; ++i) all_full = all_full && p.is_full(i);
  if (p.rank == 1) {
    if (all_full) p.family = LoopFamily::kContiguous;
    else p.family = p.is_scalar(0) && n_inputs > 1 ? LoopFamily::kLeftScalar : LoopFamily::kRightScalar;
    if (n_inputs == 1) p.family = LoopFamily::kContiguous;
    return true;
  }
  auto matches = [&](int64_t s0, int64_t s1, int64_t s2, int nd) {
    // Every input is full, scalar or has exactly the given stride pattern.
    bool seen = false;
    for (int i = 0; i < n_inputs; ++i) {
      if (p.is_full(i) || p.is_scalar(i)) continue;
      const int64_t* s = p.strides[i];
      const bool ok = nd == 2 ? (s[0] == s0 && s[1] == s1) : (s[0] == s0 && s[1] == s1 && s[2] == s2);
      if (!ok) return false;
      seen = true;
    }
    return seen;
  };
  bool any_full = false;
  for (int i = 0; i < n_inputs; ++i) any_full = any_full || p.is_full(i);
  p.family = LoopFamily::kGeneral;
  if (!any_full) return true;
  if (p.rank == 2) {
    if (matches(0, 1, 0, 2)) p.family = LoopFamily::kInnerVector;
    else if (matches(1, 0, 0, 2)) p.family = LoopFamily::kOuterBroadcast;
  } else if (p.rank == 3) {
    if (matches(0, 1, 0, 3)) p.family = LoopFamily::kRepeatedBlock;
  }
  return true;
}

// Walks inner blocks of a plan, keeping each input's element offset up to
// date by additions only.
struct BlockCursor {
  const BroadcastPlan* plan = nullptr;
  int64_t idx[kMaxBroadcastRank] = {};      // counters of dims [0, rank-1)
  int64_t offset[kMaxBroadcastInputs] = {};  // element offset of each input
  int64_t block = 0;                         // current block index

  BlockCursor() = default;
  explicit BlockCursor(const BroadcastPlan& p, int64_t start_block = 0) { seek(p, start_block); }

  // Positions the cursor at block b (0 <= b <= blocks). One division per
  // outer dimension, not per element.
  void seek(const BroadcastPlan& p, int64_t b) {
    plan = &p;
    block = b;
    for (int i = 0; i < p.n_inputs; ++i) offset[i] = 0;
    int64_t rem = b;
    for (int d = p.rank - 2; d >= 0; --d) {
      const int64_t q = rem / p.dims[d];
      idx[d] = rem - q * p.dims[d];
      rem = q;
      for (int i = 0; i < p.n_inputs; ++i) offset[i] += idx[d] * p.strides[i][d];
    }
  }

  // Advances to the next block.
  void next() {
    const BroadcastPlan& p = *plan;
    ++block;
    for (int d = p.rank - 2; d >= 0; --d) {
      if (++idx[d] < p.dims[d]) {
        for (int i = 0; i < p.n_inputs; ++i) offset[i] += p.strides[i][d];
        return;
      }
      idx[d] = 0;
      for (int i = 0; i < p.n_inputs; ++i) offset[i] -= p.strides[i][d] * (p.dims[d] - 1);
    }
  }
};

// Calls f(out_offset, in_offsets) for each inner block in [begin, end).
template <class F>
inline void for_each_block(const BroadcastPlan& p, int64_t begin, int64_t end, F&& f) {
  if (begin >= end || p.count == 0) return;
  BlockCursor c(p, begin);
  for (int64_t b = begin; b < end; ++b) {
    f(b * p.inner, static_cast<const int64_t*>(c.offset));
    c.next();
  }
}

}  // namespace olc_ew

#endif  // OLC_ELEMENTWISE_BROADCAST_H_
