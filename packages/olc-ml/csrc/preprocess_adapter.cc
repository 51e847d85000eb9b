// The numeric preprocessing operators of scikit-learn pipelines: Scaler,
// Normalizer, Binarizer, Imputer, FeatureVectorizer, ArrayFeatureExtractor
// and OneHotEncoder (numeric inputs; string inputs run on the Python
// kernels of olc_ml/python_kernels.py). Semantics are onnxruntime's where
// it follows the schema; where it does not (a NaN input to Binarizer is an
// error there, 0 here as "not greater than the threshold"; a float
// OneHotEncoder input that is NaN or out of int64 range is undefined
// behaviour there, an unknown category here), the schema's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <unordered_map>

#include "adapter_util.h"
#include "attrs.h"
#include "ml_adapter.h"
#include "ml_kernels.h"

namespace olc_ml {

namespace {

const olc_core_api* g_api = nullptr;

enum class Op { kScaler, kNormalizer, kBinarizer, kImputer, kFeatureVectorizer, kArrayFeatureExtractor, kOneHot };
enum class Norm { kMax, kL1, kL2 };

struct State {
  Op op = Op::kScaler;
  const MlKernels* k = nullptr;
  int32_t in_dtype = OLC_DTYPE_FLOAT;
  std::vector<float> scale, offset;         // Scaler
  Norm norm = Norm::kMax;                   // Normalizer
  float threshold = 0;                      // Binarizer
  std::vector<double> imputed_f;            // Imputer, float inputs
  std::vector<int64_t> imputed_i;           // Imputer, integer inputs
  double replaced_f = 0;
  int64_t replaced_i = 0;
  std::vector<int64_t> dims;                // FeatureVectorizer
  int64_t total = 0;
  std::unordered_map<int64_t, int64_t> cats;  // OneHotEncoder: category -> column
  std::vector<int32_t> dense;  // ... or, for categories within a small range, column of (value - low), -1 if none
  int64_t low = 0;
  int64_t n_cats = 0;
  bool zeros = true;
};

std::string error_at(const char* what, int64_t got, int64_t want) {
  return std::string(what) + " has " + std::to_string(got) + " values for " + std::to_string(want) + " features";
}

std::string parse(Op op, const olc_node_info* node, const Attrs& at, State* st) {
  int64_t nf = -1;
  OLC_TRY(at.integer("n_features", -1, &nf));
  switch (op) {
    case Op::kScaler: {
      const olc_attribute* s = at.floats("scale");
      const olc_attribute* o = at.floats("offset");
      if (!s || s->count == 0) return "attribute scale is required";
      if (!o || o->count != s->count)
        return "offset has " + std::to_string(o ? o->count : 0) + " values, scale " + std::to_string(s->count);
      st->scale.assign(s->floats, s->floats + s->count);
      st->offset.assign(o->floats, o->floats + o->count);
      if (nf >= 0 && s->count != 1 && s->count != nf) return error_at("scale", s->count, nf);
      return "";
    }
    case Op::kNormalizer: {
      std::string norm;
      OLC_TRY(at.string("norm", "MAX", &norm));
      if (norm == "MAX") st->norm = Norm::kMax;
      else if (norm == "L1") st->norm = Norm::kL1;
      else if (norm == "L2") st->norm = Norm::kL2;
      else return "unknown norm '" + norm + "' (MAX, L1 or L2)";
      return "";
    }
    case Op::kBinarizer: {
      double t = 0;
      OLC_TRY(at.real("threshold", 0.0, &t));
      st->threshold = static_cast<float>(t);
      return "";
    }
    case Op::kImputer: {
      const olc_attribute* f = at.floats("imputed_value_floats");
      const olc_attribute* i = at.ints("imputed_value_int64s");
      const bool has_f = f && f->count > 0, has_i = i && i->count > 0;
      if (has_f == has_i) return "exactly one of imputed_value_floats and imputed_value_int64s must be set";
      const bool float_input = st->in_dtype == OLC_DTYPE_FLOAT || st->in_dtype == OLC_DTYPE_DOUBLE;
      if (float_input != has_f)
        return std::string("a ") + olc_dtype_name(st->in_dtype) + " input needs " +
               (float_input ? "imputed_value_floats" : "imputed_value_int64s");
      const int64_t count = has_f ? f->count : i->count;
      if (nf >= 0 && count != 1 && count != nf) return error_at("the imputed values", count, nf);
      if (has_f) st->imputed_f.assign(f->floats, f->floats + f->count);
      else st->imputed_i.assign(i->ints, i->ints + i->count);
      OLC_TRY(at.real("replaced_value_float", 0.0, &st->replaced_f));
      OLC_TRY(at.integer("replaced_value_int64", 0, &st->replaced_i));
      return "";
    }
    case Op::kFeatureVectorizer: {
      const olc_attribute* d = at.ints("inputdimensions");
      if (!d) return "attribute inputdimensions is required";
      if (d->count != node->n_inputs)
        return "inputdimensions has " + std::to_string(d->count) + " values for " + std::to_string(node->n_inputs) +
               " inputs";
      st->dims.assign(d->ints, d->ints + d->count);
      for (int64_t v : st->dims) {
        if (v < 0) return "inputdimensions holds a negative size";
        st->total += v;
      }
      for (int32_t j = 0; j < node->n_inputs; ++j)
        if (!is_numeric_input(node->input_dtypes[j]))
          return "input " + std::to_string(j) + " has type " + olc_dtype_name(node->input_dtypes[j]) +
                 "; FeatureVectorizer takes int32, int64, float and double";
      return "";
    }
    case Op::kArrayFeatureExtractor: return "";
    case Op::kOneHot: {
      const olc_attribute* c = at.ints("cats_int64s");
      if (!c || c->count == 0) return "a numeric input needs cats_int64s";
      for (int64_t j = 0; j < c->count; ++j) st->cats[c->ints[j]] = j;  // a repeated category: the last column
      st->n_cats = c->count;
      const auto [lo, hi] = std::minmax_element(c->ints, c->ints + c->count);
      if (static_cast<uint64_t>(*hi) - static_cast<uint64_t>(*lo) < 4096) {  // a table beats hashing
        st->low = *lo;
        st->dense.assign(static_cast<size_t>(*hi - *lo + 1), -1);
        for (const auto& kv : st->cats) st->dense[static_cast<size_t>(kv.first - *lo)] = static_cast<int32_t>(kv.second);
      }
      int64_t zeros = 1;
      OLC_TRY(at.integer("zeros", 1, &zeros));
      st->zeros = zeros != 0;
      return "";
    }
  }
  return "";
}

template <typename T>
const T* data_of(const olc_tensor& t) {
  return static_cast<const T*>(t.data);
}

// ---- Scaler: y = (x - offset) * scale, float32 output ----

int32_t run_scaler(const State& st, olc_context* ctx, const olc_tensor& X) {
  int64_t rows = 0, f = 0;
  if (!rows_and_features(X, &rows, &f)) return g_api->set_error(ctx, "the input must be 1-D or 2-D");
  const int64_t n = rows * f;
  const int64_t per = static_cast<int64_t>(st.scale.size());
  if (per != 1 && per != f) {
    const std::string m = "scale and offset have " + std::to_string(per) + " values, the input " + std::to_string(f) +
                          " features (either must be 1 or the feature count)";
    return g_api->set_error(ctx, m.c_str());
  }
  float* y = static_cast<float*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_FLOAT, X.ndim, X.shape));
  if (!y && n) return OLC_ERROR;
  if (n == 0) return OLC_OK;
  if (X.dtype == OLC_DTYPE_DOUBLE) {  // computed in double, as onnxruntime does
    const double* x = data_of<double>(X);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = per == 1 ? 0 : i % f;
      y[i] = static_cast<float>((x[i] - st.offset[static_cast<size_t>(c)]) * st.scale[static_cast<size_t>(c)]);
    }
    return OLC_OK;
  }
  std::vector<float> buffer;
  const float* x = as_float(X, n, &buffer);
  if (per == 1) {
    const std::vector<float> o(static_cast<size_t>(f), st.offset[0]), s(static_cast<size_t>(f), st.scale[0]);
    for_rows(g_api, ctx, rows, f, [&](int64_t r0, int64_t r1) {
      st.k->scale(x + r0 * f, y + r0 * f, r1 - r0, f, o.data(), s.data());
    });
  } else {
    for_rows(g_api, ctx, rows, f, [&](int64_t r0, int64_t r1) {
      st.k->scale(x + r0 * f, y + r0 * f, r1 - r0, f, st.offset.data(), st.scale.data());
    });
  }
  g_api->record_usage_detail(ctx, st.k->isa);
  return OLC_OK;
}

