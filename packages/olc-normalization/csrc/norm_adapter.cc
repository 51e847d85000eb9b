// Adapters: attribute and type validation, shapes, broadcasting of the
// affine parameters, the row layout of each operator, and the scheduler
// that splits rows across the session executor. Compiled without ISA flags;
// the per-ISA row engines do the arithmetic.
#include "norm_adapter.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "norm_common.h"

namespace olc_norm {
namespace {

const olc_core_api* g_api = nullptr;
constexpr const char* kLibrary = "olc_normalization";

enum class Op {
  Softmax,
  LogSoftmax,
  LayerNorm,
  RMSNorm,
  SimplifiedLayerNorm,
  BatchNorm,
  GroupNorm,
  InstanceNorm,
  LpNorm,
  MeanVarianceNorm
};

struct OpSpec {
  const char* name;
  Op op;
  int min_inputs, max_inputs, min_outputs, max_outputs;
  std::vector<const char*> attrs;  // accepted attribute names
  olc_kernel_vtable vtable;
};

std::vector<OpSpec>& specs() {
  static std::vector<OpSpec> s = {
      {"Softmax", Op::Softmax, 1, 1, 1, 1, {"axis"}, {}},
      {"LogSoftmax", Op::LogSoftmax, 1, 1, 1, 1, {"axis"}, {}},
      {"LayerNormalization", Op::LayerNorm, 2, 3, 1, 3, {"axis", "epsilon", "stash_type"}, {}},
      {"RMSNormalization", Op::RMSNorm, 2, 2, 1, 1, {"axis", "epsilon", "stash_type"}, {}},
      {"SimplifiedLayerNormalization", Op::SimplifiedLayerNorm, 2, 2, 1, 2, {"axis", "epsilon", "stash_type"}, {}},
      {"BatchNormalization", Op::BatchNorm, 5, 5, 1, 3, {"epsilon", "momentum", "training_mode", "spatial"}, {}},
      {"GroupNormalization", Op::GroupNorm, 3, 3, 1, 1, {"num_groups", "epsilon", "stash_type"}, {}},
      {"InstanceNormalization", Op::InstanceNorm, 3, 3, 1, 1, {"epsilon"}, {}},
      {"LpNormalization", Op::LpNorm, 1, 1, 1, 1, {"axis", "p"}, {}},
      {"MeanVarianceNormalization", Op::MeanVarianceNorm, 1, 1, 1, 1, {"axes"}, {}},
  };
  return s;
}

const OpSpec* find_spec(const char* op_type) {
  for (const OpSpec& s : specs())
    if (op_type && std::strcmp(s.name, op_type) == 0) return &s;
  return nullptr;
}

bool is_float_type(int32_t t) {
  return t == OLC_DTYPE_FLOAT || t == OLC_DTYPE_DOUBLE || t == OLC_DTYPE_FLOAT16 || t == OLC_DTYPE_BFLOAT16;
}

struct KernelState {
  Op op;
  const char* name;
  int64_t opset;
  // attributes (defaults of the schema at this opset)
  int64_t axis = -1;
  double epsilon = 1e-5;
  int64_t p = 2;
  int64_t num_groups = 0;
  std::vector<int64_t> axes{0, 2, 3};
  // types: expected input dtypes (UNDEFINED: absent), output dtypes
  int32_t n_inputs = 0;
  int32_t in_dtypes[5] = {0, 0, 0, 0, 0};
  int32_t out_dtypes[3] = {0, 0, 0};
  bool f64 = false;  // compute in double (some involved type is float64)
  RowOps<float> ops32{};
  RowOps<double> ops64{};
  Convert cv{};
  const char* isa = "scalar";
  std::string isa_stream;  // usage detail when Y is streamed: "<isa>,stream"
  const olc_tuning_param* parallel_min_elements = nullptr;
  const olc_tuning_param* grain_elements = nullptr;
  const olc_tuning_param* stream_min_bytes = nullptr;
};

bool fail(char* error, size_t size, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
bool fail(char* error, size_t size, const char* fmt, ...) {
  if (error && size) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(error, size, fmt, ap);
    va_end(ap);
  }
  return false;
}

std::string shape_str(int32_t ndim, const int64_t* shape) {
  std::string s = "[";
  for (int32_t i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// ---------------------------------------------------------------- create

bool read_attributes(KernelState* st, const OpSpec& spec, const olc_node_info* node, char* error, size_t es) {
  // Schema defaults that depend on the opset.
  if (st->op == Op::Softmax || st->op == Op::LogSoftmax) st->axis = node->opset < 13 ? 1 : -1;
  if (st->op == Op::LpNorm) st->axis = -1;
  int64_t stash_type = 1, training_mode = 0, spatial = 1;
  bool have_groups = false;
  for (int32_t k = 0; k < node->n_attributes; ++k) {
    const olc_attribute& a = node->attributes[k];
    const char* nm = a.name ? a.name : "";
    bool known = false;
    for (const char* s : spec.attrs) known = known || std::strcmp(s, nm) == 0;
    if (!known) return fail(error, es, "unknown attribute '%s'", nm);
    auto want = [&](int32_t type) {
      if (a.type == type) return true;
      fail(error, es, "attribute '%s' has type code %d, expected %d", nm, a.type, type);
      return false;
    };
    if (!std::strcmp(nm, "axis")) {
      if (!want(OLC_ATTR_INT)) return false;
      st->axis = a.i;
    } else if (!std::strcmp(nm, "epsilon")) {
      if (!want(OLC_ATTR_FLOAT)) return false;
      if (!std::isfinite(a.f) || a.f < 0) return fail(error, es, "attribute 'epsilon' must be finite and >= 0, got %g", a.f);
      st->epsilon = a.f;
    } else if (!std::strcmp(nm, "stash_type")) {
      if (!want(OLC_ATTR_INT)) return false;
      stash_type = a.i;
    } else if (!std::strcmp(nm, "p")) {
      if (!want(OLC_ATTR_INT)) return false;
      if (a.i != 1 && a.i != 2) return fail(error, es, "attribute 'p' must be 1 or 2, got %lld", (long long)a.i);
      st->p = a.i;
    } else if (!std::strcmp(nm, "num_groups")) {
      if (!want(OLC_ATTR_INT)) return false;
      if (a.i <= 0) return fail(error, es, "attribute 'num_groups' must be positive, got %lld", (long long)a.i);
      st->num_groups = a.i;
      have_groups = true;
    } else if (!std::strcmp(nm, "axes")) {
      if (!want(OLC_ATTR_INTS)) return false;
      st->axes.assign(a.ints, a.ints + a.count);
    } else if (!std::strcmp(nm, "momentum")) {
      if (!want(OLC_ATTR_FLOAT)) return false;  // only used in training mode
    } else if (!std::strcmp(nm, "training_mode")) {
      if (!want(OLC_ATTR_INT)) return false;
      training_mode = a.i;
    } else if (!std::strcmp(nm, "spatial")) {
      if (!want(OLC_ATTR_INT)) return false;
      spatial = a.i;
    }
  }
  if (stash_type != 1)
    return fail(error, es, "stash_type %lld is not supported (only 1: statistics in float32 or wider)",
                (long long)stash_type);
  if (training_mode != 0)
    return fail(error, es, "training_mode=%lld is not supported: this kernel implements inference mode only",
                (long long)training_mode);
  if (spatial != 1) return fail(error, es, "spatial=%lld is not supported (only spatial=1)", (long long)spatial);
  if (st->op == Op::GroupNorm && !have_groups) return fail(error, es, "attribute 'num_groups' is required");
  // MeanVarianceNormalization axes are checked against the rank at run time.
  return true;
}

void* norm_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t es) {
  const OpSpec* spec = find_spec(node->op_type);
  if (!spec) {
    fail(error, es, "op %s is not an operator of olc_normalization", node->op_type);
    return nullptr;
  }
  if (node->n_inputs < spec->min_inputs || node->n_inputs > spec->max_inputs) {
    fail(error, es, "expects %d to %d inputs, got %d", spec->min_inputs, spec->max_inputs, node->n_inputs);
    return nullptr;
  }
  if (node->n_outputs < spec->min_outputs || node->n_outputs > spec->max_outputs) {
    fail(error, es, "expects %d to %d outputs, got %d", spec->min_outputs, spec->max_outputs, node->n_outputs);
    return nullptr;
  }
  std::unique_ptr<KernelState> st(new (std::nothrow) KernelState());
  if (!st) {
    fail(error, es, "out of memory");
    return nullptr;
  }
  st->op = spec->op;
  st->name = spec->name;
  st->opset = node->opset;
  st->n_inputs = node->n_inputs;
  if (!read_attributes(st.get(), *spec, node, error, es)) return nullptr;

  // Every input except an absent optional bias must be a float tensor.
  for (int32_t i = 0; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    const bool optional = st->op == Op::LayerNorm && i == 2;
    if (t == OLC_DTYPE_UNDEFINED && optional) continue;
    if (!is_float_type(t)) {
      fail(error, es, "input %d has unsupported type %s", i, olc_dtype_name(t));
      return nullptr;
    }
    st->in_dtypes[i] = t;
  }
  const int32_t x_t = st->in_dtypes[0];
  // Output 0 type: the scale's type for RMSNormalization and
  // SimplifiedLayerNormalization, X's type otherwise.
  const bool y_from_scale = st->op == Op::RMSNorm || st->op == Op::SimplifiedLayerNorm;
  const int32_t y_t = y_from_scale ? st->in_dtypes[1] : x_t;
  // Same-type constraints (T) of the schemas.
  auto same = [&](int32_t i) {
    if (st->in_dtypes[i] != OLC_DTYPE_UNDEFINED && st->in_dtypes[i] != x_t) {
      fail(error, es, "input %d has type %s but X has type %s (the schema requires the same type)", i,
           olc_dtype_name(st->in_dtypes[i]), olc_dtype_name(x_t));
      return false;
    }
    return true;
  };
  if (st->op == Op::LayerNorm || st->op == Op::GroupNorm || st->op == Op::InstanceNorm)
    for (int32_t i = 1; i < node->n_inputs; ++i)
      if (!same(i)) return nullptr;
  if (st->op == Op::BatchNorm && node->opset < 14)
    for (int32_t i = 1; i < 5; ++i)
      if (!same(i)) return nullptr;
  if (st->op == Op::BatchNorm && node->opset == 14 && node->n_inputs == 5) {
    for (int32_t i = 2; i < 5; ++i)
      if (st->in_dtypes[i] != st->in_dtypes[1]) {
        fail(error, es, "inputs 1 to 4 must share one type (U) at opset 14, got %s and %s",
             olc_dtype_name(st->in_dtypes[1]), olc_dtype_name(st->in_dtypes[i]));
        return nullptr;
      }
  }
  if (st->op == Op::BatchNorm && node->opset >= 15) {
    if (st->in_dtypes[2] != st->in_dtypes[1] || st->in_dtypes[4] != st->in_dtypes[3]) {
      fail(error, es, "scale and B must share one type (T1), input_mean and input_var another (T2)");
      return nullptr;
    }
  }
  if (st->op == Op::BatchNorm) {
    for (int32_t o = 1; o < node->n_outputs; ++o)
      if (node->output_dtypes[o] != OLC_DTYPE_UNDEFINED) {
        fail(error, es, "the running mean and variance outputs exist only in training mode, which this kernel "
                        "does not implement");
        return nullptr;
      }
  }
  st->out_dtypes[0] = y_t;
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != y_t) {
    fail(error, es, "output 0 has type %s, expected %s", olc_dtype_name(node->output_dtypes[0]), olc_dtype_name(y_t));
    return nullptr;
  }
  // Statistics outputs: LayerNormalization Mean/InvStdDev, the inverse
  // standard deviation of SimplifiedLayerNormalization. Their type is the
  // inferred one, float32 when unknown.
  if (st->op == Op::LayerNorm || st->op == Op::SimplifiedLayerNorm) {
    for (int32_t o = 1; o < node->n_outputs; ++o) {
      const int32_t t = node->output_dtypes[o];
      if (t != OLC_DTYPE_UNDEFINED && !is_float_type(t)) {
        fail(error, es, "output %d has unsupported type %s", o, olc_dtype_name(t));
        return nullptr;
      }
      st->out_dtypes[o] = t == OLC_DTYPE_UNDEFINED ? OLC_DTYPE_FLOAT : t;
    }
  }
  for (int32_t i = 0; i < 5; ++i) st->f64 = st->f64 || st->in_dtypes[i] == OLC_DTYPE_DOUBLE;
  for (int32_t o = 0; o < 3; ++o) st->f64 = st->f64 || st->out_dtypes[o] == OLC_DTYPE_DOUBLE;

  // Highest level first. float64 rows and any missing conversion come
  // from the scalar level.
  const RowKernels* sk = scalar::kernels();
  const RowKernels* k = sk;
  const int32_t level = api->simd_level();
  if (level >= OLC_SIMD_AVX512) k = avx512::kernels();
  else if (level >= OLC_SIMD_AVX2) k = avx2::kernels();
  st->ops32 = k->f32;
  st->ops64 = sk->f64;
  st->cv = sk->convert;
  if (k->convert.f16_to_f32) st->cv.f16_to_f32 = k->convert.f16_to_f32;
  if (k->convert.f32_to_f16) st->cv.f32_to_f16 = k->convert.f32_to_f16;
  if (k->convert.bf16_to_f32) st->cv.bf16_to_f32 = k->convert.bf16_to_f32;
  if (k->convert.f32_to_bf16) st->cv.f32_to_bf16 = k->convert.f32_to_bf16;
  st->isa = st->f64 ? "scalar" : k->isa;
  st->isa_stream = std::string(st->isa) + ",stream";

  // Work below these element counts runs on the calling thread; above, rows
  // are split in ranges of at least grain_elements (and at least one row).
  const bool costly = st->op == Op::Softmax || st->op == Op::LogSoftmax;
  const int32_t key_t = st->f64 ? OLC_DTYPE_DOUBLE : OLC_DTYPE_FLOAT;
  st->parallel_min_elements =
      api->tuning_declare_int(kLibrary, spec->name, st->isa, key_t, "parallel_min_elements", costly ? 8192 : 16384);
  st->grain_elements =
      api->tuning_declare_int(kLibrary, spec->name, st->isa, key_t, "grain_elements", costly ? 4096 : 8192);
  // Outputs of at least this many bytes are written with non-temporal
  // stores (0: never, the default), where the level has them: an output
  // that cannot stay in the cache then costs no read for ownership. Alone,
  // run after run over the same buffers, streaming wins from about 8 MiB
  // (AVX-512 host, 2 vCPUs, about 32 MiB of L3; cached -> streamed, us:
  // Softmax [16384, 512] 5202 -> 4418 one thread, LayerNormalization
  // [16384, 768] 8589 -> 5434). Between the two MatMuls of attention it
  // loses: the first leaves the scores in the cache and the second reads
  // the probabilities back from memory instead (QK^T, Softmax, PV at
  // [1, 12, 512, 512]: 7333 -> 8493 one thread, 3448 -> 4392 two; 32
  // heads 10737 -> 11785 two; 64 heads, 64 MiB, 2 % faster). So a
  // deployment whose normalized outputs go to memory turns it on.
  st->stream_min_bytes = api->tuning_declare_int(kLibrary, spec->name, st->isa, key_t, "stream_min_bytes", 0);
  return st.release();
}

void norm_destroy(void* state) { delete static_cast<KernelState*>(state); }

// ---------------------------------------------------------------- conversions

template <class T>
void load_as(const Convert& cv, const void* src, int32_t dtype, T* dst, int64_t n);
template <class T>
void store_as(const Convert& cv, const T* src, void* dst, int32_t dtype, int64_t n);

template <>
void load_as<float>(const Convert& cv, const void* src, int32_t dtype, float* dst, int64_t n) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
    case OLC_DTYPE_FLOAT16: cv.f16_to_f32(static_cast<const uint16_t*>(src), dst, n); break;
    case OLC_DTYPE_BFLOAT16: cv.bf16_to_f32(static_cast<const uint16_t*>(src), dst, n); break;
    default: {
      const double* s = static_cast<const double*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
    }
  }
}

