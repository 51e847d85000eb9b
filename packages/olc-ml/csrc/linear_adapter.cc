// LinearRegressor, LinearClassifier, SVMRegressor and SVMClassifier (int64
// class labels; string labels go through olc_ml/python_kernels.py).
// Inputs of any numeric type are scored as float32, as onnxruntime scores
// them; products come from the per-ISA dot / squared-distance kernels
// (ml_kernels.h), and the class decisions and score layouts follow
// onnxruntime's (ml_common.h, linearclassifier.cc, svmclassifier.cc),
// including its binary single-score forms.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "adapter_util.h"
#include "attrs.h"
#include "ml_adapter.h"
#include "ml_kernels.h"

namespace olc_ml {

namespace {

const olc_core_api* g_api = nullptr;

enum class Op { kLinearRegressor, kLinearClassifier, kSvmRegressor, kSvmClassifier };
enum class Kernel { kLinear, kPoly, kRbf, kSigmoid };

struct State {
  Op op = Op::kLinearRegressor;
  const MlKernels* k = nullptr;
  int64_t n_features = -1;   // expected input width (-1: any, linear models take it from the input)
  PostTransform post = kNone;
  // Linear models and SVM linear mode: rows of weights, one per output.
  std::vector<float> coef;
  std::vector<float> bias;   // per output (may be empty)
  int64_t n_out = 1;         // targets or classes scored
  // Classifiers.
  std::vector<int64_t> labels;
  bool add_second_class = false;  // LinearClassifier: one score, two labels
  // SVM.
  bool svc = false;          // support vectors (else liblinear form)
  Kernel kernel = Kernel::kLinear;
  float gamma = 0, coef0 = 0, degree = 0;
  std::vector<float> vectors;     // [n_vectors, n_features]
  std::vector<float> vectors_t;   // [n_features, n_vectors], for many vectors (kTransposed)
  int64_t n_vectors = 0;
  std::vector<int64_t> per_class, first_vector;
  std::vector<float> rho, prob_a, prob_b;
  bool one_class = false;
  bool weights_all_positive = true;
  int64_t n_classes = 0;
};

std::string floats(const Attrs& at, const char* name, bool required, std::vector<float>* out) {
  const olc_attribute* a = at.floats(name);
  if (!a) {
    if (at.find(name)) return std::string("attribute ") + name + " must be a list of floats";
    if (required) return std::string("attribute ") + name + " is required";
    out->clear();
    return "";
  }
  out->assign(a->floats, a->floats + a->count);
  return "";
}

std::string ints(const Attrs& at, const char* name, std::vector<int64_t>* out) {
  const olc_attribute* a = at.ints(name);
  if (!a) {
    if (at.find(name)) return std::string("attribute ") + name + " must be a list of ints";
    out->clear();
    return "";
  }
  out->assign(a->ints, a->ints + a->count);
  return "";
}

std::string post_of(const Attrs& at, PostTransform* post) {
  std::string s;
  OLC_TRY(at.string("post_transform", "NONE", &s));
  return parse_post_transform(s, post);
}

// Weight rows of `width` values each, `rows` of them: the feature count.
std::string feature_count(const std::vector<float>& values, int64_t rows, const char* what, int64_t* features) {
  if (rows <= 0) return std::string("no ") + what;
  if (values.empty() || values.size() % static_cast<size_t>(rows) != 0)
    return std::string(what) + ": " + std::to_string(values.size()) + " coefficients are not " + std::to_string(rows) +
           " rows of equal length";
  *features = static_cast<int64_t>(values.size()) / rows;
  return "";
}

std::string parse_linear(Op op, const Attrs& at, State* st) {
  OLC_TRY(floats(at, "coefficients", true, &st->coef));
  OLC_TRY(floats(at, "intercepts", false, &st->bias));
  OLC_TRY(post_of(at, &st->post));
  if (op == Op::kLinearRegressor) {
    int64_t targets = 1;
    OLC_TRY(at.integer("targets", 1, &targets));
    if (targets < 1) return "targets must be positive";
    st->n_out = targets;
    if (!st->bias.empty() && static_cast<int64_t>(st->bias.size()) != targets) st->bias.clear();  // ignored, as onnxruntime
    return feature_count(st->coef, targets, "coefficients for the targets", &st->n_features);
  }
  OLC_TRY(ints(at, "classlabels_ints", &st->labels));
  if (st->labels.empty()) return "needs int64 class labels (classlabels_ints)";
  // One score per intercept (onnxruntime's class count); a single score
  // with two labels is the binary form.
  st->n_out = !st->bias.empty() ? static_cast<int64_t>(st->bias.size()) : static_cast<int64_t>(st->labels.size());
  if (st->n_out == 1 && st->labels.size() != 2)
    return "one score needs two class labels, got " + std::to_string(st->labels.size());
  st->add_second_class = st->n_out == 1;
  if (st->n_out > 1 && static_cast<int64_t>(st->labels.size()) != st->n_out)
    return std::to_string(st->n_out) + " class scores for " + std::to_string(st->labels.size()) + " class labels";
  return feature_count(st->coef, st->n_out, "coefficients for the classes", &st->n_features);
}

std::string parse_svm(Op op, const Attrs& at, State* st) {
  std::string kernel;
  OLC_TRY(at.string("kernel_type", "LINEAR", &kernel));
  if (kernel == "LINEAR") st->kernel = Kernel::kLinear;
  else if (kernel == "POLY") st->kernel = Kernel::kPoly;
  else if (kernel == "RBF") st->kernel = Kernel::kRbf;
  else if (kernel == "SIGMOID") st->kernel = Kernel::kSigmoid;
  else return "unknown kernel_type '" + kernel + "' (LINEAR, POLY, RBF or SIGMOID)";
  std::vector<float> params;
  OLC_TRY(floats(at, "kernel_params", false, &params));
  if (!params.empty()) {
    if (params.size() != 3) return "kernel_params must hold gamma, coef0 and degree";
    st->gamma = params[0];
    st->coef0 = params[1];
    st->degree = params[2];
  }
  OLC_TRY(floats(at, "coefficients", true, &st->coef));
  OLC_TRY(floats(at, "support_vectors", false, &st->vectors));
  OLC_TRY(floats(at, "rho", true, &st->rho));
  if (st->rho.empty()) return "rho is empty";
  OLC_TRY(post_of(at, &st->post));
  if (op == Op::kSvmRegressor) {
    int64_t n = 0, one = 0;
    OLC_TRY(at.integer("n_supports", 0, &n));
    OLC_TRY(at.integer("one_class", 0, &one));
    st->one_class = one != 0;
    st->n_out = 1;
    if (n > 0) {
      st->svc = true;
      st->n_vectors = n;
      OLC_TRY(feature_count(st->vectors, n, "support_vectors", &st->n_features));
      if (static_cast<int64_t>(st->coef.size()) != n)
        return "coefficients has " + std::to_string(st->coef.size()) + " entries for " + std::to_string(n) +
               " support vectors";
    } else {
      st->kernel = Kernel::kLinear;
      st->n_features = static_cast<int64_t>(st->coef.size());
      if (st->n_features == 0) return "coefficients is empty";
    }
    return "";
  }
  OLC_TRY(ints(at, "classlabels_ints", &st->labels));
  if (st->labels.size() < 2) return "needs at least two int64 class labels (classlabels_ints)";
  st->n_classes = static_cast<int64_t>(st->labels.size());
  OLC_TRY(ints(at, "vectors_per_class", &st->per_class));
  OLC_TRY(floats(at, "prob_a", false, &st->prob_a));
  OLC_TRY(floats(at, "prob_b", false, &st->prob_b));
  if (st->prob_a.size() != st->prob_b.size()) return "prob_a and prob_b differ in length";
  for (float c : st->coef) st->weights_all_positive = st->weights_all_positive && c >= 0.f;
  int64_t total = 0;
  for (int64_t v : st->per_class) {
    if (v < 0) return "vectors_per_class holds a negative count";
    st->first_vector.push_back(total);
    total += v;
  }
  const int64_t nc = st->n_classes;
  if (total > 0) {
    st->svc = true;
    st->n_vectors = total;
    if (static_cast<int64_t>(st->per_class.size()) != nc)
      return "vectors_per_class has " + std::to_string(st->per_class.size()) + " entries for " + std::to_string(nc) +
             " classes";
    OLC_TRY(feature_count(st->vectors, total, "support_vectors", &st->n_features));
    if (static_cast<int64_t>(st->coef.size()) < (nc - 1) * total)
      return "coefficients has " + std::to_string(st->coef.size()) + " entries, " + std::to_string((nc - 1) * total) +
             " needed for " + std::to_string(nc) + " classes and " + std::to_string(total) + " support vectors";
    const size_t pairs = static_cast<size_t>(nc * (nc - 1) / 2);
    if (st->rho.size() < pairs) return "rho has " + std::to_string(st->rho.size()) + " entries for " +
                                       std::to_string(pairs) + " class pairs";
    if (!st->prob_a.empty() && st->prob_a.size() < pairs)
      return "prob_a has " + std::to_string(st->prob_a.size()) + " entries for " + std::to_string(pairs) +
             " class pairs";
  } else {
    st->kernel = Kernel::kLinear;
    st->n_out = nc;
    OLC_TRY(feature_count(st->coef, nc, "coefficients for the classes", &st->n_features));
  }
  return "";
}

// From this many support vectors on, the kernels run over the vectors
// stored transposed: vectorized across vectors rather than along features,
// no horizontal sum per value (150 vectors of 18 features: ~4x fewer
// instructions per row).
constexpr int64_t kTransposed = 16;

// out[i * m + j] = kernel(x_i, v_j) over rows of k features, v the support
// vectors (m of them).
void kernel_rows(const State& st, Kernel kind, const float* x, int64_t n, int64_t k, int64_t m, float* out) {
  const bool t = !st.vectors_t.empty();
  if (kind == Kernel::kRbf) {
    if (t) st.k->sqdist_t(x, n, k, st.vectors_t.data(), m, out);
    else st.k->sqdist(x, n, k, st.vectors.data(), m, out);
    st.k->exp_scaled(out, n * m, -st.gamma);
    return;
  }
  if (t) st.k->dot_t(x, n, k, st.vectors_t.data(), m, out);
  else st.k->dot(x, n, k, st.vectors.data(), m, out);
  if (kind == Kernel::kLinear) return;
  for (int64_t i = 0; i < n * m; ++i) {
    const float v = st.gamma * out[i] + st.coef0;
    if (kind == Kernel::kSigmoid) out[i] = std::tanh(v);
    else if (st.degree == 2) out[i] = v * v;
    else if (st.degree == 3) out[i] = v * v * v;
    else out[i] = std::pow(v, st.degree);
  }
}

// libsvm's pairwise coupling (Wu, Lin and Weng 2004), as onnxruntime runs
// it: r[i * c + j] are the pairwise probabilities, p receives c values.
void multiclass_probability(int64_t c, const float* r, float* p) {
  const size_t n = static_cast<size_t>(c);
  std::vector<float> q(n * n, 0.f), qp(n, 0.f);
  const float eps = 0.005f / static_cast<float>(c);
  for (size_t i = 0; i < n; ++i) {
    p[i] = 1.0f / static_cast<float>(c);
    for (size_t j = 0; j < i; ++j) {
      q[i * n + i] += r[j * n + i] * r[j * n + i];
      q[i * n + j] = q[j * n + i];
    }
    for (size_t j = i + 1; j < n; ++j) {
      q[i * n + i] += r[j * n + i] * r[j * n + i];
      q[i * n + j] = -r[j * n + i] * r[i * n + j];
    }
  }
  for (int loop = 0; loop < 100; ++loop) {
    float pqp = 0;
    for (size_t i = 0; i < n; ++i) {
      qp[i] = 0;
      for (size_t j = 0; j < n; ++j) qp[i] += q[i * n + j] * p[j];
      pqp += p[i] * qp[i];
    }
    float max_error = 0;
    for (size_t i = 0; i < n; ++i) max_error = std::max(max_error, std::fabs(qp[i] - pqp));
    if (max_error < eps) break;
    for (size_t i = 0; i < n; ++i) {
      const float diff = (-qp[i] + pqp) / q[i * n + i];
      p[i] += diff;
      pqp = (pqp + diff * (diff * q[i * n + i] + 2 * qp[i])) / (1 + diff) / (1 + diff);
      for (size_t j = 0; j < n; ++j) {
        qp[j] = (qp[j] + diff * q[i * n + j]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
}

// sum of c[q] * k[q] (float32 products) in float64.
inline double pair_sum(const float* c, const float* k, int64_t n) {
  double s[4] = {0, 0, 0, 0};
  int64_t q = 0;
  for (; q + 4 <= n; q += 4)
    for (int u = 0; u < 4; ++u) s[u] += c[q + u] * k[q + u];
  for (; q < n; ++q) s[0] += c[q] * k[q];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// A transform of one row of n scores; one score takes PROBIT only.
void transform_scores(PostTransform post, float* z, int64_t n) {
  if (n >= 2) transform_row(post, z, n);
  else if (n == 1 && post == kProbit) z[0] = probit(z[0]);
}

// The two columns of a single binary score s (onnxruntime's form for
// positive weights): {1 - p, p} with p = logistic(s) under LOGISTIC, else
// s itself; PROBIT writes {probit(s), 0}.
void binary_scores(PostTransform post, float s, float* z) {
  if (post == kProbit) {
    z[0] = probit(s);
    z[1] = 0.f;
    return;
  }
  const float p = post == kLogistic ? logistic(s) : s;
  z[0] = 1.f - p;
  z[1] = p;
}

// ---- per operator, rows [r0, r1) of x (n_features wide) ----

void linear_rows(const State& st, const float* x, int64_t f, int64_t r0, int64_t r1, float* y, int64_t* label) {
  const int64_t m = st.n_out;
  const int64_t rows = r1 - r0;
  const bool two = st.add_second_class;
  const int64_t width = two ? 2 : m;
  std::vector<float> scores(static_cast<size_t>(rows * m));
  st.k->dot(x + r0 * f, rows, f, st.coef.data(), m, scores.data());
  for (int64_t r = 0; r < rows; ++r) {
    float* s = scores.data() + r * m;
    for (int64_t j = 0; j < m && !st.bias.empty(); ++j) s[j] += st.bias[static_cast<size_t>(j)];
    float* z = y + (r0 + r) * width;
    if (st.op == Op::kLinearRegressor) {
      std::copy(s, s + m, z);
      transform_scores(st.post, z, m);
      continue;
    }
    // LinearClassifier: the label, then the scores.
    if (m == 1) {
      label[r0 + r] = s[0] > 0 ? st.labels[1] : st.labels[0];
    } else {
      int64_t best = 0;
      for (int64_t j = 1; j < m; ++j)
        if (s[j] > s[best]) best = j;
      label[r0 + r] = st.labels[static_cast<size_t>(best)];
    }
    if (!two) {
      std::copy(s, s + m, z);
      transform_scores(st.post, z, m);
    } else {
      binary_scores(st.post, s[0], z);
    }
  }
}

void svm_regressor_rows(const State& st, const float* x, int64_t f, int64_t r0, int64_t r1, float* y) {
  const int64_t rows = r1 - r0;
  if (st.svc) {
    const int64_t nv = st.n_vectors;
    const int64_t block = std::max<int64_t>(1, std::min<int64_t>(rows, 16384 / std::max<int64_t>(1, nv)));
    std::vector<float> kern(static_cast<size_t>(block * nv));
    for (int64_t r = 0; r < rows; r += block) {
      const int64_t n = std::min(block, rows - r);
      kernel_rows(st, st.kernel, x + (r0 + r) * f, n, f, nv, kern.data());
      st.k->dot(kern.data(), n, nv, st.coef.data(), 1, y + r0 + r);
    }
  } else {
    st.k->dot(x + r0 * f, rows, f, st.coef.data(), 1, y + r0);
  }
  for (int64_t r = r0; r < r1; ++r) {
    y[r] += st.rho[0];
    if (st.one_class) y[r] = y[r] > 0.f ? 1.f : -1.f;
  }
}

void svm_classifier_rows(const State& st, const float* x, int64_t f, int64_t r0, int64_t r1, float* y,
                         int64_t* label, int64_t width) {
  const int64_t rows = r1 - r0;
  const int64_t nc = st.n_classes;
  const bool proba = !st.prob_a.empty();
  if (!st.svc) {
    // liblinear form: one score per class, rho[0] added to each.
    std::vector<float> scores(static_cast<size_t>(rows * nc));
    st.k->dot(x + r0 * f, rows, f, st.coef.data(), nc, scores.data());
    for (int64_t r = 0; r < rows; ++r) {
      float* z = y + (r0 + r) * width;
      const float* s = scores.data() + r * nc;
      for (int64_t j = 0; j < nc; ++j) z[j] = s[j] + st.rho[0];
      int64_t best = 0;
      for (int64_t j = 1; j < nc; ++j)
        if (z[j] > z[best]) best = j;
      const float w = z[best];
      if (nc == 2 && !proba &&
          ((st.weights_all_positive && w >= 0.5f) || (w > 0 && !st.weights_all_positive)))
        best = 1;
      label[r0 + r] = st.labels[static_cast<size_t>(best)];
      transform_scores(st.post, z, nc);
    }
    return;
  }
  const int64_t nv = st.n_vectors;
  const int64_t pairs = nc * (nc - 1) / 2;
  // Kernel rows for a block of rows at a time: the block's values stay in
  // cache (a whole batch's would not: 100,000 rows x 150 vectors is 60 MB).
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(rows, 16384 / std::max<int64_t>(1, nv)));
  std::vector<float> kern(static_cast<size_t>(block * nv));
  std::vector<float> pair_scores(static_cast<size_t>(pairs));
  std::vector<int64_t> votes(static_cast<size_t>(nc));
  std::vector<float> probs(static_cast<size_t>(nc * nc));
  for (int64_t r = 0; r < rows; ++r) {
    if (r % block == 0)
      kernel_rows(st, st.kernel, x + (r0 + r) * f, std::min(block, rows - r), f, nv, kern.data());
    const float* kr = kern.data() + (r % block) * nv;
    std::fill(votes.begin(), votes.end(), 0);
    int64_t idx = 0;
    for (int64_t i = 0; i < nc - 1; ++i) {
      const int64_t si = st.first_vector[static_cast<size_t>(i)], ni = st.per_class[static_cast<size_t>(i)];
      for (int64_t j = i + 1; j < nc; ++j, ++idx) {
        const int64_t sj = st.first_vector[static_cast<size_t>(j)], nj = st.per_class[static_cast<size_t>(j)];
        // Products in float32 summed in float64 (as onnxruntime sums them),
        // in four partial sums: the float64 additions do not wait on each other.
        double sum = pair_sum(st.coef.data() + (j - 1) * nv + si, kr + si, ni) +
                     pair_sum(st.coef.data() + i * nv + sj, kr + sj, nj);
        sum += st.rho[static_cast<size_t>(idx)];
        pair_scores[static_cast<size_t>(idx)] = static_cast<float>(sum);
        ++votes[static_cast<size_t>(sum > 0 ? i : j)];
      }
    }
    label[r0 + r] = st.labels[static_cast<size_t>(std::max_element(votes.begin(), votes.end()) - votes.begin())];
    float* z = y + (r0 + r) * width;
    if (proba) {
      std::fill(probs.begin(), probs.end(), 0.f);
      idx = 0;
      for (int64_t i = 0; i < nc - 1; ++i) {
        for (int64_t j = i + 1; j < nc; ++j, ++idx) {
          const size_t k = static_cast<size_t>(idx);
          const float v = 1 - logistic(pair_scores[k] * st.prob_a[k] + st.prob_b[k]);
          const float clipped = std::min(std::max(v, 1.0e-7f), 1 - 1.0e-7f);
          probs[static_cast<size_t>(i * nc + j)] = clipped;
          probs[static_cast<size_t>(j * nc + i)] = 1 - clipped;
        }
      }
      multiclass_probability(nc, probs.data(), z);
      transform_scores(st.post, z, nc);
    } else if (nc > 2) {
      std::copy(pair_scores.begin(), pair_scores.end(), z);
      transform_scores(st.post, z, pairs);
    } else if (st.post == kNone) {
      z[0] = -pair_scores[0];
      z[1] = pair_scores[0];
    } else {
      binary_scores(st.post, pair_scores[0], z);
    }
  }
}

void* create_impl(Op op, const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  auto fail = [&](const std::string& m) -> void* {
    std::snprintf(error, size, "%s", m.c_str());
    return nullptr;
  };
  const bool classifier = op == Op::kLinearClassifier || op == Op::kSvmClassifier;
  if (node->n_inputs != 1) return fail("expects one input");
  if (!is_numeric_input(node->input_dtypes[0]))
    return fail(std::string("input type ") + olc_dtype_name(node->input_dtypes[0]) + " is not supported");
  if (node->input_ranks[0] == 0 || node->input_ranks[0] > 2) return fail("the input must be 1-D or 2-D");
  if (node->n_outputs != (classifier ? 2 : 1)) return fail(classifier ? "expects two outputs" : "expects one output");
  auto st = std::make_unique<State>();
  st->op = op;
  st->k = best_kernels(api->simd_level());
  const Attrs at(node->attributes, node->n_attributes);
  std::string e = op == Op::kLinearRegressor || op == Op::kLinearClassifier ? parse_linear(op, at, st.get())
                                                                            : parse_svm(op, at, st.get());
  if (!e.empty()) return fail(e);
  if (st->svc && st->n_vectors >= kTransposed) {
    const int64_t nv = st->n_vectors, nf = st->n_features;
    st->vectors_t.resize(st->vectors.size());
    for (int64_t j = 0; j < nv; ++j)
      for (int64_t c = 0; c < nf; ++c) st->vectors_t[static_cast<size_t>(c * nv + j)] = st->vectors[static_cast<size_t>(j * nf + c)];
  }
  int64_t n_features = -1;
  e = at.integer("n_features", -1, &n_features);
  if (!e.empty()) return fail(e);
  if (n_features >= 0 && n_features != st->n_features)
    return fail("the coefficients are for " + std::to_string(st->n_features) + " features, the input has " +
                std::to_string(n_features));
  return st.release();
}

int64_t score_width(const State& st) {
  switch (st.op) {
    case Op::kLinearRegressor: return st.n_out;
    case Op::kLinearClassifier: return st.add_second_class ? 2 : st.n_out;
    case Op::kSvmRegressor: return 1;
    case Op::kSvmClassifier: {
      const int64_t nc = st.n_classes;
      if (!st.svc || !st.prob_a.empty()) return nc;
      return nc > 2 ? nc * (nc - 1) / 2 : 2;
    }
  }
  return 1;
}

int32_t run_impl(const void* state, olc_context* ctx, int32_t, const olc_tensor* inputs, int32_t) {
  const State& st = *static_cast<const State*>(state);
  const olc_tensor& X = inputs[0];
  int64_t rows = 0, f = 0;
  if (!rows_and_features(X, &rows, &f)) return g_api->set_error(ctx, "the input must be 1-D or 2-D");
  if (f != st.n_features) {
    const std::string m = "the input has " + std::to_string(f) + " features, the coefficients are for " +
                          std::to_string(st.n_features);
    return g_api->set_error(ctx, m.c_str());
  }
  const bool classifier = st.op == Op::kLinearClassifier || st.op == Op::kSvmClassifier;
  const int64_t width = score_width(st);
  int64_t* label = nullptr;
  if (classifier) {
    label = static_cast<int64_t*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_INT64, 1, &rows));
    if (!label && rows) return OLC_ERROR;
  }
  const int64_t zshape[2] = {rows, width};
  float* y = static_cast<float*>(g_api->allocate_output(ctx, classifier ? 1 : 0, OLC_DTYPE_FLOAT, 2, zshape));
  if (!y && rows) return OLC_ERROR;
  if (rows == 0) return OLC_OK;
  std::vector<float> buffer;
  const float* x = as_float(X, rows * f, &buffer);
  const int64_t cost = st.svc ? st.n_vectors * (f + st.n_classes) : st.n_out * f;
  for_rows(g_api, ctx, rows, cost, [&](int64_t r0, int64_t r1) {
    switch (st.op) {
      case Op::kLinearRegressor:
      case Op::kLinearClassifier: linear_rows(st, x, f, r0, r1, y, label); break;
      case Op::kSvmRegressor: svm_regressor_rows(st, x, f, r0, r1, y); break;
      case Op::kSvmClassifier: svm_classifier_rows(st, x, f, r0, r1, y, label, width); break;
    }
  });
  g_api->record_usage_detail(ctx, st.k->isa);
  return OLC_OK;
}

void destroy_impl(void* state) { delete static_cast<State*>(state); }

template <Op OP>
void* create(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  return create_impl(OP, api, node, error, size);
}

const olc_kernel_vtable kLinearRegressor = {OLC_ABI_VERSION, 0, "olc_ml::LinearRegressor",
                                            &create<Op::kLinearRegressor>, &run_impl, &destroy_impl};
const olc_kernel_vtable kLinearClassifier = {OLC_ABI_VERSION, 0, "olc_ml::LinearClassifier",
                                             &create<Op::kLinearClassifier>, &run_impl, &destroy_impl};
const olc_kernel_vtable kSvmRegressor = {OLC_ABI_VERSION, 0, "olc_ml::SVMRegressor", &create<Op::kSvmRegressor>,
                                         &run_impl, &destroy_impl};
const olc_kernel_vtable kSvmClassifier = {OLC_ABI_VERSION, 0, "olc_ml::SVMClassifier", &create<Op::kSvmClassifier>,
                                          &run_impl, &destroy_impl};

}  // namespace

void register_linear_kernels(const olc_core_api* api, VtableTable* table) {
  g_api = api;
  (*table)["LinearRegressor"] = &kLinearRegressor;
  (*table)["LinearClassifier"] = &kLinearClassifier;
  (*table)["SVMRegressor"] = &kSvmRegressor;
  (*table)["SVMClassifier"] = &kSvmClassifier;
}

}  // namespace olc_ml
