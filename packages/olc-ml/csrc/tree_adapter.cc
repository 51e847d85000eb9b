// The TreeEnsembleRegressor / TreeEnsembleClassifier adapter: reads the
// attributes of the restated node (see olc_ml/passes.py), compiles the forest
// once, and at run time checks the input, allocates the outputs and splits
// the work (rows, or trees when rows are few) over the session's executor.
#include "tree_adapter.h"

#include <cstdio>
#include <cstring>
#include <memory>

#include "tree_engine.h"

namespace olc_ml {

namespace {

const olc_core_api* g_api = nullptr;

struct Tuning {
  olc_tuning_param* serial_steps = nullptr;   // below this many node visits: one thread
  olc_tuning_param* branch_free = nullptr;    // top levels walked without leaf tests
  olc_tuning_param* row_group = nullptr;      // rows scored together, tree by tree
};
Tuning g_tuning;

const olc_attribute* find(const olc_attribute* attrs, int n, const char* name) {
  for (int i = 0; i < n; ++i)
    if (std::strcmp(attrs[i].name, name) == 0) return &attrs[i];
  return nullptr;
}

std::string get_ints(const olc_attribute* attrs, int n, const char* name, std::vector<int64_t>* out) {
  out->clear();
  const olc_attribute* a = find(attrs, n, name);
  if (!a) return "";
  if (a->type != OLC_ATTR_INTS) return std::string("attribute ") + name + " must be a list of ints";
  out->assign(a->ints, a->ints + a->count);
  return "";
}

// Values given as FLOATS (`name`) or as float64 bit patterns (`name`_f64,
// INTS; the graph pass's restatement of `name`_as_tensor).
std::string get_values(const olc_attribute* attrs, int n, const std::string& name, std::vector<double>* out) {
  out->clear();
  const olc_attribute* a = find(attrs, n, name.c_str());
  const olc_attribute* b = find(attrs, n, (name + "_f64").c_str());
  if (a && b) return "attributes " + name + " and " + name + "_as_tensor are both set";
  if (a) {
    if (a->type != OLC_ATTR_FLOATS) return "attribute " + name + " must be a list of floats";
    out->assign(a->floats, a->floats + a->count);
  } else if (b) {
    if (b->type != OLC_ATTR_INTS) return "attribute " + name + "_f64 must be a list of ints";
    out->resize(static_cast<size_t>(b->count));
    for (int64_t i = 0; i < b->count; ++i) std::memcpy(&(*out)[static_cast<size_t>(i)], &b->ints[i], 8);
  }
  return "";
}

std::string get_string(const olc_attribute* attrs, int n, const char* name, const char* dflt, std::string* out) {
  const olc_attribute* a = find(attrs, n, name);
  if (!a) {
    *out = dflt;
    return "";
  }
  if (a->type != OLC_ATTR_STRING) return std::string("attribute ") + name + " must be a string";
  *out = a->s;
  return "";
}

#define OLC_TRY(expr)                   \
  do {                                  \
    std::string _e = (expr);            \
    if (!_e.empty()) return _e;         \
  } while (0)

std::string parse_spec(bool classifier, const olc_attribute* at, int na, EnsembleSpec* s, int64_t* n_features) {
  s->classifier = classifier;
  OLC_TRY(get_ints(at, na, "nodes_treeids", &s->treeids));
  OLC_TRY(get_ints(at, na, "nodes_nodeids", &s->nodeids));
  OLC_TRY(get_ints(at, na, "nodes_featureids", &s->featureids));
  OLC_TRY(get_ints(at, na, "nodes_truenodeids", &s->truenodeids));
  OLC_TRY(get_ints(at, na, "nodes_falsenodeids", &s->falsenodeids));
  OLC_TRY(get_ints(at, na, "nodes_missing_value_tracks_true", &s->missing_true));
  std::vector<int64_t> modes;
  OLC_TRY(get_ints(at, na, "nodes_mode_codes", &modes));
  OLC_TRY(get_values(at, na, "nodes_values", &s->values));
  const size_t n = s->nodeids.size();
  const std::pair<const char*, size_t> lens[] = {
      {"nodes_treeids", s->treeids.size()},       {"nodes_featureids", s->featureids.size()},
      {"nodes_truenodeids", s->truenodeids.size()}, {"nodes_falsenodeids", s->falsenodeids.size()},
      {"nodes_modes", modes.size()},              {"nodes_values", s->values.size()}};
  for (const auto& l : lens)
    if (l.second != n)
      return std::string(l.first) + " has " + std::to_string(l.second) + " entries, nodes_nodeids has " +
             std::to_string(n);
  if (s->missing_true.empty()) s->missing_true.assign(n, 0);
  if (s->missing_true.size() != n)
    return "nodes_missing_value_tracks_true has " + std::to_string(s->missing_true.size()) +
           " entries, nodes_nodeids has " + std::to_string(n);
  s->modes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (modes[i] < 0 || modes[i] > kLeaf) return "nodes_modes[" + std::to_string(i) + "] is not a known mode";
    s->modes[i] = static_cast<uint32_t>(modes[i]);
  }
  const char* p = classifier ? "class_" : "target_";
  OLC_TRY(get_ints(at, na, (std::string(p) + "treeids").c_str(), &s->w_treeids));
  OLC_TRY(get_ints(at, na, (std::string(p) + "nodeids").c_str(), &s->w_nodeids));
  OLC_TRY(get_ints(at, na, (std::string(p) + "ids").c_str(), &s->w_ids));
  OLC_TRY(get_values(at, na, std::string(p) + "weights", &s->w_values));
  const size_t nw = s->w_ids.size();
  if (s->w_treeids.size() != nw || s->w_nodeids.size() != nw || s->w_values.size() != nw)
    return std::string(p) + "ids, " + p + "nodeids, " + p + "treeids and " + p + "weights differ in length";
  OLC_TRY(get_values(at, na, "base_values", &s->base_values));
  std::string post, agg;
  OLC_TRY(get_string(at, na, "post_transform", "NONE", &post));
  if (post == "NONE") s->post = kNone;
  else if (post == "SOFTMAX") s->post = kSoftmax;
  else if (post == "LOGISTIC") s->post = kLogistic;
  else if (post == "SOFTMAX_ZERO") s->post = kSoftmaxZero;
  else if (post == "PROBIT") s->post = kProbit;
  else return "unknown post_transform '" + post + "' (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT)";
  if (classifier) {
    OLC_TRY(get_ints(at, na, "classlabels_int64s", &s->class_labels));
    if (s->class_labels.size() < 2) return "needs at least two int64 class labels";
    s->n_targets = static_cast<int64_t>(s->class_labels.size());
    const size_t nb = s->base_values.size();
    if (nb != 0 && nb != s->class_labels.size() && !(s->class_labels.size() == 2 && nb == 1))
      return "base_values has " + std::to_string(nb) + " entries for " + std::to_string(s->class_labels.size()) +
             " classes";
  } else {
    OLC_TRY(get_string(at, na, "aggregate_function", "SUM", &agg));
    if (agg == "SUM") s->aggregate = kSum;
    else if (agg == "AVERAGE") s->aggregate = kAverage;
    else if (agg == "MIN") s->aggregate = kMin;
    else if (agg == "MAX") s->aggregate = kMax;
    else return "unknown aggregate_function '" + agg + "' (SUM, AVERAGE, MIN or MAX)";
    const olc_attribute* nt = find(at, na, "n_targets");
    if (!nt || nt->type != OLC_ATTR_INT || nt->i < 1) return "n_targets must be set to a positive int";
    s->n_targets = nt->i;
    const size_t nb = s->base_values.size();
    if (nb != 0 && nb != static_cast<size_t>(s->n_targets) && nb != 1)
      return "base_values has " + std::to_string(nb) + " entries for " + std::to_string(s->n_targets) + " targets";
  }
  const olc_attribute* nf = find(at, na, "n_features");
  *n_features = nf && nf->type == OLC_ATTR_INT ? nf->i : -1;
  return "";
}

struct State {
  bool classifier = false;
  bool is_double = false;
  int32_t in_dtype = OLC_DTYPE_FLOAT;
  Forest<float> ff;
  Forest<double> fd;
  int64_t n_targets = 1;
  int64_t max_feature = -1;
  int64_t sum_depth = 0;
  int64_t n_trees = 0;
};

std::string build(bool classifier, const olc_attribute* at, int na, bool is_double, State* st) {
  EnsembleSpec spec;
  int64_t n_features = -1;
  OLC_TRY(parse_spec(classifier, at, na, &spec, &n_features));
  const int levels = g_tuning.branch_free ? static_cast<int>(g_api->tuning_read_int(g_tuning.branch_free)) : 10;
  if (is_double) {
    OLC_TRY(compile_forest(spec, levels, &st->fd));
    st->max_feature = st->fd.max_feature;
    st->sum_depth = st->fd.sum_depth;
    st->n_trees = st->fd.n_trees;
  } else {
    OLC_TRY(compile_forest(spec, levels, &st->ff));
    st->max_feature = st->ff.max_feature;
    st->sum_depth = st->ff.sum_depth;
    st->n_trees = st->ff.n_trees;
  }
  st->n_targets = spec.n_targets;
  if (n_features >= 0 && st->max_feature >= n_features)
    return "a branch reads feature " + std::to_string(st->max_feature) + " but the input has " +
           std::to_string(n_features) + " features";
  return "";
}

template <typename T>
struct Job {
  const Forest<T>* f;
  const T* x;
  int64_t nf, rows;
  float* z;
  int64_t* label;
  int64_t group;
  // tree-parallel
  int64_t tree_chunks;
  std::vector<T>* part_acc;
  std::vector<uint8_t>* part_has;
};

// Trees are scored in chunks of about this many bytes of nodes, each chunk
// over every row of the range (a group of rows at a time), so a forest
// larger than the L2 cache is read from memory once per range, not once per
// row group. The sum per row stays in tree order.
constexpr int64_t kTreeChunkBytes = 192 * 1024;

template <typename T>
void score_rows(const Job<T>& j, int64_t r0, int64_t r1) {
  const Forest<T>& f = *j.f;
  const int64_t nt = f.n_targets;
  std::vector<T> acc(static_cast<size_t>((r1 - r0) * nt), T(0));
  std::vector<uint8_t> has(acc.size(), 0);
  int64_t t0 = 0;
  while (t0 < f.n_trees) {
    int64_t t1 = t0 + 1;
    const int64_t first = f.roots[static_cast<size_t>(t0)];
    while (t1 < f.n_trees &&
           (f.roots[static_cast<size_t>(t1)] - first) * static_cast<int64_t>(sizeof(Node<T>)) < kTreeChunkBytes)
      ++t1;
    if (r1 - r0 < j.group) t1 = f.n_trees;  // one group: the chunks would not be reused
    for (int64_t g = r0; g < r1; g += j.group) {
      const int64_t ge = std::min(r1, g + j.group);
      accumulate(f, j.x, j.nf, g, ge, t0, t1, acc.data() + (g - r0) * nt, has.data() + (g - r0) * nt);
    }
    t0 = t1;
  }
  for (int64_t r = r0; r < r1; ++r)
    finalize_row(f, acc.data() + (r - r0) * nt, has.data() + (r - r0) * nt, j.z + r * nt,
                 j.label ? j.label + r : nullptr);
}

template <typename T>
void rows_range(void* user, int64_t b, int64_t e) {
  score_rows(*static_cast<const Job<T>*>(user), b, e);
}

template <typename T>
void trees_range(void* user, int64_t b, int64_t e) {
  const Job<T>& j = *static_cast<const Job<T>*>(user);
  const int64_t per = (j.f->n_trees + j.tree_chunks - 1) / j.tree_chunks;
  const size_t width = static_cast<size_t>(j.rows * j.f->n_targets);
  for (int64_t c = b; c < e; ++c) {
    const int64_t t0 = c * per, t1 = std::min(j.f->n_trees, t0 + per);
    if (t0 >= t1) continue;
    accumulate(*j.f, j.x, j.nf, 0, j.rows, t0, t1, j.part_acc->data() + c * width,
               j.part_has->data() + c * width);
  }
}

template <typename T>
int32_t run_typed(const State& st, olc_context* ctx, const T* x, int64_t rows, int64_t nf, float* z, int64_t* label) {
  const Forest<T>& f = *[&] {
    if constexpr (std::is_same<T, double>::value) return &st.fd;
    else return &st.ff;
  }();
  Job<T> j{&f, x, nf, rows, z, label, 64, 0, nullptr, nullptr};
  if (g_tuning.row_group) j.group = std::max<int64_t>(8, g_api->tuning_read_int(g_tuning.row_group));
  // Wide rows: a group's rows stay within about 16 KB (L1), in whole blocks.
  const int64_t fit = (16384 / std::max<int64_t>(1, nf * static_cast<int64_t>(sizeof(T)))) / 8 * 8;
  j.group = std::max<int64_t>(8, std::min(j.group, fit));
  const int64_t threads = ctx ? g_api->concurrency(ctx) : 1;
  const int64_t steps = rows * std::max<int64_t>(1, st.sum_depth);
  const int64_t serial = g_tuning.serial_steps ? g_api->tuning_read_int(g_tuning.serial_steps) : 20000;
  if (threads <= 1 || steps < serial) {
    score_rows(j, 0, rows);  // the single-row path: no hand-off
    return OLC_OK;
  }
  if (rows >= threads * 16) {
    // Large ranges (two per thread): each range reads the forest chunk by
    // chunk once, so small ranges would multiply the reads of a big forest.
    const int64_t grain = std::max<int64_t>(8, (rows + threads * 2 - 1) / (threads * 2));
    g_api->parallel_for(ctx, rows, grain, 0, &rows_range<T>, &j);
    return OLC_OK;
  }
  // Few rows, many trees: each chunk of trees scores every row; partial
  // scores merged in chunk order.
  j.tree_chunks = std::min<int64_t>(f.n_trees, threads * 4);
  const size_t width = static_cast<size_t>(rows * f.n_targets);
  std::vector<T> acc(width * static_cast<size_t>(j.tree_chunks), T(0));
  std::vector<uint8_t> has(acc.size(), 0);
  j.part_acc = &acc;
  j.part_has = &has;
  g_api->parallel_for(ctx, j.tree_chunks, 1, 0, &trees_range<T>, &j);
  for (int64_t c = 1; c < j.tree_chunks; ++c)
    merge_scores(f, acc.data(), has.data(), acc.data() + c * width, has.data() + c * width,
                 static_cast<int64_t>(width));
  for (int64_t r = 0; r < rows; ++r)
    finalize_row(f, acc.data() + r * f.n_targets, has.data() + r * f.n_targets, z + r * f.n_targets,
                 label ? label + r : nullptr);
  return OLC_OK;
}

void* create_impl(bool classifier, const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  auto fail = [&](const std::string& m) -> void* {
    std::snprintf(error, size, "%s", m.c_str());
    return nullptr;
  };
  if (node->n_inputs != 1) return fail("expects one input");
  const int32_t dt = node->input_dtypes[0];
  if (dt != OLC_DTYPE_FLOAT && dt != OLC_DTYPE_DOUBLE && dt != OLC_DTYPE_INT64 && dt != OLC_DTYPE_INT32)
    return fail(std::string("input type ") + olc_dtype_name(dt) + " is not supported");
  if (node->input_ranks[0] > 2 || node->input_ranks[0] == 0) return fail("the input must be 1-D or 2-D");
  if (node->n_outputs != (classifier ? 2 : 1)) return fail(classifier ? "expects two outputs" : "expects one output");
  auto st = std::make_unique<State>();
  st->classifier = classifier;
  st->in_dtype = dt;
  st->is_double = dt == OLC_DTYPE_DOUBLE;
  std::string e = build(classifier, node->attributes, node->n_attributes, st->is_double, st.get());
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
  float* z = nullptr;
  const int64_t zshape[2] = {rows, st.n_targets};
  if (st.classifier) {
    label = static_cast<int64_t*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_INT64, 1, zshape));
    if (!label && rows) return OLC_ERROR;
    z = static_cast<float*>(g_api->allocate_output(ctx, 1, OLC_DTYPE_FLOAT, 2, zshape));
  } else {
    z = static_cast<float*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_FLOAT, 2, zshape));
  }
  if (!z && rows) return OLC_ERROR;
  if (rows == 0) return OLC_OK;
  if (st.is_double) return run_typed<double>(st, ctx, static_cast<const double*>(X.data), rows, nf, z, label);
  if (X.dtype == OLC_DTYPE_FLOAT) return run_typed<float>(st, ctx, static_cast<const float*>(X.data), rows, nf, z, label);
  // Integer features compare as float (onnxruntime's float thresholds).
  std::vector<float> xf(static_cast<size_t>(rows * nf));
  if (X.dtype == OLC_DTYPE_INT64) {
    const int64_t* p = static_cast<const int64_t*>(X.data);
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(p[i]);
  } else {
    const int32_t* p = static_cast<const int32_t*>(X.data);
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(p[i]);
  }
  return run_typed<float>(st, ctx, xf.data(), rows, nf, z, label);
}