template <>
void store_as<float>(const Convert& cv, const float* src, void* dst, int32_t dtype, int64_t n) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
    case OLC_DTYPE_FLOAT16: cv.f32_to_f16(src, static_cast<uint16_t*>(dst), n); break;
    case OLC_DTYPE_BFLOAT16: cv.f32_to_bf16(src, static_cast<uint16_t*>(dst), n); break;
    default: {
      double* d = static_cast<double*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = src[i];
    }
  }
}

template <>
void load_as<double>(const Convert& cv, const void* src, int32_t dtype, double* dst, int64_t n) {
  if (dtype == OLC_DTYPE_DOUBLE) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(double));
    return;
  }
  const size_t es = olc_dtype_size(dtype);
  float buf[256];
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t m = std::min<int64_t>(256, n - i);
    load_as<float>(cv, static_cast<const char*>(src) + i * es, dtype, buf, m);
    for (int64_t j = 0; j < m; ++j) dst[i + j] = buf[j];
  }
}

template <>
void store_as<double>(const Convert& cv, const double* src, void* dst, int32_t dtype, int64_t n) {
  if (dtype == OLC_DTYPE_DOUBLE) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(double));
    return;
  }
  const size_t es = olc_dtype_size(dtype);
  float buf[256];
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t m = std::min<int64_t>(256, n - i);
    for (int64_t j = 0; j < m; ++j) buf[j] = static_cast<float>(src[i + j]);
    store_as<float>(cv, buf, static_cast<char*>(dst) + i * es, dtype, m);
  }
}