// ---- Normalizer: rows by MAX, L1 or L2, float32 output ----

// x * x in x's type, as onnxruntime squares; integers wrap (no undefined
// overflow).
inline double square(double x) { return x * x; }
inline float square(float x) { return x * x; }
inline int64_t square(int64_t x) { return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(x)); }
inline int32_t square(int32_t x) { return static_cast<int32_t>(static_cast<uint32_t>(x) * static_cast<uint32_t>(x)); }

template <typename T>
void normalize_rows(Norm norm, const T* x, float* y, int64_t rows, int64_t f) {
  for (int64_t r = 0; r < rows; ++r, x += f, y += f) {
    float d = 0.f;
    if (norm == Norm::kMax) {
      d = std::numeric_limits<float>::lowest();
      for (int64_t i = 0; i < f; ++i) d = std::max(d, static_cast<float>(x[i]));
    } else if (norm == Norm::kL1) {
      for (int64_t i = 0; i < f; ++i) d += static_cast<float>(x[i] < 0 ? -x[i] : x[i]);
    } else {
      for (int64_t i = 0; i < f; ++i) {
        y[i] = static_cast<float>(square(x[i]));
        d += y[i];
      }
    }
    if (d == 0.f) {
      for (int64_t i = 0; i < f; ++i) y[i] = static_cast<float>(x[i]);
    } else if (norm == Norm::kL2) {
      // onnxruntime's form: sqrt(x^2 / sum) with x's sign.
      for (int64_t i = 0; i < f; ++i) y[i] = x[i] < 0 ? std::sqrt(y[i] / d) * -1 : std::sqrt(y[i] / d);
    } else {
      for (int64_t i = 0; i < f; ++i) y[i] = static_cast<float>(x[i]) / d;
    }
  }
}