void destroy_impl(void* state) { delete static_cast<State*>(state); }

void* create_regressor(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  return create_impl(false, api, node, error, size);
}
void* create_classifier(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  return create_impl(true, api, node, error, size);
}

const olc_kernel_vtable kRegressor = {OLC_ABI_VERSION, 0, "olc_ml::TreeEnsembleRegressor", &create_regressor,
                                      &run_impl, &destroy_impl};
const olc_kernel_vtable kClassifier = {OLC_ABI_VERSION, 0, "olc_ml::TreeEnsembleClassifier", &create_classifier,
                                       &run_impl, &destroy_impl};

}  // namespace

void set_core_api(const olc_core_api* api) {
  g_api = api;
  g_tuning.serial_steps = api->tuning_declare_int("olc_ml", "TreeEnsemble", "optimized", OLC_DTYPE_FLOAT,
                                                  "serial_node_visits", 20000);
  g_tuning.branch_free = api->tuning_declare_int("olc_ml", "TreeEnsemble", "optimized", OLC_DTYPE_FLOAT,
                                                 "branch_free_levels", 10);
  g_tuning.row_group = api->tuning_declare_int("olc_ml", "TreeEnsemble", "optimized", OLC_DTYPE_FLOAT,
                                               "row_group", 64);
}

const olc_kernel_vtable* vtable(const std::string& op_type) {
  if (op_type == "TreeEnsembleRegressor") return &kRegressor;
  if (op_type == "TreeEnsembleClassifier") return &kClassifier;
  return nullptr;
}

std::vector<std::string> op_names() { return {"TreeEnsembleRegressor", "TreeEnsembleClassifier"}; }

std::string check_attributes(const std::string& op_type, const olc_attribute* attrs, int n_attrs) {
  State st;
  return build(op_type == "TreeEnsembleClassifier", attrs, n_attrs, false, &st);
}

}  // namespace olc_ml