template <class T>
constexpr int32_t dtype_of() {
  return sizeof(T) == 8 ? OLC_DTYPE_DOUBLE : OLC_DTYPE_FLOAT;
}

// ---------------------------------------------------------------- layout

// Row r, element j lives at base(r) + off[j] (in elements); contiguous
// layouts have base(r) = r * D and off[j] = j.
struct Layout {
  int64_t rows = 0, D = 0;
  bool contiguous = true;
  // Non-contiguous layouts: elements [k, k + run) of a row (k a multiple of
  // run) are adjacent in memory (run = the product of the trailing axes of
  // the tensor that are all reduced; 1 when the last axis is kept).
  int64_t run = 1;
  std::vector<int64_t> off;
  std::vector<int64_t> kept_dims, kept_strides;  // row index -> base, row-major over kept axes

  int64_t base(int64_t r) const {
    if (contiguous) return r * D;
    int64_t b = 0;
    for (size_t k = kept_dims.size(); k-- > 0;) {
      const int64_t d = kept_dims[k];
      b += (r % d) * kept_strides[k];
      r /= d;
    }
    return b;
  }
};

// The rows of x over the set `reduced` of axes (each in [0, ndim)).
Layout layout_over(int32_t ndim, const int64_t* shape, const std::vector<bool>& reduced) {
  Layout L;
  std::vector<int64_t> strides(ndim, 1);
  for (int32_t i = ndim - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  L.rows = 1;
  L.D = 1;
  int32_t first_reduced = ndim;
  for (int32_t i = 0; i < ndim; ++i) {
    if (reduced[i]) {
      L.D *= shape[i];
      first_reduced = std::min(first_reduced, i);
    } else {
      L.rows *= shape[i];
    }
  }
  bool trailing = true;
  for (int32_t i = first_reduced; i < ndim; ++i) trailing = trailing && reduced[i];
  // Size-1 kept axes inside the reduced block do not break contiguity.
  if (!trailing) {
    trailing = true;
    for (int32_t i = first_reduced; i < ndim; ++i) trailing = trailing && (reduced[i] || shape[i] == 1);
  }
  L.contiguous = trailing;
  if (L.contiguous) return L;
  for (int32_t i = 0; i < ndim; ++i)
    if (!reduced[i]) {
      L.kept_dims.push_back(shape[i]);
      L.kept_strides.push_back(strides[i]);
    }
  for (int32_t i = ndim - 1; i >= 0 && reduced[i]; --i) L.run *= shape[i];
  L.off.assign(static_cast<size_t>(L.D), 0);
  std::vector<int64_t> rd, rs;
  for (int32_t i = 0; i < ndim; ++i)
    if (reduced[i]) {
      rd.push_back(shape[i]);
      rs.push_back(strides[i]);
    }
  for (int64_t j = 0; j < L.D; ++j) {
    int64_t rem = j, o = 0;
    for (size_t k = rd.size(); k-- > 0;) {
      o += (rem % rd[k]) * rs[k];
      rem /= rd[k];
    }
    L.off[static_cast<size_t>(j)] = o;
  }
  return L;
}

Layout layout_2d(int64_t rows, int64_t D) {
  Layout L;
  L.rows = rows;
  L.D = D;
  return L;
}

// ---------------------------------------------------------------- run

template <class T>
struct Job {
  const KernelState* st;
  const RowOps<T>* ops;
  Layout L;
  const void* x;
  int32_t x_t;
  void* y;
  int32_t y_t;
  // LayerNormalization / RMS / Simplified: D-element affine vectors
  const T* scale = nullptr;
  const T* bias = nullptr;
  // per-channel parameters (Batch/Instance/Group normalization)
  int64_t C = 0, G = 0, S = 0;
  const T* ch_shift = nullptr;  // BatchNormalization: mean
  const T* ch_mul = nullptr;    // scale (or scale / sqrt(var + eps))
  const T* ch_add = nullptr;    // bias
  // per-row statistics, when requested
  T* stat_mean = nullptr;
  T* stat_inv = nullptr;
  T eps;
  bool stream = false;  // non-temporal stores of Y (Softmax, LogSoftmax, Layer/RMS/Simplified)
  std::atomic<bool>* oom = nullptr;  // set when a range could not allocate its row buffers
  // Softmax over a middle axis, vectorized across columns: work item w is
  // block w % col_blocks of outer slice w / col_blocks.
  bool cols = false;
  int64_t axis_len = 0, inner = 0, col_blocks = 0;
};

constexpr int64_t kColBlock = 256;  // columns per work item of the column softmax

template <class T>
void run_cols(void* user, int64_t begin, int64_t end) {
  const Job<T>& j = *static_cast<const Job<T>*>(user);
  const T* x = static_cast<const T*>(j.x);
  T* y = static_cast<T*>(j.y);
  const int log = j.st->op == Op::LogSoftmax;
  for (int64_t w = begin; w < end; ++w) {
    const int64_t o = w / j.col_blocks, c0 = (w % j.col_blocks) * kColBlock;
    const int64_t off = o * j.axis_len * j.inner + c0;
    const int64_t nc = std::min(kColBlock, j.inner - c0);
    if (j.st->op == Op::LpNorm) j.ops->lp_cols(x + off, y + off, j.axis_len, j.inner, nc, static_cast<int>(j.st->p));
    else j.ops->softmax_cols(x + off, y + off, j.axis_len, j.inner, nc, log);
  }
}

// nt: y may be written with non-temporal stores (scratch: D elements).
template <class T>
void row_compute(const Job<T>& j, int64_t r, const T* x, T* y, bool nt, T* scratch) {
  const KernelState* st = j.st;
  const RowOps<T>& o = *j.ops;
  const int64_t D = j.L.D;
  auto apply = nt ? o.apply_nt : o.apply;
  switch (st->op) {
    case Op::Softmax:
    case Op::LogSoftmax: {
      const int log = st->op == Op::LogSoftmax;
      // float16 / bfloat16 rows (widened in x, never streamed) follow the
      // roundings of the function body in their type, at every opset.
      auto narrow = j.x_t == OLC_DTYPE_FLOAT16 ? o.softmax_f16 : j.x_t == OLC_DTYPE_BFLOAT16 ? o.softmax_bf16 : nullptr;
      if (narrow) narrow(x, y, D, log);
      else if (nt) o.softmax_nt(x, y, D, log, scratch);
      else o.softmax(x, y, D, log);
      return;
    }
    case Op::LayerNorm: {
      T m, v;
      o.moments(x, D, &m, &v);
      const T inv = T(1) / std::sqrt(v + j.eps);
      apply(x, y, D, m, inv, j.scale, j.bias);
      if (j.stat_mean) j.stat_mean[r] = m;
      if (j.stat_inv) j.stat_inv[r] = inv;
      return;
    }
    case Op::RMSNorm:
    case Op::SimplifiedLayerNorm: {
      const T ms = o.sum_squares(x, D) / static_cast<T>(D);
      const T inv = T(1) / std::sqrt(ms + j.eps);
      apply(x, y, D, T(0), inv, j.scale, nullptr);
      if (j.stat_inv) j.stat_inv[r] = inv;
      return;
    }
    case Op::BatchNorm: {
      const int64_t c = r % j.C;
      o.affine(x, y, D, j.ch_shift[c], j.ch_mul[c], j.ch_add[c]);
      return;
    }
    case Op::InstanceNorm: {
      const int64_t c = r % j.C;
      T m, v;
      o.moments(x, D, &m, &v);
      const T inv = T(1) / std::sqrt(v + j.eps);
      o.affine(x, y, D, m, inv * j.ch_mul[c], j.ch_add[c]);
      return;
    }
    case Op::GroupNorm: {
      const int64_t g = r % j.G;
      const int64_t cpg = j.C / j.G;
      T m, v;
      o.moments(x, D, &m, &v);
      const T inv = T(1) / std::sqrt(v + j.eps);
      for (int64_t cc = 0; cc < cpg; ++cc) {
        const int64_t c = g * cpg + cc;
        const int64_t pi = st->opset < 21 ? g : c;  // opset 18: one scale and bias per group
        o.affine(x + cc * j.S, y + cc * j.S, j.S, m, inv * j.ch_mul[pi], j.ch_add[pi]);
      }
      return;
    }
    case Op::LpNorm: {
      const T norm = st->p == 1 ? o.sum_abs(x, D) : std::sqrt(o.sum_squares(x, D));
      if (norm == T(0)) {
        for (int64_t i = 0; i < D; ++i) y[i] = T(0);  // the reference's 0 / 0 = 0
      } else {
        apply(x, y, D, T(0), T(1) / norm, nullptr, nullptr);  // keeps the sign of a zero
      }
      return;
    }
    case Op::MeanVarianceNorm: {
      T m, v;
      o.moments(x, D, &m, &v);
      // (x - mean) / (sqrt(var) + 1e-9), the epsilon of the ONNX function body
      const T den = std::sqrt(v) + static_cast<T>(1e-9f);
      o.affine(x, y, D, m, T(1) / den, T(0));
      return;
    }
  }
}

// Rows longer than this keep the row-by-row loop: a pass over a long row
// hides its reductions' latency by itself.
constexpr int64_t kPairedRowsMax = 1024;

template <class T>
void run_rows(void* user, int64_t begin, int64_t end) {
  const Job<T>& j = *static_cast<const Job<T>*>(user);
  const KernelState* st = j.st;
  const int64_t D = j.L.D;
  const size_t xs = olc_dtype_size(j.x_t), ys = olc_dtype_size(j.y_t);
  const bool x_direct = j.L.contiguous && j.x_t == dtype_of<T>();
  const bool y_direct = j.L.contiguous && j.y_t == dtype_of<T>();
  const bool nt = j.stream && y_direct;
  // Contiguous float rows of Softmax / LogSoftmax up to kPairedRowsMax
  // long go to softmax_rows, which interleaves them in pairs.
  if ((st->op == Op::Softmax || st->op == Op::LogSoftmax) && x_direct && y_direct && !nt && D <= kPairedRowsMax) {
    j.ops->softmax_rows(static_cast<const T*>(j.x) + begin * D, static_cast<T*>(j.y) + begin * D, D, end - begin,
                        st->op == Op::LogSoftmax);
    return;
  }
  // Row buffers: nothrow, since this runs on executor threads where an
  // exception cannot be carried back; a failure is reported after the loop.
  const size_t d = static_cast<size_t>(D);
  std::unique_ptr<T[]> scratch(nt ? new (std::nothrow) T[d] : nullptr);
  std::unique_ptr<T[]> xb(x_direct ? nullptr : new (std::nothrow) T[d]);
  std::unique_ptr<T[]> yb(y_direct ? nullptr : new (std::nothrow) T[d]);
  std::unique_ptr<char[]> raw(j.L.contiguous ? nullptr : new (std::nothrow) char[d * std::max(xs, ys)]);
  if ((nt && !scratch) || (!x_direct && !xb) || (!y_direct && !yb) || (!j.L.contiguous && !raw)) {
    j.oom->store(true, std::memory_order_relaxed);
    return;
  }
  for (int64_t r = begin; r < end; ++r) {
    const int64_t b = j.L.base(r);
    const T* xr;
    if (x_direct) {
      xr = static_cast<const T*>(j.x) + b;
    } else if (j.L.contiguous) {
      load_as<T>(st->cv, static_cast<const char*>(j.x) + b * xs, j.x_t, xb.get(), D);
      xr = xb.get();
    } else {
      const char* src = static_cast<const char*>(j.x);
      const int64_t run = j.L.run;
      for (int64_t k = 0; k < D; k += run)
        std::memcpy(raw.get() + k * xs, src + (b + j.L.off[k]) * xs, static_cast<size_t>(run) * xs);
      load_as<T>(st->cv, raw.get(), j.x_t, xb.get(), D);
      xr = xb.get();
    }
    T* yr = y_direct ? static_cast<T*>(j.y) + b : yb.get();
    row_compute<T>(j, r, xr, yr, nt, scratch.get());
    if (y_direct) continue;
    if (j.L.contiguous) {
      store_as<T>(st->cv, yr, static_cast<char*>(j.y) + b * ys, j.y_t, D);
    } else {
      store_as<T>(st->cv, yr, raw.get(), j.y_t, D);
      char* dst = static_cast<char*>(j.y);
      const int64_t run = j.L.run;
      for (int64_t k = 0; k < D; k += run)
        std::memcpy(dst + (b + j.L.off[k]) * ys, raw.get() + k * ys, static_cast<size_t>(run) * ys);
    }
  }
  // Non-temporal stores drained before the caller learns the rows are done.
  if (nt) std::atomic_thread_fence(std::memory_order_seq_cst);
}

int64_t norm_axis(int64_t axis, int32_t rank) { return axis < 0 ? axis + rank : axis; }

// Checks that a parameter tensor p broadcasts onto the normalized shape
// x.shape[axis:] without varying over the leading axes, and fills `out`
// with its D values (in T) in the row order, or points `direct` at p's
// data when no copy is needed.
template <class T>
bool expand_param(const KernelState* st, const olc_tensor& p, const olc_tensor& x, int64_t axis, int64_t D,
                  const char* what, std::vector<T>* out, const T** direct, char* msg, size_t ms) {
  if (p.ndim > x.ndim)
    return fail(msg, ms, "%s shape %s has more dimensions than X %s", what, shape_str(p.ndim, p.shape).c_str(),
                shape_str(x.ndim, x.shape).c_str());
  const int32_t off = x.ndim - p.ndim;
  bool full = true;  // p's shape is x.shape[axis:] (leading 1s allowed)
  for (int32_t i = 0; i < p.ndim; ++i) {
    const int32_t xi = off + i;
    const int64_t pd = p.shape[i], xd = x.shape[xi];
    if (xi < axis) {
      if (pd != 1)
        return fail(msg, ms, "%s shape %s does not broadcast to the normalized shape %s of X %s (axis %lld)", what,
                    shape_str(p.ndim, p.shape).c_str(), shape_str(x.ndim - (int32_t)axis, x.shape + axis).c_str(),
                    shape_str(x.ndim, x.shape).c_str(), (long long)axis);
    } else if (pd != xd) {
      if (pd != 1)
        return fail(msg, ms, "%s shape %s does not broadcast to the normalized shape %s of X %s (axis %lld)", what,
                    shape_str(p.ndim, p.shape).c_str(), shape_str(x.ndim - (int32_t)axis, x.shape + axis).c_str(),
                    shape_str(x.ndim, x.shape).c_str(), (long long)axis);
      full = false;
    }
  }
  for (int32_t xi = (int32_t)axis; xi < off; ++xi) full = full && x.shape[xi] == 1;
  if (D > 0 && p.data == nullptr) return fail(msg, ms, "%s has no data", what);
  if (full && p.dtype == dtype_of<T>()) {
    *direct = static_cast<const T*>(p.data);
    return true;
  }
  out->resize(static_cast<size_t>(D));
  if (full) {
    load_as<T>(st->cv, p.data, p.dtype, out->data(), D);
  } else {
    // Broadcast: element j of the row maps to p's element with stride 0 on
    // the size-1 axes of p.
    const int64_t pn = olc_element_count(&p);
    std::vector<T> pv(static_cast<size_t>(std::max<int64_t>(pn, 1)));
    load_as<T>(st->cv, p.data, p.dtype, pv.data(), pn);
    const int32_t nd = x.ndim - (int32_t)axis;
    std::vector<int64_t> pstride(nd, 0);
    int64_t s = 1;
    for (int32_t i = p.ndim - 1; i >= 0; --i) {
      const int32_t k = off + i - (int32_t)axis;
      if (k >= 0 && p.shape[i] != 1) pstride[k] = s;
      s *= p.shape[i];
    }
    for (int64_t jj = 0; jj < D; ++jj) {
      int64_t rem = jj, po = 0;
      for (int32_t k = nd - 1; k >= 0; --k) {
        const int64_t d = x.shape[axis + k];
        po += (rem % d) * pstride[k];
        rem /= d;
      }
      (*out)[static_cast<size_t>(jj)] = pv[static_cast<size_t>(po)];
    }
  }
  *direct = out->data();
  return true;
}

// A per-channel parameter: rank 1 with `count` elements.
template <class T>
bool channel_param(const KernelState* st, const olc_tensor& p, int64_t count, const char* what, const char* count_name,
                   std::vector<T>* out, char* msg, size_t ms) {
  if (p.ndim != 1 || p.shape[0] != count)
    return fail(msg, ms, "%s must have shape [%lld] (%s), got %s", what, (long long)count, count_name,
                shape_str(p.ndim, p.shape).c_str());
  if (count > 0 && p.data == nullptr) return fail(msg, ms, "%s has no data", what);
  out->resize(static_cast<size_t>(count));
  load_as<T>(st->cv, p.data, p.dtype, out->data(), count);
  return true;
}

// A middle axis `a` with the data already in the compute type: the op runs
// down the columns, W at a time, instead of gathering each row.
template <class T>
void set_columns(Job<T>* j, const olc_tensor& x, int64_t a) {
  int64_t outer = 1, inner = 1;
  for (int32_t i = 0; i < x.ndim; ++i) {
    if (i < a) outer *= x.shape[i];
    if (i > a) inner *= x.shape[i];
  }
  if (inner > 1 && x.shape[a] > 0 && x.dtype == dtype_of<T>() && j->y_t == dtype_of<T>()) {
    j->cols = true;
    j->axis_len = x.shape[a];
    j->inner = inner;
    j->col_blocks = (inner + kColBlock - 1) / kColBlock;
    j->L = layout_2d(outer * j->col_blocks, j->axis_len * std::min(kColBlock, inner));
  }
}

template <class T>
int32_t run_typed(const KernelState* st, olc_context* ctx, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) {
  const olc_core_api* api = g_api;
  char msg[512];
  const olc_tensor& x = in[0];
  const int32_t rank = x.ndim;
  const int64_t n = olc_element_count(&x);
  Job<T> j;
  j.st = st;
  j.ops = nullptr;
  j.x = x.data;
  j.x_t = x.dtype;
  j.y_t = st->out_dtypes[0];
  j.eps = static_cast<T>(static_cast<float>(st->epsilon));  // ONNX float attribute: a float32 value
  std::vector<T> scale_v, bias_v, shift_v, mul_v, add_v;
  std::vector<int64_t> stat_shape;
  bool want_mean = false, want_inv = false;

  auto err = [&](const char* fmt, auto... args) {
    std::snprintf(msg, sizeof msg, fmt, args...);
    return api->set_error(ctx, msg);
  };

  switch (st->op) {
    case Op::Softmax:
    case Op::LogSoftmax: {
      if (st->opset < 13) {
        // Coerced to 2-D at axis: rows prod(shape[:axis]), D prod(shape[axis:]).
        // The axis range is [-r, r - 1], as onnxruntime checks it.
        if (st->axis < -rank || st->axis >= rank)
          return err("axis %lld is out of range for an input of rank %d (expected [%d, %d])", (long long)st->axis,
                     rank, -rank, rank - 1);
        const int64_t a = norm_axis(st->axis, rank);
        int64_t rows = 1, D = 1;
        for (int32_t i = 0; i < rank; ++i) (i < a ? rows : D) *= x.shape[i];
        j.L = layout_2d(rows, D);
      } else {
        if (st->axis < -rank || st->axis >= rank)
          return err("axis %lld is out of range for an input of rank %d (expected [%d, %d])", (long long)st->axis,
                     rank, -rank, rank - 1);
        std::vector<bool> red(rank, false);
        const int64_t a = norm_axis(st->axis, rank);
        red[a] = true;
        j.L = layout_over(rank, x.shape, red);
        set_columns(&j, x, a);
      }
      break;
    }
    case Op::LayerNorm:
    case Op::RMSNorm:
    case Op::SimplifiedLayerNorm: {
      if (st->axis < -rank || st->axis >= rank)
        return err("axis %lld is out of range for an input of rank %d (expected [%d, %d])", (long long)st->axis, rank,
                   -rank, rank - 1);
      const int64_t a = norm_axis(st->axis, rank);
      int64_t rows = 1, D = 1;
      for (int32_t i = 0; i < rank; ++i) (i < a ? rows : D) *= x.shape[i];
      j.L = layout_2d(rows, D);
      if (!expand_param<T>(st, in[1], x, a, D, "scale", &scale_v, &j.scale, msg, sizeof msg))
        return api->set_error(ctx, msg);
      if (st->op == Op::LayerNorm && n_inputs > 2 && in[2].dtype != OLC_DTYPE_UNDEFINED)
        if (!expand_param<T>(st, in[2], x, a, D, "B", &bias_v, &j.bias, msg, sizeof msg))
          return api->set_error(ctx, msg);
      for (int32_t i = 0; i < rank; ++i) stat_shape.push_back(i < a ? x.shape[i] : 1);
      want_mean = st->op == Op::LayerNorm && n_outputs > 1;
      want_inv = (st->op == Op::LayerNorm && n_outputs > 2) || (st->op == Op::SimplifiedLayerNorm && n_outputs > 1);
      break;
    }
    case Op::BatchNorm:
    case Op::InstanceNorm:
    case Op::GroupNorm: {
      if (rank < 2) return err("X must have rank >= 2 (N, C, ...), got shape %s", shape_str(rank, x.shape).c_str());
      const int64_t N = x.shape[0], C = x.shape[1];
      int64_t S = 1;
      for (int32_t i = 2; i < rank; ++i) S *= x.shape[i];
      j.C = C;
      j.S = S;
      if (st->op == Op::BatchNorm) {
        std::vector<T> sc, b, mean, var;
        if (!channel_param<T>(st, in[1], C, "scale", "C = X.shape[1]", &sc, msg, sizeof msg) ||
            !channel_param<T>(st, in[2], C, "B", "C = X.shape[1]", &b, msg, sizeof msg) ||
            !channel_param<T>(st, in[3], C, "input_mean", "C = X.shape[1]", &mean, msg, sizeof msg) ||
            !channel_param<T>(st, in[4], C, "input_var", "C = X.shape[1]", &var, msg, sizeof msg))
          return api->set_error(ctx, msg);
        mul_v.resize(static_cast<size_t>(C));
        for (int64_t c = 0; c < C; ++c) mul_v[c] = sc[c] / std::sqrt(var[c] + j.eps);
        shift_v = std::move(mean);
        add_v = std::move(b);
        j.L = layout_2d(N * C, S);
      } else if (st->op == Op::InstanceNorm) {
        if (!channel_param<T>(st, in[1], C, "scale", "C = X.shape[1]", &mul_v, msg, sizeof msg) ||
            !channel_param<T>(st, in[2], C, "B", "C = X.shape[1]", &add_v, msg, sizeof msg))
          return api->set_error(ctx, msg);
        j.L = layout_2d(N * C, S);
      } else {
        const int64_t G = st->num_groups;
        if (C % G != 0)
          return err("the channel count %lld (X.shape[1]) is not a multiple of num_groups %lld", (long long)C,
                     (long long)G);
        const int64_t pc = st->opset < 21 ? G : C;
        const char* pname = st->opset < 21 ? "num_groups (opset 18)" : "C = X.shape[1] (opset 21)";
        if (!channel_param<T>(st, in[1], pc, "scale", pname, &mul_v, msg, sizeof msg) ||
            !channel_param<T>(st, in[2], pc, "bias", pname, &add_v, msg, sizeof msg))
          return api->set_error(ctx, msg);
        j.G = G;
        j.L = layout_2d(N * G, (C / G) * S);
      }
      j.ch_shift = shift_v.data();
      j.ch_mul = mul_v.data();
      j.ch_add = add_v.data();
      break;
    }
    case Op::LpNorm: {
      if (st->axis < -rank || st->axis >= rank)
        return err("axis %lld is out of range for an input of rank %d (expected [%d, %d])", (long long)st->axis, rank,
                   -rank, rank - 1);
      std::vector<bool> red(rank, false);
      const int64_t a = norm_axis(st->axis, rank);
      red[a] = true;
      j.L = layout_over(rank, x.shape, red);
      set_columns(&j, x, a);
      break;
    }
    case Op::MeanVarianceNorm: {
      std::vector<bool> red(rank, false);
      for (int64_t a : st->axes) {
        if (a < -rank || a >= rank)
          return err("axes entry %lld is out of range for an input of rank %d", (long long)a, rank);
        const int64_t k = norm_axis(a, rank);
        if (red[k]) return err("axes entry %lld repeats an axis", (long long)a);
        red[k] = true;
      }
      j.L = layout_over(rank, x.shape, red);
      break;
    }
  }

  // Validation done: allocate and compute.
  void* y = api->allocate_output(ctx, 0, j.y_t, rank, x.shape);
  if (!y && n > 0) return OLC_ERROR;
  j.y = y;
  std::vector<T> mean_v, inv_v;
  void* mean_out = nullptr;
  void* inv_out = nullptr;
  const int64_t rows = j.L.rows;
  if (want_mean) {
    mean_out = api->allocate_output(ctx, 1, st->out_dtypes[1], rank, stat_shape.data());
    if (!mean_out && rows > 0) return OLC_ERROR;
    mean_v.assign(static_cast<size_t>(rows), std::numeric_limits<T>::quiet_NaN());
    j.stat_mean = mean_v.data();
  }
  if (want_inv) {
    const int32_t oi = st->op == Op::LayerNorm ? 2 : 1;
    inv_out = api->allocate_output(ctx, oi, st->out_dtypes[oi], rank, stat_shape.data());
    if (!inv_out && rows > 0) return OLC_ERROR;
    inv_v.assign(static_cast<size_t>(rows), std::numeric_limits<T>::quiet_NaN());
    j.stat_inv = inv_v.data();
  }
  std::atomic<bool> oom{false};
  j.oom = &oom;
  if (n == 0) api->record_usage_detail(ctx, st->isa);
  if (n > 0) {
    j.ops = reinterpret_cast<const RowOps<T>*>(sizeof(T) == 8 ? static_cast<const void*>(&st->ops64)
                                                               : static_cast<const void*>(&st->ops32));
    const int64_t D = j.L.D;
    const int64_t stream_min = api->tuning_read_int(st->stream_min_bytes);
    const bool streamable = st->op == Op::Softmax || st->op == Op::LogSoftmax || st->op == Op::LayerNorm ||
                            st->op == Op::RMSNorm || st->op == Op::SimplifiedLayerNorm;
    j.stream = !j.cols && streamable && stream_min > 0 && j.ops->softmax_nt != nullptr &&
               n * static_cast<int64_t>(olc_dtype_size(j.y_t)) >= stream_min;
    // Streaming applies where Y is written in place (contiguous rows of the compute type).
    const bool streams = j.stream && j.L.contiguous && j.y_t == dtype_of<T>();
    api->record_usage_detail(ctx, streams ? st->isa_stream.c_str() : st->isa);
    const int64_t par_min = api->tuning_read_int(st->parallel_min_elements);
    const int64_t grain_el = std::max<int64_t>(1, api->tuning_read_int(st->grain_elements));
    if (j.cols) {
      j.stream = false;
      if (par_min <= 0 || n < par_min || rows < 2 || api->concurrency(ctx) <= 1) run_cols<T>(&j, 0, rows);
      else api->parallel_for(ctx, rows, std::max<int64_t>(1, grain_el / std::max<int64_t>(D, 1)), 0, &run_cols<T>, &j);
    } else if (par_min <= 0 || n < par_min || rows < 2 || api->concurrency(ctx) <= 1) {
      run_rows<T>(&j, 0, rows);
    } else {
      // At most 4 ranges per thread: each thread streams through long
      // contiguous blocks (Softmax [2048, 4096] on 2 threads: 10.2 ms with
      // 2-row ranges, 9.6 ms with 256-row ranges).
      const int64_t per_thread = (rows + 4 * api->concurrency(ctx) - 1) / (4 * api->concurrency(ctx));
      const int64_t grain = std::max<int64_t>({1, grain_el / std::max<int64_t>(D, 1), per_thread});
      api->parallel_for(ctx, rows, grain, 0, &run_rows<T>, &j);
    }
  }
  if (oom.load()) return api->set_error(ctx, "out of memory (row buffers)");
  // Statistics of empty rows (D == 0) stay NaN, as mean = 0 / 0.
  if (want_mean && rows > 0) store_as<T>(st->cv, mean_v.data(), mean_out, st->out_dtypes[1], rows);
  if (want_inv && rows > 0) {
    const int32_t oi = st->op == Op::LayerNorm ? 2 : 1;
    store_as<T>(st->cv, inv_v.data(), inv_out, st->out_dtypes[oi], rows);
  }
  return OLC_OK;
}

int32_t norm_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const olc_core_api* api = g_api;
  const KernelState* st = static_cast<const KernelState*>(state);
  char msg[256];
  if (n_inputs != st->n_inputs) {
    std::snprintf(msg, sizeof msg, "expects %d inputs, got %d", st->n_inputs, n_inputs);
    return api->set_error(ctx, msg);
  }
  for (int32_t i = 0; i < n_inputs; ++i) {
    const olc_tensor& t = inputs[i];
    if (t.dtype != st->in_dtypes[i]) {
      std::snprintf(msg, sizeof msg, "input %d has type %s, the kernel was created for %s", i,
                    olc_dtype_name(t.dtype), olc_dtype_name(st->in_dtypes[i]));
      return api->set_error(ctx, msg);
    }
    if (t.dtype == OLC_DTYPE_UNDEFINED) continue;
    const int64_t cnt = olc_element_count(&t);
    if (cnt < 0) {
      std::snprintf(msg, sizeof msg, "input %d has a negative dimension or too many elements", i);
      return api->set_error(ctx, msg);
    }
    if (cnt > 0 && t.data == nullptr) {
      std::snprintf(msg, sizeof msg, "input %d has no data", i);
      return api->set_error(ctx, msg);
    }
  }
  if (st->op == Op::BatchNorm && n_outputs > 1) {
    return api->set_error(ctx, "the running mean and variance outputs exist only in training mode, which this kernel "
                               "does not implement");
  }
  // No C++ exception may cross the C ABI: an allocation failure (parameter
  // vectors, per-range row buffers) becomes an error of this node.
  try {
    return st->f64 ? run_typed<double>(st, ctx, n_inputs, inputs, n_outputs)
                   : run_typed<float>(st, ctx, n_inputs, inputs, n_outputs);
  } catch (const std::bad_alloc&) {
    return api->set_error(ctx, "out of memory");
  } catch (...) {
    return api->set_error(ctx, "internal error");
  }
}