int32_t run_normalizer(const State& st, olc_context* ctx, const olc_tensor& X) {
  int64_t rows = 0, f = 0;
  if (!rows_and_features(X, &rows, &f)) return g_api->set_error(ctx, "the input must be 1-D or 2-D");
  float* y = static_cast<float*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_FLOAT, X.ndim, X.shape));
  if (!y && rows * f != 0) return OLC_ERROR;
  if (rows * f == 0) return OLC_OK;
  for_rows(g_api, ctx, rows, 3 * f, [&](int64_t r0, int64_t r1) {
    float* out = y + r0 * f;
    switch (X.dtype) {
      case OLC_DTYPE_FLOAT: normalize_rows(st.norm, data_of<float>(X) + r0 * f, out, r1 - r0, f); break;
      case OLC_DTYPE_DOUBLE: normalize_rows(st.norm, data_of<double>(X) + r0 * f, out, r1 - r0, f); break;
      case OLC_DTYPE_INT64: normalize_rows(st.norm, data_of<int64_t>(X) + r0 * f, out, r1 - r0, f); break;
      default: normalize_rows(st.norm, data_of<int32_t>(X) + r0 * f, out, r1 - r0, f); break;
    }
  });
  return OLC_OK;
}

// ---- Binarizer: x > threshold ? 1 : 0, in the input's type ----

int32_t run_binarizer(const State& st, olc_context* ctx, const olc_tensor& X) {
  const int64_t n = olc_element_count(&X);
  void* y = g_api->allocate_output(ctx, 0, X.dtype, X.ndim, X.shape);
  if (!y && n) return OLC_ERROR;
  if (n == 0) return OLC_OK;
  const float t = st.threshold;
  switch (X.dtype) {
    case OLC_DTYPE_FLOAT:
      st.k->binarize(data_of<float>(X), static_cast<float*>(y), n, t);
      g_api->record_usage_detail(ctx, st.k->isa);
      break;
    case OLC_DTYPE_DOUBLE: {
      const double* x = data_of<double>(X);
      double* o = static_cast<double*>(y);
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] > t ? 1.0 : 0.0;
      break;
    }
    case OLC_DTYPE_INT64: {  // compared as float, as onnxruntime compares
      const int64_t* x = data_of<int64_t>(X);
      int64_t* o = static_cast<int64_t*>(y);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(x[i]) > t ? 1 : 0;
      break;
    }
    default: {
      const int32_t* x = data_of<int32_t>(X);
      int32_t* o = static_cast<int32_t*>(y);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(x[i]) > t ? 1 : 0;
      break;
    }
  }
  return OLC_OK;
}

// ---- Imputer: values equal to the replaced value (NaN: NaN) take the
// imputed value of their column ----

