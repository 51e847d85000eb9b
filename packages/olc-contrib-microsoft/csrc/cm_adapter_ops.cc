// Adapters of EmbedLayerNormalization, BiasSoftmax, CDist and
// GatherBlockQuantized: shape and index validation (all of it before the
// first output is allocated), geometry, and the split of the work over the
// session executor. The arithmetic is in the ISA engines and in
// cm_naive.cc.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cm_adapter_state.h"
#include "cm_common.h"

namespace olc_cm {
namespace {

// Integer tensor element i widened to int64.
inline int64_t id_at(const olc_tensor& t, int64_t i) {
  return t.dtype == OLC_DTYPE_INT32 ? static_cast<const int32_t*>(t.data)[i] : static_cast<const int64_t*>(t.data)[i];
}

// Splits [0, n) over the executor in ranges of at least `grain` items when
// `parallel`, else runs it here.
void for_ranges(olc_context* ctx, bool parallel, int64_t n, int64_t grain, olc_range_fn fn, void* user) {
  if (n <= 0) return;
  if (parallel && n > 1) g_api->parallel_for(ctx, n, std::max<int64_t>(1, grain), 0, fn, user);
  else fn(user, 0, n);
}

// ------------------------------------------------ EmbedLayerNormalization

struct EmbedJob {
  const KernelState* st;
  SkipRow row;
  const int64_t* word_ids;
  const int64_t* pos_ids;
  const int64_t* seg_ids;
  const char* word;
  const char* pos;
  const char* seg;
  char* y;
  char* sum;
  size_t rb;  // bytes per row
  std::atomic<bool>* oom;
};

void embed_rows(void* user, int64_t begin, int64_t end) {
  const EmbedJob& j = *static_cast<const EmbedJob*>(user);
  std::unique_ptr<float[]> scratch(new (std::nothrow) float[static_cast<size_t>(j.row.H)]);
  if (!scratch) {
    j.oom->store(true);
    return;
  }
  auto fn = j.st->k->skip_norm_row[j.st->dt];
  for (int64_t t = begin; t < end; ++t) {
    float mean, inv;
    fn(&j.row, j.word + j.word_ids[t] * j.rb, j.pos + j.pos_ids[t] * j.rb, j.seg ? j.seg + j.seg_ids[t] * j.rb : nullptr,
       j.y + t * j.rb, j.sum ? j.sum + t * j.rb : nullptr, scratch.get(), &mean, &inv);
  }
}

// Reads the ids of `t` (shape [B, S], or [1, S] broadcast over the batch
// when `broadcast`) into out[B * S], each checked against [0, rows).
int32_t read_ids(Ctx& c, const olc_tensor& t, const char* what, const char* table, int64_t rows, int64_t B, int64_t S,
                 bool broadcast, std::vector<int64_t>* out) {
  out->resize(static_cast<size_t>(B * S));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      const int64_t v = id_at(t, (broadcast ? 0 : b) * S + s);
      if (v < 0 || v >= rows)
        return c.err("%s[%lld, %lld] = %lld is out of range: %s has %lld rows", what,
                     static_cast<long long>(broadcast ? 0 : b), static_cast<long long>(s), static_cast<long long>(v),
                     table, static_cast<long long>(rows));
      (*out)[b * S + s] = v;
    }
  }
  return OLC_OK;
}

}  // namespace