struct VtableInit {
  VtableInit() {
    static std::vector<std::string> names;
    names.reserve(specs().size());
    for (OpSpec& s : specs()) {
      names.push_back(std::string(kLibrary) + "::" + s.name);
      s.vtable.abi_version = OLC_ABI_VERSION;
      s.vtable.flags = 0;
      s.vtable.name = names.back().c_str();
      s.vtable.create = &norm_create;
      s.vtable.run = &norm_run;
      s.vtable.destroy = &norm_destroy;
    }
  }
};

}  // namespace

void set_core_api(const olc_core_api* api) {
  g_api = api;
  static VtableInit init;
  (void)init;
}

const olc_kernel_vtable* vtable(const std::string& op_type) {
  const OpSpec* s = find_spec(op_type.c_str());
  return s ? &s->vtable : nullptr;
}

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const OpSpec& s : specs()) out.emplace_back(s.name);
  return out;
}

bool engine_convert(const std::string& isa, const std::string& fn, uint16_t* h, float* f, int64_t n) {
  const int32_t level = g_api ? g_api->simd_level() : OLC_SIMD_SCALAR;
  const RowKernels* k = nullptr;
  if (isa == "scalar") k = scalar::kernels();
  else if (isa == "avx2" && level >= OLC_SIMD_AVX2) k = avx2::kernels();
  else if (isa == "avx512" && level >= OLC_SIMD_AVX512) k = avx512::kernels();
  if (!k) return false;
  const Convert& c = k->convert;
  if (fn == "f16_to_f32" && c.f16_to_f32) c.f16_to_f32(h, f, n);
  else if (fn == "bf16_to_f32" && c.bf16_to_f32) c.bf16_to_f32(h, f, n);
  else if (fn == "f32_to_f16" && c.f32_to_f16) c.f32_to_f16(f, h, n);
  else if (fn == "f32_to_bf16" && c.f32_to_bf16) c.f32_to_bf16(f, h, n);
  else return false;
  return true;
}