// Rows of f values; `per_column` holds f imputed values (one repeated).
template <typename T>
void impute(const T* x, T* y, int64_t rows, int64_t f, T replaced, const T* per_column) {
  const bool nan = replaced != replaced;
  for (int64_t r = 0; r < rows; ++r, x += f, y += f) {
    if (nan) {
      for (int64_t c = 0; c < f; ++c) y[c] = x[c] != x[c] ? per_column[c] : x[c];
    } else {
      for (int64_t c = 0; c < f; ++c) y[c] = x[c] == replaced ? per_column[c] : x[c];
    }
  }
}

template <typename T, typename V>
std::vector<T> per_column(const std::vector<V>& values, int64_t f) {
  if (values.empty()) return {};  // the other type's values
  std::vector<T> out(static_cast<size_t>(f));
  for (int64_t c = 0; c < f; ++c) out[static_cast<size_t>(c)] = static_cast<T>(values[values.size() == 1 ? 0 : c]);
  return out;
}

int32_t run_imputer(const State& st, olc_context* ctx, const olc_tensor& X) {
  int64_t rows = 0, f = 0;
  if (X.ndim < 1) return g_api->set_error(ctx, "the input must have at least one dimension");
  f = X.shape[X.ndim - 1];
  const int64_t n = olc_element_count(&X);
  rows = f ? n / f : 0;
  const size_t count = st.imputed_f.empty() ? st.imputed_i.size() : st.imputed_f.size();
  if (count != 1 && static_cast<int64_t>(count) != f) {
    const std::string m = error_at("the imputed values", static_cast<int64_t>(count), f);
    return g_api->set_error(ctx, m.c_str());
  }
  void* y = g_api->allocate_output(ctx, 0, X.dtype, X.ndim, X.shape);
  if (!y && n) return OLC_ERROR;
  if (n == 0) return OLC_OK;
  const auto vf = per_column<float>(st.imputed_f, f);
  const auto vd = per_column<double>(st.imputed_f, f);
  const auto vl = per_column<int64_t>(st.imputed_i, f);
  const auto vi = per_column<int32_t>(st.imputed_i, f);
  for_rows(g_api, ctx, rows, f, [&](int64_t r0, int64_t r1) {
    const int64_t b = r0 * f, n = r1 - r0;
    switch (X.dtype) {
      case OLC_DTYPE_FLOAT:
        impute(data_of<float>(X) + b, static_cast<float*>(y) + b, n, f, static_cast<float>(st.replaced_f), vf.data());
        break;
      case OLC_DTYPE_DOUBLE:
        impute(data_of<double>(X) + b, static_cast<double*>(y) + b, n, f, st.replaced_f, vd.data());
        break;
      case OLC_DTYPE_INT64:
        impute(data_of<int64_t>(X) + b, static_cast<int64_t*>(y) + b, n, f, st.replaced_i, vl.data());
        break;
      default:
        impute(data_of<int32_t>(X) + b, static_cast<int32_t*>(y) + b, n, f, static_cast<int32_t>(st.replaced_i),
               vi.data());
        break;
    }
  });
  return OLC_OK;
}

// ---- FeatureVectorizer: the inputs' columns side by side, float32 ----

template <typename T>
void copy_columns(const T* x, int64_t width, int64_t take, float* y, int64_t stride, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < take; ++c) y[r * stride + c] = static_cast<float>(x[r * width + c]);
}

int32_t run_vectorizer(const State& st, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs) {
  const olc_tensor& X0 = inputs[0];
  if (X0.ndim < 1) return g_api->set_error(ctx, "input 0 must have at least one dimension");
  const int64_t rows = X0.ndim == 1 ? 1 : X0.shape[0];
  for (int32_t j = 0; j < n_inputs; ++j) {
    const olc_tensor& X = inputs[j];
    const int64_t r = X.ndim <= 1 ? 1 : X.shape[0];
    if (X.ndim < 1 || r != rows) {
      const std::string m = "input " + std::to_string(j) + " has " + std::to_string(r) + " rows, input 0 has " +
                            std::to_string(rows);
      return g_api->set_error(ctx, m.c_str());
    }
  }
  const int64_t shape[2] = {rows, st.total};
  float* y = static_cast<float*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_FLOAT, 2, shape));
  if (!y && rows * st.total != 0) return OLC_ERROR;
  if (rows * st.total == 0) return OLC_OK;
  std::memset(y, 0, static_cast<size_t>(rows * st.total) * sizeof(float));
  int64_t offset = 0;
  for (int32_t j = 0; j < n_inputs; ++j) {
    const olc_tensor& X = inputs[j];
    const int64_t n = olc_element_count(&X);
    const int64_t width = X.ndim == 1 ? X.shape[0] : (rows ? n / rows : 0);
    const int64_t take = std::min(width, st.dims[static_cast<size_t>(j)]);  // extra columns are dropped
    float* out = y + offset;
    switch (X.dtype) {
      case OLC_DTYPE_FLOAT: copy_columns(data_of<float>(X), width, take, out, st.total, rows); break;
      case OLC_DTYPE_DOUBLE: copy_columns(data_of<double>(X), width, take, out, st.total, rows); break;
      case OLC_DTYPE_INT64: copy_columns(data_of<int64_t>(X), width, take, out, st.total, rows); break;
      default: copy_columns(data_of<int32_t>(X), width, take, out, st.total, rows); break;
    }
    offset += st.dims[static_cast<size_t>(j)];
  }
  return OLC_OK;
}