int32_t run_embed(Ctx& c, const olc_tensor* in, int32_t n_inputs) {
  const KernelState* st = c.st;
  const olc_tensor& ids = in[0];
  if (ids.ndim != 2)
    return c.err("input_ids must have rank 2 [batch, sequence], got shape %s", shape_str(ids.ndim, ids.shape).c_str());
  const int64_t B = ids.shape[0], S = ids.shape[1], T = B * S;
  const std::string ids_shape = shape_str(ids.ndim, ids.shape);
  const bool has_seg = st->present[1];
  const bool has_mask = n_inputs > 7 && st->present[7];
  const bool has_pos_ids = n_inputs > 8 && st->present[8];
  for (int i : {1, 7}) {
    if ((i == 1 && !has_seg) || (i == 7 && !has_mask)) continue;
    if (!same_shape(in[i], ids))
      return c.err("%s has shape %s, expected the shape of input_ids %s", input_name(st->op, i),
                   shape_str(in[i].ndim, in[i].shape).c_str(), ids_shape.c_str());
  }
  for (int i : {2, 3, 4}) {
    if (i == 4 && !has_seg) continue;
    if (in[i].ndim != 2)
      return c.err("%s must have rank 2 [rows, hidden], got shape %s", input_name(st->op, i),
                   shape_str(in[i].ndim, in[i].shape).c_str());
  }
  const int64_t H = in[2].shape[1];
  for (int i : {3, 4}) {
    if (i == 4 && !has_seg) continue;
    if (in[i].shape[1] != H)
      return c.err("%s has shape %s, expected [rows, %lld] (the hidden size of word_embedding %s)",
                   input_name(st->op, i), shape_str(in[i].ndim, in[i].shape).c_str(), static_cast<long long>(H),
                   shape_str(in[2].ndim, in[2].shape).c_str());
  }
  for (int i : {5, 6}) {
    if (in[i].ndim != 1 || in[i].shape[0] != H)
      return c.err("%s has shape %s, expected [%lld] (the hidden size of word_embedding %s)", input_name(st->op, i),
                   shape_str(in[i].ndim, in[i].shape).c_str(), static_cast<long long>(H),
                   shape_str(in[2].ndim, in[2].shape).c_str());
  }
  bool pos_broadcast = false;
  if (has_pos_ids) {
    const olc_tensor& p = in[8];
    if (p.ndim != 2 || p.shape[1] != S || (p.shape[0] != B && p.shape[0] != 1))
      return c.err("position_ids has shape %s, expected [%lld, %lld] or [1, %lld] (from input_ids %s)",
                   shape_str(p.ndim, p.shape).c_str(), static_cast<long long>(B), static_cast<long long>(S),
                   static_cast<long long>(S), ids_shape.c_str());
    pos_broadcast = p.shape[0] == 1 && B != 1;
  }
  // Every id against its table, before any output exists.
  std::vector<int64_t> word_ids, pos_ids, seg_ids;
  if (read_ids(c, ids, "input_ids", "word_embedding", in[2].shape[0], B, S, false, &word_ids)) return OLC_ERROR;
  if (has_seg && read_ids(c, in[1], "segment_ids", "segment_embedding", in[4].shape[0], B, S, false, &seg_ids))
    return OLC_ERROR;
  const int64_t P = in[3].shape[0];
  if (has_pos_ids) {
    if (read_ids(c, in[8], "position_ids", "position_embedding", P, B, S, pos_broadcast, &pos_ids)) return OLC_ERROR;
  } else {
    if (S > P && T > 0)
      return c.err("the sequence length %lld is longer than position_embedding (%lld rows), and no position_ids "
                   "are given", static_cast<long long>(S), static_cast<long long>(P));
    pos_ids.resize(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) pos_ids[t] = t % S;
  }
  // Outputs.
  const int64_t yshape[3] = {B, S, H};
  void* y = g_api->allocate_output(c.ctx, 0, st->dtype, 3, yshape);
  if (!y && T * H > 0) return OLC_ERROR;
  if (st->want[1]) {
    int32_t* mi = static_cast<int32_t*>(g_api->allocate_output(c.ctx, 1, OLC_DTYPE_INT32, 1, &B));
    if (!mi && B > 0) return OLC_ERROR;
    // The number of mask values equal to 1 per sequence (onnxruntime's CPU
    // count); no mask: 0.
    for (int64_t b = 0; b < B; ++b) {
      int32_t n = 0;
      if (has_mask)
        for (int64_t s = 0; s < S; ++s) n += id_at(in[7], b * S + s) == 1;
      mi[b] = n;
    }
  }
  void* sum = nullptr;
  if (st->want[2]) {
    sum = g_api->allocate_output(c.ctx, 2, st->dtype, 3, yshape);
    if (!sum && T * H > 0) return OLC_ERROR;
  }
  g_api->record_usage_detail(c.ctx, st->isa);
  if (T == 0 || H == 0) return OLC_OK;
  if (st->naive) {
    naive::embed(st->dt, st->epsilon, word_ids.data(), pos_ids.data(), has_seg ? seg_ids.data() : nullptr, in[2].data,
                 in[3].data, has_seg ? in[4].data : nullptr, in[5].data, in[6].data, T, H, y, sum);
    return OLC_OK;
  }
  std::vector<float> gb, bb;
  EmbedJob j{};
  j.st = st;
  j.row.gamma = param_f32(st, in[5], &gb);
  j.row.beta = param_f32(st, in[6], &bb);
  j.row.bias = nullptr;
  j.row.H = H;
  j.row.eps = st->epsilon;
  j.row.simplified = 0;
  j.word_ids = word_ids.data();
  j.pos_ids = pos_ids.data();
  j.seg_ids = has_seg ? seg_ids.data() : nullptr;
  j.word = static_cast<const char*>(in[2].data);
  j.pos = static_cast<const char*>(in[3].data);
  j.seg = has_seg ? static_cast<const char*>(in[4].data) : nullptr;
  j.y = static_cast<char*>(y);
  j.sum = static_cast<char*>(sum);
  j.rb = static_cast<size_t>(H) * olc_dtype_size(st->dtype);
  std::atomic<bool> oom{false};
  j.oom = &oom;
  const int64_t grain = std::max<int64_t>(1, g_api->tuning_read_int(st->grain_elements) / H);
  for_ranges(c.ctx, go_parallel(st, c.ctx, T * H), T, grain, &embed_rows, &j);
  if (oom.load()) return c.err("out of memory (row buffers)");
  return OLC_OK;
}