bool engine_f32(const std::string& isa, const std::string& fn, const float* x, float* y, int64_t n, float* out2) {
  const int32_t level = g_api ? g_api->simd_level() : OLC_SIMD_SCALAR;
  const RowKernels* k = nullptr;
  if (isa == "scalar") k = scalar::kernels();
  else if (isa == "avx2" && level >= OLC_SIMD_AVX2) k = avx2::kernels();
  else if (isa == "avx512" && level >= OLC_SIMD_AVX512) k = avx512::kernels();
  if (!k || n < 1) return false;
  if (fn == "softmax") k->f32.softmax(x, y, n, 0);
  else if (fn == "logsoftmax") k->f32.softmax(x, y, n, 1);
  else if (fn == "softmax_f16") k->f32.softmax_f16(x, y, n, 0);
  else if (fn == "logsoftmax_f16") k->f32.softmax_f16(x, y, n, 1);
  else if (fn == "softmax_bf16") k->f32.softmax_bf16(x, y, n, 0);
  else if (fn == "logsoftmax_bf16") k->f32.softmax_bf16(x, y, n, 1);
  else if (fn == "moments") k->f32.moments(x, n, y, out2);
  else if (fn == "sum_squares") y[0] = k->f32.sum_squares(x, n);
  else if (fn == "sum_abs") y[0] = k->f32.sum_abs(x, n);
  else return false;
  return true;
}

}  // namespace olc_norm
