// The tree ensemble adapters: TreeEnsembleRegressor / TreeEnsembleClassifier
// (ai.onnx.ml 1-4) and TreeEnsemble (ai.onnx.ml 5). create() reads the
// attributes (as olc_ml/attributes.py restates them: modes as codes,
// float64 tensors as FLOATS, the input's feature count when inference knows
// it), checks them and compiles the forest once; run() checks the input,
// allocates the outputs and splits the work (rows, or trees when rows are
// few) over the session's executor.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>

#include "adapter_util.h"
#include "attrs.h"
#include "half.h"
#include "ml_adapter.h"
#include "tree_engine.h"

namespace olc_ml {

namespace {

const olc_core_api* g_api = nullptr;

struct Tuning {
  olc_tuning_param* serial_steps = nullptr;   // below this many node visits: one thread
  olc_tuning_param* split_steps = nullptr;    // few rows: from this many node visits, trees split over threads
  olc_tuning_param* branch_free = nullptr;    // top levels walked without leaf tests
  olc_tuning_param* row_group = nullptr;      // rows scored together, tree by tree
};
Tuning g_tuning;

enum class Form { kRegressor, kClassifier, kEnsemble };

// ai.onnx.ml 1-4: the node tables, leaf weights and output rules.
std::string parse_v3(bool classifier, const Attrs& at, SpecV3* s, OutputSpec* out) {
  const olc_attribute* nodeids = at.ints("nodes_nodeids");
  if (!nodeids) return "attribute nodes_nodeids is required";
  const int64_t n = nodeids->count;
  s->n_nodes = n;
  s->nodeids = nodeids->ints;
  OLC_TRY(at.ints_of_length("nodes_treeids", n, &s->treeids));
  OLC_TRY(at.ints_of_length("nodes_featureids", n, &s->featureids));
  OLC_TRY(at.ints_of_length("nodes_truenodeids", n, &s->truenodeids));
  OLC_TRY(at.ints_of_length("nodes_falsenodeids", n, &s->falsenodeids));
  OLC_TRY(at.ints_of_length("nodes_modes", n, &s->modes));
  OLC_TRY(at.floats_of_length("nodes_values", n, &s->values));
  OLC_TRY(at.optional_ints_of_length("nodes_missing_value_tracks_true", n, &s->missing_true));
  const std::string p = classifier ? "class_" : "target_";
  const olc_attribute* ids = at.ints(p + "ids");
  s->n_weights = ids ? ids->count : 0;
  s->w_ids = ids ? ids->ints : nullptr;
  OLC_TRY(at.optional_ints_of_length(p + "treeids", s->n_weights, &s->w_treeids));
  OLC_TRY(at.optional_ints_of_length(p + "nodeids", s->n_weights, &s->w_nodeids));
  OLC_TRY(at.optional_floats_of_length(p + "weights", s->n_weights, &s->w_values));
  if (s->n_weights && !(s->w_treeids && s->w_nodeids && s->w_values))
    return p + "ids, " + p + "nodeids, " + p + "treeids and " + p + "weights must all be set";
  const olc_attribute* base = at.floats("base_values");
  if (base) out->base_values.assign(base->floats, base->floats + base->count);
  std::string post;
  OLC_TRY(at.string("post_transform", "NONE", &post));
  OLC_TRY(parse_post_transform(post, &out->post));
  out->classifier = classifier;
  const size_t nb = out->base_values.size();
  if (classifier) {
    const olc_attribute* labels = at.ints("classlabels_int64s");
    if (!labels || labels->count < 1) return "needs int64 class labels (classlabels_int64s)";
    out->class_labels.assign(labels->ints, labels->ints + labels->count);
    out->n_targets = labels->count;
    if (out->n_targets < 2) return "needs at least two class labels";
    if (nb != 0 && nb != out->class_labels.size() && !(out->class_labels.size() == 2 && nb == 1))
      return "base_values has " + std::to_string(nb) + " entries for " + std::to_string(out->class_labels.size()) +
             " classes";
  } else {
    std::string agg;
    OLC_TRY(at.string("aggregate_function", "SUM", &agg));
    if (agg == "SUM") out->aggregate = kSum;
    else if (agg == "AVERAGE") out->aggregate = kAverage;
    else if (agg == "MIN") out->aggregate = kMin;
    else if (agg == "MAX") out->aggregate = kMax;
    else return "unknown aggregate_function '" + agg + "' (SUM, AVERAGE, MIN or MAX)";
    int64_t nt = 0;
    OLC_TRY(at.integer("n_targets", 0, &nt));
    if (nt < 1) return "n_targets must be set to a positive int";
    out->n_targets = nt;
    if (nb != 0 && nb != static_cast<size_t>(nt) && nb != 1)
      return "base_values has " + std::to_string(nb) + " entries for " + std::to_string(nt) + " targets";
  }
  return "";
}

// ai.onnx.ml 5.
std::string parse_v5(const Attrs& at, SpecV5* s, OutputSpec* out) {
  const olc_attribute* feats = at.ints("nodes_featureids");
  if (!feats) return "attribute nodes_featureids is required";
  const int64_t n = feats->count;
  s->n_nodes = n;
  s->featureids = feats->ints;
  OLC_TRY(at.ints_of_length("nodes_truenodeids", n, &s->truenodeids));
  OLC_TRY(at.ints_of_length("nodes_trueleafs", n, &s->trueleafs));
  OLC_TRY(at.ints_of_length("nodes_falsenodeids", n, &s->falsenodeids));
  OLC_TRY(at.ints_of_length("nodes_falseleafs", n, &s->falseleafs));
  OLC_TRY(at.ints_of_length("nodes_modes", n, &s->modes));
  OLC_TRY(at.floats_of_length("nodes_splits", n, &s->splits));
  OLC_TRY(at.optional_ints_of_length("nodes_missing_value_tracks_true", n, &s->missing_true));
  const olc_attribute* targets = at.ints("leaf_targetids");
  if (!targets) return "attribute leaf_targetids is required";
  s->n_leaves = targets->count;
  s->leaf_targetids = targets->ints;
  OLC_TRY(at.floats_of_length("leaf_weights", s->n_leaves, &s->leaf_weights));
  const olc_attribute* roots = at.ints("tree_roots");
  if (!roots || roots->count == 0) return "attribute tree_roots is required";
  s->n_trees = roots->count;
  s->tree_roots = roots->ints;
  if (const olc_attribute* m = at.floats("membership_values")) {
    s->membership = m->floats;
    s->n_membership = m->count;
  }
  int64_t nt = 0, agg = 1, post = 0;
  OLC_TRY(at.integer("n_targets", 0, &nt));
  if (nt < 1) return "n_targets must be set to a positive int";
  out->n_targets = nt;
  OLC_TRY(at.integer("aggregate_function", 1, &agg));
  // The schema's codes: AVERAGE 0, SUM 1, MIN 2, MAX 3.
  switch (agg) {
    case 0: out->aggregate = kAverage; break;
    case 1: out->aggregate = kSum; break;
    case 2: out->aggregate = kMin; break;
    case 3: out->aggregate = kMax; break;
    default: return "unknown aggregate_function " + std::to_string(agg) + " (0 AVERAGE, 1 SUM, 2 MIN, 3 MAX)";
  }
  OLC_TRY(at.integer("post_transform", 0, &post));
  // The schema's codes: NONE 0, SOFTMAX 1, LOGISTIC 2, SOFTMAX_ZERO 3, PROBIT 4.
  if (post < 0 || post > 4)
    return "unknown post_transform " + std::to_string(post) +
           " (0 NONE, 1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO, 4 PROBIT)";
  out->post = static_cast<PostTransform>(post);
  return "";
}

struct State {
  Form form = Form::kRegressor;
  int32_t in_dtype = OLC_DTYPE_FLOAT;
  int32_t out_dtype = OLC_DTYPE_FLOAT;
  bool is_double = false;  // thresholds and sums in float64
  Forest<float> ff;
  Forest<double> fd;
  int64_t n_targets = 1;
  int64_t max_feature = -1;
  int64_t sum_depth = 0;
  int64_t n_trees = 0;
};

std::string build(Form form, const Attrs& at, State* st) {
  OutputSpec out;
  const int levels = g_tuning.branch_free ? static_cast<int>(g_api->tuning_read_int(g_tuning.branch_free)) : 10;
  std::string e;
  if (form == Form::kEnsemble) {
    SpecV5 spec;
    OLC_TRY(parse_v5(at, &spec, &out));
    e = st->is_double ? compile_v5(spec, out, levels, &st->fd) : compile_v5(spec, out, levels, &st->ff);
  } else {
    SpecV3 spec;
    OLC_TRY(parse_v3(form == Form::kClassifier, at, &spec, &out));
    e = st->is_double ? compile_v3(spec, out, levels, &st->fd) : compile_v3(spec, out, levels, &st->ff);
  }
  if (!e.empty()) return e;
  st->max_feature = st->is_double ? st->fd.max_feature : st->ff.max_feature;
  st->sum_depth = st->is_double ? st->fd.sum_depth : st->ff.sum_depth;
  st->n_trees = st->is_double ? st->fd.n_trees : st->ff.n_trees;
  st->n_targets = out.n_targets;
  int64_t n_features = -1;
  OLC_TRY(at.integer("n_features", -1, &n_features));
  if (n_features >= 0 && st->max_feature >= n_features)
    return "a branch reads feature " + std::to_string(st->max_feature) + " but the input has " +
           std::to_string(n_features) + " features";
  return "";
}

template <typename T, typename O>
struct Job {
  const Forest<T>* f;
  const T* x;
  int64_t nf, rows;
  O* z;
  int64_t* label;
  int64_t group;
  // tree-parallel
  int64_t tree_chunks, trees_per_chunk, part_stride;  // part_stride: elements between shares' scores
  std::vector<T>* part_acc;
  std::vector<uint8_t>* part_has;
};

// Trees are scored in chunks of about this many bytes of nodes, each chunk
// over every row of the range (a group of rows at a time), so a forest
// larger than the L2 cache is read from memory once per range, not once per
// row group. The sum per row stays in tree order.
constexpr int64_t kTreeChunkBytes = 192 * 1024;
// ... and the rows in blocks of about this many bytes of input, every chunk
// of trees over one block before the next block: a block stays in L2 while
// the chunks walk it (a range of 100,000 rows of 200 features, 80 MB, read
// at random once per chunk, ran 4-6 times slower per row than 1,000 rows).
constexpr int64_t kRowBlockBytes = 512 * 1024;

template <typename T, typename O>
void score_rows(const Job<T, O>& j, int64_t r0, int64_t r1) {
  const Forest<T>& f = *j.f;
  const int64_t nt = f.n_targets;
  const int64_t row_bytes = std::max<int64_t>(1, j.nf * static_cast<int64_t>(sizeof(T)));
  const int64_t block = std::max<int64_t>(1, kRowBlockBytes / row_bytes / j.group) * j.group;
  std::vector<T> acc(static_cast<size_t>(std::min(block, r1 - r0) * nt));
  std::vector<uint8_t> has(acc.size());
  for (int64_t b0 = r0; b0 < r1; b0 += block) {
    const int64_t b1 = std::min(r1, b0 + block);
    std::fill(acc.begin(), acc.end(), T(0));
    std::fill(has.begin(), has.end(), 0);
    int64_t t0 = 0;
    while (t0 < f.n_trees) {
      int64_t t1 = t0 + 1;
      const int64_t first = f.roots[static_cast<size_t>(t0)];
      while (t1 < f.n_trees &&
             (f.roots[static_cast<size_t>(t1)] - first) * static_cast<int64_t>(sizeof(Node<T>)) < kTreeChunkBytes)
        ++t1;
      if (b1 - b0 < j.group) t1 = f.n_trees;  // one group: the chunks would not be reused
      for (int64_t g = b0; g < b1; g += j.group) {
        const int64_t ge = std::min(b1, g + j.group);
        accumulate(f, j.x, j.nf, g, ge, t0, t1, acc.data() + (g - b0) * nt, has.data() + (g - b0) * nt);
      }
      t0 = t1;
    }
    for (int64_t r = b0; r < b1; ++r)
      finalize_row(f, acc.data() + (r - b0) * nt, has.data() + (r - b0) * nt, j.z + r * nt,
                   j.label ? j.label + r : nullptr);
  }
}

template <typename T, typename O>
void rows_range(void* user, int64_t b, int64_t e) {
  score_rows(*static_cast<const Job<T, O>*>(user), b, e);
}

// Few rows, many trees: thread c walks its own contiguous share of the trees
// (whole blocks of the engine's 16-tree walk) into its own partial scores.
template <typename T, typename O>
void trees_range(void* user, int64_t b, int64_t e) {
  const Job<T, O>& j = *static_cast<const Job<T, O>*>(user);
  for (int64_t c = b; c < e; ++c) {
    const int64_t t0 = c * j.trees_per_chunk, t1 = std::min(j.f->n_trees, t0 + j.trees_per_chunk);
    if (t0 >= t1) continue;
    accumulate(*j.f, j.x, j.nf, 0, j.rows, t0, t1, j.part_acc->data() + c * j.part_stride,
               j.part_has->data() + c * j.part_stride);
  }
}

template <typename T, typename O>
int32_t run_typed(const State& st, olc_context* ctx, const T* x, int64_t rows, int64_t nf, O* z, int64_t* label) {
  const Forest<T>& f = *[&] {
    if constexpr (std::is_same<T, double>::value) return &st.fd;
    else return &st.ff;
  }();
  Job<T, O> j{&f, x, nf, rows, z, label, 64, 0, 0, 0, nullptr, nullptr};
  if (g_tuning.row_group) j.group = std::max<int64_t>(8, g_api->tuning_read_int(g_tuning.row_group));
  // Wide rows: a group's rows stay within about 16 KB (L1), in whole blocks.
  const int64_t fit = (16384 / std::max<int64_t>(1, nf * static_cast<int64_t>(sizeof(T)))) / 8 * 8;
  j.group = std::max<int64_t>(8, std::min(j.group, fit));
  const int64_t threads = ctx ? g_api->concurrency(ctx) : 1;
  const int64_t steps = rows * std::max<int64_t>(1, st.sum_depth);
  const int64_t serial = g_tuning.serial_steps ? g_api->tuning_read_int(g_tuning.serial_steps) : 20000;
  const int64_t split = g_tuning.split_steps ? g_api->tuning_read_int(g_tuning.split_steps) : 3000;
  const bool few_rows = rows < threads * 16;
  if (threads <= 1 || steps < (few_rows ? split : serial) || (few_rows && f.n_trees < 2 * kTreeBlock)) {
    score_rows(j, 0, rows);  // the single-row path: no hand-off
    return OLC_OK;
  }
  if (!few_rows) {
    // Large ranges (two per thread): each range reads the forest chunk by
    // chunk once, so small ranges would multiply the reads of a big forest.
    const int64_t grain = std::max<int64_t>(8, (rows + threads * 2 - 1) / (threads * 2));
    g_api->parallel_for(ctx, rows, grain, 0, &rows_range<T, O>, &j);
    return OLC_OK;
  }
  // One share of the trees per thread, merged in share order. More, smaller
  // shares cost more than they balance: each adds a hand-off, a merge and a
  // partial 16-tree block walked one tree at a time.
  const int64_t shares = std::min(threads, f.n_trees / kTreeBlock);
  j.trees_per_chunk = (f.n_trees / shares + kTreeBlock - 1) / kTreeBlock * kTreeBlock;
  j.tree_chunks = (f.n_trees + j.trees_per_chunk - 1) / j.trees_per_chunk;
  // Shares' partial scores at least 64 bytes apart: every leaf taken writes
  // them, and two threads writing one cache line (a single row's scores side
  // by side) made the split walk 2-4 times slower than one thread.
  const int64_t width = rows * f.n_targets;
  j.part_stride = (width + 63) / 64 * 64 + 64;
  std::vector<T> acc(static_cast<size_t>(j.part_stride * j.tree_chunks), T(0));
  std::vector<uint8_t> has(acc.size(), 0);
  j.part_acc = &acc;
  j.part_has = &has;
  g_api->parallel_for(ctx, j.tree_chunks, 1, 0, &trees_range<T, O>, &j);
  for (int64_t c = 1; c < j.tree_chunks; ++c)
    merge_scores(f, acc.data(), has.data(), acc.data() + c * j.part_stride, has.data() + c * j.part_stride, width);
  for (int64_t r = 0; r < rows; ++r)
    finalize_row(f, acc.data() + r * f.n_targets, has.data() + r * f.n_targets, z + r * f.n_targets,
                 label ? label + r : nullptr);
  return OLC_OK;
}

void* create_impl(Form form, const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  auto fail = [&](const std::string& m) -> void* {
    std::snprintf(error, size, "%s", m.c_str());
    return nullptr;
  };
  const bool classifier = form == Form::kClassifier;
  if (node->n_inputs != 1) return fail("expects one input");
  const int32_t dt = node->input_dtypes[0];
  const bool ok = form == Form::kEnsemble
                      ? (dt == OLC_DTYPE_FLOAT || dt == OLC_DTYPE_DOUBLE || dt == OLC_DTYPE_FLOAT16)
                      : (dt == OLC_DTYPE_FLOAT || dt == OLC_DTYPE_DOUBLE || dt == OLC_DTYPE_INT64 ||
                         dt == OLC_DTYPE_INT32);
  if (!ok) return fail(std::string("input type ") + olc_dtype_name(dt) + " is not supported");
  if (node->input_ranks[0] > 2 || node->input_ranks[0] == 0) return fail("the input must be 1-D or 2-D");
  if (node->n_outputs != (classifier ? 2 : 1)) return fail(classifier ? "expects two outputs" : "expects one output");
  auto st = std::make_unique<State>();
  st->form = form;
  st->in_dtype = dt;
  st->is_double = dt == OLC_DTYPE_DOUBLE;
  // TreeEnsemble writes the input's type; the older forms always float32.
  st->out_dtype = form == Form::kEnsemble ? dt : OLC_DTYPE_FLOAT;
  std::string e = build(form, Attrs(node->attributes, node->n_attributes), st.get());
  if (!e.empty()) return fail(e);
  return st.release();
}

int32_t run_impl(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const State& st = *static_cast<const State*>(state);
  const olc_tensor& X = inputs[0];
  if (X.ndim < 1 || X.ndim > 2) return g_api->set_error(ctx, "the input must be 1-D or 2-D");
  const int64_t rows = X.ndim == 1 ? 1 : X.shape[0];
  const int64_t nf = X.ndim == 1 ? X.shape[0] : X.shape[1];
  if (st.max_feature >= nf) {
    const std::string m = "a branch reads feature " + std::to_string(st.max_feature) + " but the input has " +
                          std::to_string(nf) + " features";
    return g_api->set_error(ctx, m.c_str());
  }
  int64_t* label = nullptr;
  void* z = nullptr;
  const int64_t zshape[2] = {rows, st.n_targets};
  if (st.form == Form::kClassifier) {
    label = static_cast<int64_t*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_INT64, 1, zshape));
    if (!label && rows) return OLC_ERROR;
    z = g_api->allocate_output(ctx, 1, OLC_DTYPE_FLOAT, 2, zshape);
  } else {
    z = g_api->allocate_output(ctx, 0, st.out_dtype, 2, zshape);
  }
  if (!z && rows) return OLC_ERROR;
  if (rows == 0) return OLC_OK;
  if (st.is_double) {
    const double* x = static_cast<const double*>(X.data);
    if (st.out_dtype == OLC_DTYPE_DOUBLE) return run_typed(st, ctx, x, rows, nf, static_cast<double*>(z), label);
    return run_typed(st, ctx, x, rows, nf, static_cast<float*>(z), label);
  }
  if (X.dtype == OLC_DTYPE_FLOAT)
    return run_typed(st, ctx, static_cast<const float*>(X.data), rows, nf, static_cast<float*>(z), label);
  // Integer and float16 features compare as float32 (onnxruntime's float
  // thresholds for integers; float16 splits are exact in float32).
  std::vector<float> xf(static_cast<size_t>(rows * nf));
  if (X.dtype == OLC_DTYPE_INT64) {
    const int64_t* p = static_cast<const int64_t*>(X.data);
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(p[i]);
  } else if (X.dtype == OLC_DTYPE_INT32) {
    const int32_t* p = static_cast<const int32_t*>(X.data);
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(p[i]);
  } else {
    half_to_float(static_cast<const uint16_t*>(X.data), xf.data(), static_cast<int64_t>(xf.size()));
  }
  if (st.out_dtype != OLC_DTYPE_FLOAT16)
    return run_typed(st, ctx, xf.data(), rows, nf, static_cast<float*>(z), label);
  std::vector<float> zf(static_cast<size_t>(rows * st.n_targets));
  const int32_t rc = run_typed(st, ctx, xf.data(), rows, nf, zf.data(), label);
  if (rc == OLC_OK) float_to_half(zf.data(), static_cast<uint16_t*>(z), static_cast<int64_t>(zf.size()));
  return rc;
}