// ------------------------------------------------------------ BiasSoftmax

namespace {

struct SoftmaxJob {
  const KernelState* st;
  const char* x;
  const char* bias;
  char* y;
  int64_t E;
  int64_t inner, outer;  // bias row of row r: r / inner (inner > 0), else r % outer
  size_t rb;
  std::atomic<bool>* oom;
};

void softmax_rows(void* user, int64_t begin, int64_t end) {
  const SoftmaxJob& j = *static_cast<const SoftmaxJob*>(user);
  std::unique_ptr<float[]> scratch;
  if (j.st->dt == kF16 || j.st->dt == kBF16) {
    scratch.reset(new (std::nothrow) float[static_cast<size_t>(j.E)]);
    if (!scratch) {
      j.oom->store(true);
      return;
    }
  }
  auto fn = j.st->k->bias_softmax_row[j.st->dt];
  for (int64_t r = begin; r < end; ++r) {
    const int64_t br = j.inner > 0 ? r / j.inner : r % j.outer;
    fn(j.x + r * j.rb, j.bias + br * j.rb, j.y + r * j.rb, scratch.get(), j.E);
  }
}

}  // namespace

int32_t run_bias_softmax(Ctx& c, const olc_tensor* in, int32_t n_inputs) {
  const KernelState* st = c.st;
  const olc_tensor& x = in[0];
  const olc_tensor& b = in[1];
  const int32_t r = x.ndim;
  if (st->axis < -r || st->axis >= r || r == 0)
    return c.err("axis %lld is out of range for data of rank %d", static_cast<long long>(st->axis), r);
  const int32_t a = static_cast<int32_t>(st->axis < 0 ? st->axis + r : st->axis);
  const std::string xs = shape_str(x.ndim, x.shape), bs = shape_str(b.ndim, b.shape);
  if (b.ndim > r) return c.err("bias has shape %s, of a higher rank than data %s", bs.c_str(), xs.c_str());
  // The bias right-aligned with data, missing leading dimensions 1.
  std::vector<int64_t> bd(static_cast<size_t>(r), 1);
  for (int32_t d = 0; d < b.ndim; ++d) bd[static_cast<size_t>(r - b.ndim + d)] = b.shape[d];
  for (int32_t d = a; d < r; ++d)
    if (bd[d] != x.shape[d])
      return c.err("bias has shape %s; its dimensions from axis %d on must equal those of data %s", bs.c_str(), a,
                   xs.c_str());
  const int64_t rows = dims_product(x, 0, a), E = dims_product(x, a, r);
  int64_t bias_rows = 1;
  for (int32_t d = 0; d < a; ++d) bias_rows *= bd[d];
  if (st->inner_broadcast) {
    // [d0 .. d(k-1), 1 .. 1]: the leading dimensions of data, then ones.
    int32_t k = 0;
    while (k < a && bd[k] == x.shape[k]) ++k;
    for (int32_t d = k; d < a; ++d)
      if (bd[d] != 1)
        return c.err("bias has shape %s; with is_inner_broadcast=1 its dimensions before axis %d must be those of "
                     "data %s up to some axis and 1 after it", bs.c_str(), a, xs.c_str());
  } else {
    // [1 .. 1, dk .. d(a-1)]: ones, then the trailing dimensions of data.
    int32_t k = a;
    while (k > 0 && bd[k - 1] == x.shape[k - 1]) --k;
    for (int32_t d = 0; d < k; ++d)
      if (bd[d] != 1)
        return c.err("bias has shape %s; with is_inner_broadcast=0 its dimensions before axis %d must be 1 up to some "
                     "axis and those of data %s after it", bs.c_str(), a, xs.c_str());
  }
  void* y = g_api->allocate_output(c.ctx, 0, st->dtype, x.ndim, x.shape);
  if (!y && rows * E > 0) return OLC_ERROR;
  g_api->record_usage_detail(c.ctx, st->isa);
  if (rows == 0 || E == 0) return OLC_OK;
  // Consecutive rows sharing a bias row (inner), or the bias rows cycling (outer).
  const int64_t inner = st->inner_broadcast ? rows / bias_rows : 0;
  const int64_t outer = bias_rows;
  if (st->naive) {
    naive::bias_softmax(st->dt, x.data, b.data, rows, E, inner, outer, y);
    return OLC_OK;
  }
  std::atomic<bool> oom{false};
  SoftmaxJob j{st, static_cast<const char*>(x.data), static_cast<const char*>(b.data), static_cast<char*>(y), E,
               inner, outer, static_cast<size_t>(E) * olc_dtype_size(st->dtype), &oom};
  const int64_t grain = std::max<int64_t>(1, g_api->tuning_read_int(st->grain_elements) / E);
  for_ranges(c.ctx, go_parallel(st, c.ctx, rows * E), rows, grain, &softmax_rows, &j);
  if (oom.load()) return c.err("out of memory (row buffers)");
  return OLC_OK;
}