// ---- ArrayFeatureExtractor: X[..., Y] (a 1-D X gives [1, len(Y)]) ----

int32_t run_extractor(olc_context* ctx, const olc_tensor& X, const olc_tensor& Y) {
  if (X.ndim < 1) return g_api->set_error(ctx, "X must have at least one dimension");
  if (Y.dtype != OLC_DTYPE_INT64) return g_api->set_error(ctx, "the indices Y must be int64");
  const int64_t stride = X.shape[X.ndim - 1];
  const int64_t k = olc_element_count(&Y);
  if (k == 0) return g_api->set_error(ctx, "the indices Y are empty");
  const int64_t* idx = data_of<int64_t>(Y);
  for (int64_t j = 0; j < k; ++j) {
    if (idx[j] < 0 || idx[j] >= stride) {
      const std::string m = "index Y[" + std::to_string(j) + "] = " + std::to_string(idx[j]) +
                            " is out of range for a last dimension of " + std::to_string(stride);
      return g_api->set_error(ctx, m.c_str());
    }
  }
  std::vector<int64_t> shape(X.shape, X.shape + X.ndim);
  if (X.ndim == 1) shape = {1, k};
  else shape.back() = k;
  const size_t elem = olc_dtype_size(X.dtype);
  char* z = static_cast<char*>(g_api->allocate_output(ctx, 0, X.dtype, static_cast<int32_t>(shape.size()), shape.data()));
  const int64_t outer = stride ? olc_element_count(&X) / stride : 0;
  if (!z && outer * k != 0) return OLC_ERROR;
  const char* x = static_cast<const char*>(X.data);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      std::memcpy(z + (o * k + j) * elem, x + (o * stride + idx[j]) * elem, elem);
  return OLC_OK;
}

// ---- OneHotEncoder (numeric): a row of n_cats per input value ----

template <typename T>
int64_t category_of(const State& st, T v) {
  if constexpr (std::is_floating_point<T>::value) {
    // Truncated to int64 as onnxruntime casts; NaN, infinities and values
    // beyond int64 match no category.
    if (!(std::fabs(v) < 9.2233720368547758e18)) return -1;
  }
  const int64_t key = static_cast<int64_t>(v);
  if (!st.dense.empty()) {
    const uint64_t at = static_cast<uint64_t>(key) - static_cast<uint64_t>(st.low);  // wraps below low
    return at < st.dense.size() ? st.dense[static_cast<size_t>(at)] : -1;
  }
  auto it = st.cats.find(key);
  return it == st.cats.end() ? -1 : it->second;
}

template <typename T>
int64_t one_hot(const State& st, const T* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = category_of(st, x[i]);
    if (c >= 0) y[i * st.n_cats + c] = 1.0f;
    else if (!st.zeros) return i;
  }
  return -1;
}

int32_t run_one_hot(const State& st, olc_context* ctx, const olc_tensor& X) {
  const int64_t n = olc_element_count(&X);
  std::vector<int64_t> shape(X.shape, X.shape + X.ndim);
  shape.push_back(st.n_cats);
  float* y = static_cast<float*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_FLOAT, static_cast<int32_t>(shape.size()),
                                                        shape.data()));
  if (!y && n) return OLC_ERROR;
  if (n == 0) return OLC_OK;
  std::memset(y, 0, static_cast<size_t>(n * st.n_cats) * sizeof(float));
  int64_t bad = -1;
  switch (X.dtype) {
    case OLC_DTYPE_FLOAT: bad = one_hot(st, data_of<float>(X), n, y); break;
    case OLC_DTYPE_DOUBLE: bad = one_hot(st, data_of<double>(X), n, y); break;
    case OLC_DTYPE_INT64: bad = one_hot(st, data_of<int64_t>(X), n, y); break;
    default: bad = one_hot(st, data_of<int32_t>(X), n, y); break;
  }
  if (bad >= 0) {
    const std::string m = "element " + std::to_string(bad) + " is not a known category and zeros is 0";
    return g_api->set_error(ctx, m.c_str());
  }
  return OLC_OK;
}