void destroy_impl(void* state) { delete static_cast<State*>(state); }

void* create_regressor(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  return create_impl(Form::kRegressor, api, node, error, size);
}
void* create_classifier(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  return create_impl(Form::kClassifier, api, node, error, size);
}
void* create_ensemble(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  return create_impl(Form::kEnsemble, api, node, error, size);
}

const olc_kernel_vtable kRegressor = {OLC_ABI_VERSION, 0, "olc_ml::TreeEnsembleRegressor", &create_regressor,
                                      &run_impl, &destroy_impl};
const olc_kernel_vtable kClassifier = {OLC_ABI_VERSION, 0, "olc_ml::TreeEnsembleClassifier", &create_classifier,
                                       &run_impl, &destroy_impl};
const olc_kernel_vtable kEnsemble = {OLC_ABI_VERSION, 0, "olc_ml::TreeEnsemble", &create_ensemble, &run_impl,
                                     &destroy_impl};

}  // namespace

void register_tree_kernels(const olc_core_api* api, VtableTable* table) {
  g_api = api;
  g_tuning.serial_steps = api->tuning_declare_int("olc_ml", "TreeEnsemble", "optimized", OLC_DTYPE_FLOAT,
                                                  "serial_node_visits", 20000);
  g_tuning.split_steps = api->tuning_declare_int("olc_ml", "TreeEnsemble", "optimized", OLC_DTYPE_FLOAT,
                                                 "split_node_visits", 3000);
  g_tuning.branch_free = api->tuning_declare_int("olc_ml", "TreeEnsemble", "optimized", OLC_DTYPE_FLOAT,
                                                 "branch_free_levels", 10);
  g_tuning.row_group = api->tuning_declare_int("olc_ml", "TreeEnsemble", "optimized", OLC_DTYPE_FLOAT,
                                               "row_group", 64);
  (*table)["TreeEnsembleRegressor"] = &kRegressor;
  (*table)["TreeEnsembleClassifier"] = &kClassifier;
  (*table)["TreeEnsemble"] = &kEnsemble;
}

}  // namespace olc_ml