// ------------------------------------------------------------------ CDist

namespace {

// Panel width in vectors: four where N fills them, fewer for narrow B.
int cdist_nv(const IsaKernels* k, int dt, int64_t N) {
  const int64_t lanes = k->cdist_lanes[dt];
  if (N >= 3 * lanes) return std::min(4, k->cdist_max_nv[dt]);
  if (N > lanes) return 2;
  return 1;
}

int64_t cdist_panels(int64_t N, int64_t nr) { return (N + nr - 1) / nr; }

constexpr int64_t kRowChunk = 96;  // rows of A per work item (cm_cdist.inc's chunk: kRows)
// Rows per item where 96-row chunks make too few items for the threads (a
// multiple of every tile height too).
constexpr int64_t kSmallRowChunk = 24;
// Panels per work item: enough columns that copying the chunk's slice of A
// once per item costs little beside its products.
constexpr int64_t kPanelGroup = 16;

struct CDistJob {
  const KernelState* st;
  CDistArgs args;
  int64_t panels;
  int64_t groups;  // panel groups per row chunk
  int64_t rows;    // rows of A per row chunk
};

// Items are (row chunk, panel group) pairs, chunk-major: a range of items
// keeps the chunk's rows of A in cache while the panels of B stream.
void cdist_items(void* user, int64_t begin, int64_t end) {
  const CDistJob& j = *static_cast<const CDistJob*>(user);
  const int dt = j.st->dt;
  for (int64_t t = begin; t < end;) {
    const int64_t rc = t / j.groups, g0 = t % j.groups;
    const int64_t g1 = std::min(j.groups, g0 + (end - t));
    j.st->k->cdist_rows[dt](&j.args, rc * j.rows, std::min(j.args.M, (rc + 1) * j.rows), g0 * kPanelGroup,
                            std::min(j.panels, g1 * kPanelGroup));
    t += g1 - g0;
  }
}

void cdist_direct_items(void* user, int64_t begin, int64_t end) {
  const CDistJob& j = *static_cast<const CDistJob*>(user);
  j.st->k->cdist_direct[j.st->dt](&j.args, 0, j.args.M, begin, end);
}

}  // namespace