void* create_impl(Op op, const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  auto fail = [&](const std::string& m) -> void* {
    std::snprintf(error, size, "%s", m.c_str());
    return nullptr;
  };
  const int want = op == Op::kFeatureVectorizer ? -1 : op == Op::kArrayFeatureExtractor ? 2 : 1;
  if (want > 0 && node->n_inputs != want) return fail(want == 1 ? "expects one input" : "expects two inputs");
  if (node->n_inputs < 1) return fail("expects at least one input");
  if (node->n_outputs != 1) return fail("expects one output");
  const int32_t dt = node->input_dtypes[0];
  if (op != Op::kArrayFeatureExtractor && op != Op::kFeatureVectorizer && !is_numeric_input(dt))
    return fail(std::string("input type ") + olc_dtype_name(dt) + " is not supported");
  if (op == Op::kArrayFeatureExtractor && olc_dtype_size(dt) == 0)
    return fail(std::string("input type ") + olc_dtype_name(dt) + " is not a native tensor");
  if ((op == Op::kScaler || op == Op::kNormalizer) && node->input_ranks[0] > 2)
    return fail("the input must be 1-D or 2-D");
  auto st = std::make_unique<State>();
  st->op = op;
  st->in_dtype = dt;
  st->k = best_kernels(api->simd_level());
  const std::string e = parse(op, node, Attrs(node->attributes, node->n_attributes), st.get());
  if (!e.empty()) return fail(e);
  return st.release();
}

int32_t run_impl(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t) {
  const State& st = *static_cast<const State*>(state);
  switch (st.op) {
    case Op::kScaler: return run_scaler(st, ctx, inputs[0]);
    case Op::kNormalizer: return run_normalizer(st, ctx, inputs[0]);
    case Op::kBinarizer: return run_binarizer(st, ctx, inputs[0]);
    case Op::kImputer: return run_imputer(st, ctx, inputs[0]);
    case Op::kFeatureVectorizer: return run_vectorizer(st, ctx, n_inputs, inputs);
    case Op::kArrayFeatureExtractor: return run_extractor(ctx, inputs[0], inputs[1]);
    case Op::kOneHot: return run_one_hot(st, ctx, inputs[0]);
  }
  return OLC_OK;
}

void destroy_impl(void* state) { delete static_cast<State*>(state); }

template <Op OP>
void* create(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  return create_impl(OP, api, node, error, size);
}

#define OLC_ML_VTABLE(var, name, op) \
  const olc_kernel_vtable var = {OLC_ABI_VERSION, 0, "olc_ml::" name, &create<op>, &run_impl, &destroy_impl}

OLC_ML_VTABLE(kScaler, "Scaler", Op::kScaler);
OLC_ML_VTABLE(kNormalizer, "Normalizer", Op::kNormalizer);
OLC_ML_VTABLE(kBinarizer, "Binarizer", Op::kBinarizer);
OLC_ML_VTABLE(kImputer, "Imputer", Op::kImputer);
OLC_ML_VTABLE(kFeatureVectorizer, "FeatureVectorizer", Op::kFeatureVectorizer);
OLC_ML_VTABLE(kArrayFeatureExtractor, "ArrayFeatureExtractor", Op::kArrayFeatureExtractor);
OLC_ML_VTABLE(kOneHotEncoder, "OneHotEncoder", Op::kOneHot);

}  // namespace

void register_preprocess_kernels(const olc_core_api* api, VtableTable* table) {
  g_api = api;
  (*table)["Scaler"] = &kScaler;
  (*table)["Normalizer"] = &kNormalizer;
  (*table)["Binarizer"] = &kBinarizer;
  (*table)["Imputer"] = &kImputer;
  (*table)["FeatureVectorizer"] = &kFeatureVectorizer;
  (*table)["ArrayFeatureExtractor"] = &kArrayFeatureExtractor;
  (*table)["OneHotEncoder"] = &kOneHotEncoder;
}

}  // namespace olc_ml