bool cdist_prepare(KernelState* st, const olc_node_info* node, char* error, size_t es) {
  const olc_tensor& b = node->input_constants[1];
  if (!b.data || b.ndim != 2 || b.dtype != st->dtype) return true;  // packed per run
  const int64_t N = b.shape[0], K = b.shape[1];
  if (N <= 0 || K <= 0) return true;
  const int dt = st->dt;
  st->cdist_nv = cdist_nv(st->k, dt, N);
  const int64_t nr = st->cdist_nv * st->k->cdist_lanes[dt];
  const size_t es_t = olc_dtype_size(st->dtype);
  const int64_t panels = cdist_panels(N, nr);
  try {
    st->packed_b.resize(static_cast<size_t>(panels * nr * K) * es_t);
    st->b_ss.assign(static_cast<size_t>(panels * nr) * es_t, 0);
  } catch (const std::bad_alloc&) {
    snprintf(error, es, "out of memory packing B");
    return false;
  }
  st->k->cdist_pack_b[dt](b.data, N, K, st->cdist_nv, st->packed_b.data());
  st->k->cdist_sumsq[dt](b.data, N, K, st->b_ss.data());
  st->b_packed = true;
  st->b_rows = N;
  st->b_cols = K;
  if (OLC_API_HAS(g_api, report_prepacked))
    g_api->report_prepacked(node, st->packed_b.data(), static_cast<int64_t>(st->packed_b.size() + st->b_ss.size()));
  return true;
}

int32_t run_cdist(Ctx& c, const olc_tensor* in, int32_t n_inputs) {
  const KernelState* st = c.st;
  const olc_tensor& A = in[0];
  const olc_tensor& B = in[1];
  if (A.ndim != 2) return c.err("A must have rank 2 [M, K], got shape %s", shape_str(A.ndim, A.shape).c_str());
  if (B.ndim != 2 || B.shape[1] != A.shape[1])
    return c.err("B has shape %s, expected [N, %lld] (the columns of A %s)", shape_str(B.ndim, B.shape).c_str(),
                 static_cast<long long>(A.shape[1]), shape_str(A.ndim, A.shape).c_str());
  const int64_t M = A.shape[0], N = B.shape[0], K = A.shape[1];
  const int64_t cshape[2] = {M, N};
  void* C = g_api->allocate_output(c.ctx, 0, st->dtype, 2, cshape);
  if (!C && M * N > 0) return OLC_ERROR;
  g_api->record_usage_detail(c.ctx, st->isa);
  if (M * N == 0) return OLC_OK;
  const size_t es = olc_dtype_size(st->dtype);
  if (K == 0) {
    std::memset(C, 0, static_cast<size_t>(M * N) * es);  // distances of empty vectors
    return OLC_OK;
  }
  if (st->naive) {
    naive::cdist(st->dt, A.data, B.data, M, N, K, st->euclidean, C);
    return OLC_OK;
  }
  const int dt = st->dt;
  CDistJob j{};
  j.st = st;
  CDistArgs& a = j.args;
  a.A = A.data;
  a.B = B.data;
  a.C = C;
  a.M = M;
  a.N = N;
  a.K = K;
  a.euclidean = st->euclidean;
  const bool parallel = go_parallel(st, c.ctx, M * N * K);
  const bool prepacked = st->b_packed && st->b_rows == N && st->b_cols == K;
  if (M <= g_api->tuning_read_int(st->direct_max_rows)) {
    // Few rows: exact sums, each B row read once; ranges of about 64K
    // multiply-adds (the rows stream from memory: two threads help early).
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, M * K));
    for_ranges(c.ctx, parallel, N, grain, &cdist_direct_items, &j);
    return OLC_OK;
  }
  std::vector<unsigned char> packed, b_ss;
  std::vector<unsigned char> a_ss(static_cast<size_t>(M) * es);
  a.nv = prepacked ? st->cdist_nv : cdist_nv(st->k, dt, N);
  const int64_t nr = a.nv * st->k->cdist_lanes[dt];
  const int64_t panels = cdist_panels(N, nr);
  if (prepacked) {
    a.packed = st->packed_b.data();
    a.b_ss = st->b_ss.data();
  } else {
    packed.resize(static_cast<size_t>(panels * nr * K) * es);
    b_ss.assign(static_cast<size_t>(panels * nr) * es, 0);
    st->k->cdist_pack_b[dt](B.data, N, K, a.nv, packed.data());
    st->k->cdist_sumsq[dt](B.data, N, K, b_ss.data());
    a.packed = packed.data();
    a.b_ss = b_ss.data();
  }
  st->k->cdist_sumsq[dt](A.data, M, K, a_ss.data());
  a.a_ss = a_ss.data();
  j.panels = panels;
  j.groups = (panels + kPanelGroup - 1) / kPanelGroup;
  // 128 rows against 256 columns in 48-row chunks were three items (the
  // 256 columns one panel group): two threads ran them as two and one, no
  // faster than one thread. Small chunks when items are few: 6 here.
  j.rows = kRowChunk;
  const int64_t threads = parallel ? g_api->concurrency(c.ctx) : 1;
  if (threads > 1 && (M + kRowChunk - 1) / kRowChunk * j.groups < 4 * threads) j.rows = kSmallRowChunk;
  const int64_t row_chunks = (M + j.rows - 1) / j.rows;
  for_ranges(c.ctx, parallel, row_chunks * j.groups, 1, &cdist_items, &j);
  return OLC_OK;
}

// --------------------------------------------------- GatherBlockQuantized

namespace {

struct GbqGeometry {
  int64_t GM, GD, GB;   // data as [GM, GD, GB] around the gather axis
  int64_t QD, QN, nb;   // the quantize axis: QD elements, QN after it, nb blocks
  int64_t P;            // for quantize axis > gather axis: the elements' rows between them
  int rel;              // quantize axis relative to the gather axis: -1 before, 0 same, 1 after
  int64_t comp;         // elements per data byte (packed uint8: 2 or 4)
};

struct GbqJob {
  const KernelState* st;
  GbqGeometry g;
  const uint8_t* data;
  const int64_t* idx;
  int64_t n_idx;
  const char* scales;
  const uint8_t* zp;
  char* y;
  size_t es;  // output / scale element bytes
  std::atomic<bool>* oom;
};

// The zero point of block `blk` in the zero-point row starting at `row`.
int32_t zp_of_block(int fmt, const uint8_t* row, int64_t blk) {
  switch (fmt) {
    case kQU4: return row[blk] & 15;
    case kQI4: return ((row[blk] & 15) ^ 8) - 8;
    case kQP4: return (row[blk >> 1] >> ((blk & 1) * 4)) & 15;
    case kQP2: return (row[blk >> 2] >> ((blk & 3) * 2)) & 3;
    default: return row[blk];
  }
}

void gbq_chunks(void* user, int64_t begin, int64_t end) {
  const GbqJob& j = *static_cast<const GbqJob*>(user);
  const KernelState* st = j.st;
  const GbqGeometry& g = j.g;
  const int fmt = st->qfmt;
  const int dt = st->dt;
  const int64_t bs = st->block_size;
  std::unique_ptr<float[]> sbuf;
  std::unique_ptr<int32_t[]> zbuf;
  if (g.rel > 0 && g.QN == 1) {
    sbuf.reset(new (std::nothrow) float[static_cast<size_t>(g.nb)]);
    zbuf.reset(new (std::nothrow) int32_t[static_cast<size_t>(g.nb)]);
    if (!sbuf || !zbuf) {
      j.oom->store(true);
      return;
    }
  }
  const int64_t zp_row_bytes = (fmt == kQP4 || fmt == kQP2) ? (g.nb + g.comp - 1) / g.comp : g.nb;
  for (int64_t chunk = begin; chunk < end; ++chunk) {
    const int64_t m = chunk / j.n_idx;
    char* out = j.y + chunk * g.GB * j.es;
    int64_t gi = j.idx[chunk % j.n_idx];
    if (gi < -g.GD || gi >= g.GD) {
      std::memset(out, 0, static_cast<size_t>(g.GB) * j.es);  // out of range: zeros, as the schema says
      continue;
    }
    if (gi < 0) gi += g.GD;
    if (g.rel > 0) {
      // Rows x of [QD, QN] elements inside the chunk.
      const int64_t x0 = (m * g.GD + gi) * g.P;
      for (int64_t p = 0; p < g.P; ++p) {
        const int64_t x = x0 + p;
        char* o = out + p * g.QD * g.QN * j.es;
        if (g.QN == 1) {
          // The quantize axis innermost: blocks of the row share a scale.
          const char* srow = j.scales + x * g.nb * j.es;
          if (dt == kF32) std::memcpy(sbuf.get(), srow, static_cast<size_t>(g.nb) * 4);
          else st->k->to_f32[dt](srow, sbuf.get(), g.nb);
          for (int64_t blk = 0; blk < g.nb; ++blk)
            zbuf[blk] = j.zp ? zp_of_block(fmt, j.zp + x * zp_row_bytes, blk) : st->default_zp;
          st->k->dq_blocks[dt](fmt, j.data + x * g.QD / g.comp, sbuf.get(), zbuf.get(), g.QD, bs, o);
        } else {
          for (int64_t yy = 0; yy < g.QD; ++yy) {
            const int64_t s0 = (x * g.nb + yy / bs) * g.QN;
            st->k->dq_elems[dt](fmt, j.data + (x * g.QD + yy) * g.QN, j.scales + s0 * j.es, j.zp ? j.zp + s0 : nullptr,
                                st->default_zp, g.QN, o + yy * g.QN * j.es);
          }
        }
      }
    } else {
      // The chunk lies inside one (x, y) of the quantize view: its scales
      // are one contiguous run.
      const int64_t base = (m * g.GD + gi) * g.GB;
      const int64_t x = base / (g.QD * g.QN), yy = (base / g.QN) % g.QD, z0 = base % g.QN;
      const int64_t s0 = (x * g.nb + yy / bs) * g.QN + z0;
      st->k->dq_elems[dt](fmt, j.data + base, j.scales + s0 * j.es, j.zp ? j.zp + s0 : nullptr, st->default_zp, g.GB,
                          out);
    }
  }
}

}  // namespace

int32_t run_gather_bq(Ctx& c, const olc_tensor* in, int32_t n_inputs) {
  const KernelState* st = c.st;
  const olc_tensor& data = in[0];
  const olc_tensor& idx = in[1];
  const olc_tensor& scales = in[2];
  const bool has_zp = n_inputs > 3 && st->present[3];
  const int32_t r = data.ndim;
  if (r < 1) return c.err("data must have rank >= 1, got a scalar");
  if (st->gather_axis < -r || st->gather_axis >= r)
    return c.err("attribute 'gather_axis' %lld is out of range for data of rank %d",
                 static_cast<long long>(st->gather_axis), r);
  if (st->quantize_axis < -r || st->quantize_axis >= r)
    return c.err("attribute 'quantize_axis' %lld is out of range for data of rank %d",
                 static_cast<long long>(st->quantize_axis), r);
  const int32_t ga = static_cast<int32_t>(st->gather_axis < 0 ? st->gather_axis + r : st->gather_axis);
  const int32_t qa = static_cast<int32_t>(st->quantize_axis < 0 ? st->quantize_axis + r : st->quantize_axis);
  const int fmt = st->qfmt;
  const bool packed = fmt == kQP4 || fmt == kQP2;
  const int64_t comp = fmt == kQP4 ? 2 : fmt == kQP2 ? 4 : 1;
  if (packed && (qa != r - 1 || ga == qa))
    return c.err("uint8 data with bits=%lld packs along the last axis: quantize_axis must be the last axis (%d) and "
                 "gather_axis another one (got gather_axis %d, quantize_axis %d)",
                 static_cast<long long>(st->bits), r - 1, ga, qa);
  // Logical dims (the packed axis unpacked).
  std::vector<int64_t> D(data.shape, data.shape + r);
  D[static_cast<size_t>(r - 1)] *= packed ? comp : 1;
  const int64_t bs = st->block_size;
  const int64_t nb = (D[qa] + bs - 1) / bs;
  const std::string ds = shape_str(data.ndim, data.shape);
  // scales: data's shape with the quantize axis in blocks
  bool ok = scales.ndim == r;
  for (int32_t d = 0; ok && d < r; ++d) ok = scales.shape[d] == (d == qa ? nb : D[d]);
  if (!ok) {
    std::vector<int64_t> want(D);
    want[qa] = nb;
    return c.err("scales has shape %s, expected %s (data %s, %lld-element blocks along axis %d)",
                 shape_str(scales.ndim, scales.shape).c_str(), shape_str(r, want.data()).c_str(), ds.c_str(),
                 static_cast<long long>(bs), qa);
  }
  if (has_zp) {
    const olc_tensor& z = in[3];
    std::vector<int64_t> want(scales.shape, scales.shape + r);
    if (packed) want[qa] = (nb + comp - 1) / comp;
    bool zok = z.ndim == r;
    for (int32_t d = 0; zok && d < r; ++d) zok = z.shape[d] == want[d];
    if (!zok)
      return c.err("zero_points has shape %s, expected %s%s", shape_str(z.ndim, z.shape).c_str(),
                   shape_str(r, want.data()).c_str(), packed ? " (the scales' shape, packed along the last axis)" :
                   " (the shape of scales)");
  }
  // Output shape: data's with the gather axis replaced by the indices' shape.
  std::vector<int64_t> oshape(D.begin(), D.begin() + ga);
  oshape.insert(oshape.end(), idx.shape, idx.shape + idx.ndim);
  oshape.insert(oshape.end(), D.begin() + ga + 1, D.end());
  GbqGeometry g{};
  g.GM = 1;
  for (int32_t d = 0; d < ga; ++d) g.GM *= D[d];
  g.GD = D[ga];
  g.GB = 1;
  for (int32_t d = ga + 1; d < r; ++d) g.GB *= D[d];
  g.QD = D[qa];
  g.QN = 1;
  for (int32_t d = qa + 1; d < r; ++d) g.QN *= D[d];
  g.nb = nb;
  g.P = 1;
  for (int32_t d = ga + 1; d < qa; ++d) g.P *= D[d];
  g.rel = qa > ga ? 1 : qa == ga ? 0 : -1;
  g.comp = comp;
  const int64_t n_idx = olc_element_count(&idx);
  {
    // The output must be countable.
    olc_tensor probe{st->dtype, static_cast<int32_t>(oshape.size()), oshape.data(), nullptr};
    if (olc_element_count(&probe) < 0) return c.err("the output %s has too many elements", shape_str(probe.ndim, oshape.data()).c_str());
  }
  std::vector<int64_t> ids(static_cast<size_t>(n_idx));
  for (int64_t i = 0; i < n_idx; ++i) ids[i] = id_at(idx, i);
  void* y = g_api->allocate_output(c.ctx, 0, st->dtype, static_cast<int32_t>(oshape.size()), oshape.data());
  const int64_t total = g.GM * n_idx * g.GB;
  if (!y && total > 0) return OLC_ERROR;
  g_api->record_usage_detail(c.ctx, st->isa);
  if (total == 0) return OLC_OK;
  const uint8_t* zp = has_zp ? static_cast<const uint8_t*>(in[3].data) : nullptr;
  if (st->naive) {
    naive::gather_block_quantized(st->dt, fmt, static_cast<const uint8_t*>(data.data), D.data(), r, ids.data(), n_idx,
                                  scales.data, zp, st->default_zp, ga, qa, bs, y);
    return OLC_OK;
  }
  std::atomic<bool> oom{false};
  GbqJob j{st, g, static_cast<const uint8_t*>(data.data), ids.data(), n_idx, static_cast<const char*>(scales.data), zp,
           static_cast<char*>(y), olc_dtype_size(st->dtype), &oom};
  const int64_t grain = std::max<int64_t>(1, g_api->tuning_read_int(st->grain_elements) / std::max<int64_t>(1, g.GB));
  for_ranges(c.ctx, go_parallel(st, c.ctx, total), g.GM * n_idx, grain, &gbq_chunks, &j);
  if (oom.load()) return c.err("out of memory (row buffers)");
  return OLC_OK;
}

}  // namespace olc_cm
