// Gemm, MatMul, com.microsoft FusedMatMul and olc.fused MatMulAdd (MatMul
// with its bias Add, from the matmul-add graph pass) as seen by olc-core:
// attribute and type validation, shapes and broadcasting, the constant-B
// cache, and the call into the GEMM driver. Compiled without ISA flags.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "adapter_util.h"
#include "float_adapter.h"
#include "gemm_driver.h"

namespace olc_mm {

namespace {

const olc_core_api* g_api = nullptr;

// ------------------------------------------------------------ packed cache

// Constant B packed once and shared by every node that uses the same
// initializer with the same layout. The map holds weak references: an entry
// lives exactly as long as some kernel state holds it, and the data pointer
// cannot be reused while the initializer (hence that state) is alive.
struct CacheKey {
  const void* data;
  int32_t dtype;
  std::vector<int64_t> shape;
  bool trans;
  int32_t layout;
  int nr;
  bool operator<(const CacheKey& o) const {
    return std::tie(data, dtype, shape, trans, layout, nr) < std::tie(o.data, o.dtype, o.shape, o.trans, o.layout, o.nr);
  }
};

std::mutex g_cache_mu;
std::map<CacheKey, std::weak_ptr<PackedB>>& cache() {
  static auto* m = new std::map<CacheKey, std::weak_ptr<PackedB>>();
  return *m;
}

std::shared_ptr<PackedB> packed_constant(const KernelSet& ks, const olc_tensor& b, bool transB, int64_t K,
                                         int64_t N, int64_t nmat, bool* shared) {
  int32_t layout = static_cast<int32_t>(PackLayout::kF32);
  int nr = ks.isa->nr_f32;
  if (b.dtype == OLC_DTYPE_DOUBLE) {
    layout = static_cast<int32_t>(PackLayout::kF64);
    nr = ks.isa->nr_f64;
  } else if (b.dtype == OLC_DTYPE_BFLOAT16 && ks.uk_bf16) {
    layout = static_cast<int32_t>(PackLayout::kBf16);
    nr = ks.nr_bf16;
  }
  CacheKey key{b.data, b.dtype, std::vector<int64_t>(b.shape, b.shape + b.ndim), transB, layout, nr};
  std::lock_guard<std::mutex> lock(g_cache_mu);
  auto& m = cache();
  for (auto it = m.begin(); it != m.end();) {  // drop dead entries
    if (it->second.expired()) it = m.erase(it);
    else ++it;
  }
  auto it = m.find(key);
  if (it != m.end()) {
    if (auto sp = it->second.lock()) {
      *shared = true;
      return sp;
    }
  }
  *shared = false;
  auto sp = pack_b_constant(ks, b.dtype, b.data, transB, K, N, nmat);
  if (sp) m[key] = sp;
  return sp;
}

// ------------------------------------------------------------ state

enum class OpKind { kGemm, kMatMul, kFusedMatMul, kMatMulAdd };

struct FloatState {
  OpKind kind;
  int32_t dtype;
  bool transA = false, transB = false;
  bool transBatchA = false, transBatchB = false;  // FusedMatMul
  double alpha = 1.0, beta = 1.0;
  KernelSet ks;
  GemmTuning tun;  // defaults; the run reads the registry handles below
  const olc_tuning_param* t_kc = nullptr;
  const olc_tuning_param* t_nc = nullptr;
  const olc_tuning_param* t_par = nullptr;
  const olc_tuning_param* t_splitk = nullptr;
  const olc_tuning_param* t_gemv = nullptr;
  const olc_tuning_param* t_direct_b = nullptr;
  const olc_tuning_param* t_direct_a = nullptr;
  std::shared_ptr<PackedB> packed;  // constant B, packed
  std::vector<int64_t> packed_shape;
  std::string details[8];  // one per kPaths entry
};

const char* const kPaths[] = {"empty", "k0", "gemv", "blocked", "split-k", "batched", "oom", "unsupported"};
constexpr int kNumPaths = 8;

const std::string& detail_for(const FloatState* st, const char* path) {
  for (int i = 0; i < kNumPaths; ++i)
    if (!std::strcmp(kPaths[i], path)) return st->details[i];
  return st->details[kNumPaths - 1];
}

void* float_create(OpKind kind, const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  AttrReader ar{node, error, esize};
  auto st = std::make_unique<FloatState>();
  st->kind = kind;
  if (kind == OpKind::kGemm) {
    if (!ar.check_known({"alpha", "beta", "transA", "transB"})) return nullptr;
    st->alpha = ar.get_float("alpha", 1.0);
    st->beta = ar.get_float("beta", 1.0);
    const int64_t ta = ar.get_int("transA", 0), tb = ar.get_int("transB", 0);
    if (!ar.ok) return nullptr;
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
      return fail_create(error, esize, "attributes transA and transB must be 0 or 1, got %lld and %lld",
                         (long long)ta, (long long)tb);
    st->transA = ta != 0;
    st->transB = tb != 0;
    if (node->n_inputs < 2 || node->n_inputs > 3)
      return fail_create(error, esize, "Gemm takes 2 or 3 inputs, got %d", node->n_inputs);
  } else if (kind == OpKind::kFusedMatMul) {
    if (!ar.check_known({"alpha", "transA", "transB", "transBatchA", "transBatchB"})) return nullptr;
    st->alpha = ar.get_float("alpha", 1.0);
    const int64_t f[4] = {ar.get_int("transA", 0), ar.get_int("transB", 0), ar.get_int("transBatchA", 0),
                          ar.get_int("transBatchB", 0)};
    if (!ar.ok) return nullptr;
    for (int64_t v : f)
      if (v != 0 && v != 1)
        return fail_create(error, esize, "attributes transA, transB, transBatchA and transBatchB must be 0 or 1");
    st->transA = f[0] != 0;
    st->transB = f[1] != 0;
    st->transBatchA = f[2] != 0;
    st->transBatchB = f[3] != 0;
    if (node->n_inputs != 2) return fail_create(error, esize, "FusedMatMul takes 2 inputs, got %d", node->n_inputs);
  } else if (kind == OpKind::kMatMulAdd) {
    if (!ar.check_known({})) return nullptr;
    if (node->n_inputs != 3)
      return fail_create(error, esize, "MatMulAdd takes 3 inputs (A, B, bias), got %d", node->n_inputs);
  } else {
    if (!ar.check_known({})) return nullptr;
    if (node->n_inputs != 2) return fail_create(error, esize, "MatMul takes 2 inputs, got %d", node->n_inputs);
  }
  if (node->n_outputs != 1) return fail_create(error, esize, "expects 1 output, got %d", node->n_outputs);
  const int32_t dt = node->input_dtypes[0];
  if (!is_float_type(dt))
    return fail_create(error, esize, "unsupported input type %s (float32, float64, float16, bfloat16)",
                       olc_dtype_name(dt));
  for (int32_t i = 1; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (t != OLC_DTYPE_UNDEFINED && t != dt)
      return fail_create(error, esize, "input %d has type %s, input 0 has %s", i, olc_dtype_name(t),
                         olc_dtype_name(dt));
  }
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != dt)
    return fail_create(error, esize, "output type %s differs from the input type %s",
                       olc_dtype_name(node->output_dtypes[0]), olc_dtype_name(dt));
  st->dtype = dt;
  st->ks = select_kernels(api);
  st->tun = default_gemm_tuning(dt);
  {
    // FusedMatMul and MatMulAdd are MatMuls: they read MatMul's tuning keys.
    const char* kname = kind == OpKind::kGemm ? "Gemm" : "MatMul";
    const char* lib = "olc_matmul";
    const GemmTuning& t = st->tun;
    st->t_kc = api->tuning_declare_int(lib, kname, st->ks.isa_name, dt, "kc", t.kc);
    st->t_nc = api->tuning_declare_int(lib, kname, st->ks.isa_name, dt, "nc", t.nc);
    st->t_par = api->tuning_declare_int(lib, kname, st->ks.isa_name, dt, "parallel_min_macs", t.parallel_min_macs);
    st->t_splitk = api->tuning_declare_int(lib, kname, st->ks.isa_name, dt, "split_k_min", t.split_k_min);
    st->t_gemv = api->tuning_declare_int(lib, kname, st->ks.isa_name, dt, "gemv_max", t.gemv_max);
    st->t_direct_b = api->tuning_declare_int(lib, kname, st->ks.isa_name, dt, "direct_b_max_mblocks",
                                             t.direct_b_max_mblocks);
    st->t_direct_a = api->tuning_declare_int(lib, kname, st->ks.isa_name, dt, "direct_a", t.direct_a);
  }

  // Constant B: pack once (shared through the family cache).
  std::string pack_note;
  const olc_tensor* cb = node->input_constants ? &node->input_constants[1] : nullptr;
  if (cb && cb->data && cb->dtype == dt) {
    int64_t K = -1, N = -1, nmat = 1;
    if (kind == OpKind::kGemm) {
      if (cb->ndim != 2) return fail_create(error, esize, "input B must be 2-D, got rank %d", cb->ndim);
      K = st->transB ? cb->shape[1] : cb->shape[0];
      N = st->transB ? cb->shape[0] : cb->shape[1];
    } else if (cb->ndim >= 2 && !st->transBatchB) {  // a B with its batch axis moved is read in place
      K = cb->shape[cb->ndim - (st->transB ? 1 : 2)];
      N = cb->shape[cb->ndim - (st->transB ? 2 : 1)];
      for (int32_t d = 0; d + 2 < cb->ndim; ++d) nmat *= cb->shape[d];
    }
    if (K > 0 && N > 0 && nmat > 0) {
      bool shared = false;
      st->packed = packed_constant(st->ks, *cb, st->transB, K, N, nmat, &shared);
      if (st->packed) {
        st->packed_shape.assign(cb->shape, cb->shape + cb->ndim);
        // Keyed by the shared buffer: the session counts it once.
        if (OLC_API_HAS(api, report_prepacked))
          api->report_prepacked(node, st->packed.get(), static_cast<int64_t>(st->packed->bytes));
        char buf[96];
        std::snprintf(buf, sizeof buf, " prepacked-B %.1f KiB%s", st->packed->bytes / 1024.0,
                      shared ? " shared" : "");
        pack_note = buf;
      }
    }
  }
  const char* isa = st->ks.isa_name;
  if (dt == OLC_DTYPE_BFLOAT16 && st->ks.uk_bf16) isa = st->ks.amx_bf16 ? "amx-bf16+avx512bf16" : "avx512bf16";
  for (int i = 0; i < kNumPaths; ++i) st->details[i] = std::string(isa) + " " + kPaths[i] + pack_note;
  return st.release();
}

void* gemm_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return float_create(OpKind::kGemm, api, node, error, esize);
}
void* matmul_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return float_create(OpKind::kMatMul, api, node, error, esize);
}
void* fused_matmul_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return float_create(OpKind::kFusedMatMul, api, node, error, esize);
}
void* matmul_add_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return float_create(OpKind::kMatMulAdd, api, node, error, esize);
}

void float_destroy(void* state) { delete static_cast<FloatState*>(state); }

// The tuning values of this run (one atomic load each), clamped to sane ranges.
GemmTuning read_tuning(const FloatState* st) {
  GemmTuning t = st->tun;
  if (!st->t_kc) return t;
  t.kc = std::max<int64_t>(16, std::min<int64_t>(4096, g_api->tuning_read_int(st->t_kc)));
  t.nc = std::max<int64_t>(32, std::min<int64_t>(1 << 16, g_api->tuning_read_int(st->t_nc)));
  t.parallel_min_macs = g_api->tuning_read_int(st->t_par);
  t.split_k_min = g_api->tuning_read_int(st->t_splitk);
  t.gemv_max = std::max<int64_t>(1, g_api->tuning_read_int(st->t_gemv));
  t.direct_b_max_mblocks = g_api->tuning_read_int(st->t_direct_b);
  t.direct_a = g_api->tuning_read_int(st->t_direct_a);
  return t;
}

bool packed_matches(const FloatState* st, const olc_tensor& b) {
  return st->packed && b.ndim == static_cast<int32_t>(st->packed_shape.size()) &&
         std::equal(st->packed_shape.begin(), st->packed_shape.end(), b.shape);
}

bool check_input(olc_context* ctx, const FloatState* st, const olc_tensor& t, int idx) {
  if (t.dtype != st->dtype) {
    fail_run(ctx, "input %d has type %s, the kernel was created for %s", idx, olc_dtype_name(t.dtype),
             olc_dtype_name(st->dtype));
    return false;
  }
  const int64_t n = olc_element_count(&t);
  if (n < 0) {
    fail_run(ctx, "input %d has a negative dimension or too many elements", idx);
    return false;
  }
  if (n > 0 && !t.data) {
    fail_run(ctx, "input %d has no data", idx);
    return false;
  }
  return true;
}

// The bias in the compute type (a converted copy for float16/bfloat16).
struct BiasView {
  const void* ptr = nullptr;
  std::vector<float> conv;
};

void convert_bias(const olc_tensor& c, BiasView* bv) {
  const int64_t n = olc_element_count(&c);
  if (c.dtype == OLC_DTYPE_FLOAT || c.dtype == OLC_DTYPE_DOUBLE) {
    bv->ptr = c.data;
    return;
  }
  bv->conv.resize(static_cast<size_t>(n));
  const uint16_t* s = static_cast<const uint16_t*>(c.data);
  for (int64_t i = 0; i < n; ++i)
    bv->conv[i] = c.dtype == OLC_DTYPE_FLOAT16 ? f16_to_f32(s[i]) : bf16_to_f32(s[i]);
  bv->ptr = bv->conv.data();
}

int32_t gemm_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const FloatState* st = static_cast<const FloatState*>(state);
  if (n_inputs < 2 || n_outputs != 1) return fail_run(ctx, "expects 2 or 3 inputs and 1 output");
  const olc_tensor& a = inputs[0];
  const olc_tensor& b = inputs[1];
  const olc_tensor* c = (n_inputs >= 3 && inputs[2].dtype != OLC_DTYPE_UNDEFINED) ? &inputs[2] : nullptr;
  if (!check_input(ctx, st, a, 0) || !check_input(ctx, st, b, 1) || (c && !check_input(ctx, st, *c, 2)))
    return OLC_ERROR;
  if (a.ndim != 2 || b.ndim != 2)
    return fail_run(ctx, "A and B must be 2-D, got A %s and B %s", shape_str(a).c_str(), shape_str(b).c_str());
  const int64_t M = st->transA ? a.shape[1] : a.shape[0];
  const int64_t K = st->transA ? a.shape[0] : a.shape[1];
  const int64_t Kb = st->transB ? b.shape[1] : b.shape[0];
  const int64_t N = st->transB ? b.shape[0] : b.shape[1];
  if (K != Kb)
    return fail_run(ctx, "inner dimensions differ: op(A) is [%lld, %lld] and op(B) is [%lld, %lld] (transA=%d, transB=%d)",
                    (long long)M, (long long)K, (long long)Kb, (long long)N, st->transA, st->transB);
  int64_t rs = 0, cs = 0;
  if (c) {
    bool ok = c->ndim <= 2;
    if (ok && c->ndim == 2) {
      ok = (c->shape[0] == 1 || c->shape[0] == M) && (c->shape[1] == 1 || c->shape[1] == N);
      rs = c->shape[0] == 1 ? 0 : c->shape[1];
      cs = c->shape[1] == 1 ? 0 : 1;
    } else if (ok && c->ndim == 1) {
      ok = c->shape[0] == 1 || c->shape[0] == N;
      cs = c->shape[0] == 1 ? 0 : 1;
    }
    if (!ok)
      return fail_run(ctx, "bias C of shape %s cannot be broadcast to the output shape [%lld, %lld]",
                      shape_str(*c).c_str(), (long long)M, (long long)N);
  }
  const int64_t out_shape[2] = {M, N};
  void* y = g_api->allocate_output(ctx, 0, st->dtype, 2, out_shape);
  if (!y && M * N > 0) return OLC_ERROR;
  BiasView bv;
  if (c && st->beta != 0.0 && M * N > 0) convert_bias(*c, &bv);
  const GemmTuning tun = read_tuning(st);
  GemmDesc d{};
  d.dtype = st->dtype;
  d.M = M;
  d.N = N;
  d.K = K;
  d.transA = st->transA;
  d.transB = st->transB;
  d.lda = a.shape[1];
  d.ldb = b.shape[1];
  d.ldc = N;
  d.alpha = st->alpha;
  d.beta = st->beta;
  d.bias = bv.ptr;
  d.bias_rs = rs;
  d.bias_cs = cs;
  const void* ap = a.data;
  const void* bp = b.data;
  void* cp = y;
  const int64_t mat0 = 0;
  GemmBatch batch{1, &ap, &bp, &mat0, &cp, packed_matches(st, b) ? st->packed.get() : nullptr};
  const char* path = olc_mm::gemm_run(g_api, ctx, st->ks, tun, d, batch);
  if (!std::strcmp(path, "oom")) return fail_run(ctx, "out of memory for the GEMM work buffers");
  g_api->record_usage_detail(ctx, detail_for(st, path).c_str());
  return OLC_OK;
}

// One operand of MatMul / FusedMatMul as a batch of matrices read in
// place: its batch dimensions with their element strides, and the stored
// matrix (row stride ld, unit column stride) with the GEMM's transpose
// flag. transBatch moves the first dimension to the rows:
// [d0, d1, ..., dr-2, dr-1] is read as the batch [d1, ..., dr-2] of
// [d0, dr-1] matrices (row stride d1 ... dr-1). Rank 1: a row of A or a
// column of B, the transposes ignored.
struct OperandView {
  std::vector<int64_t> bdims, bstrides;
  int64_t rows, cols;  // of op(X)
  int64_t ld;
  bool trans;
};

OperandView view_of(const olc_tensor& t, bool trans, bool trans_batch, bool is_b) {
  OperandView v;
  const int32_t r = t.ndim;
  if (r == 1) {
    v.rows = is_b ? t.shape[0] : 1;
    v.cols = is_b ? 1 : t.shape[0];
    v.ld = is_b ? 1 : t.shape[0];
    v.trans = false;
    return v;
  }
  std::vector<int64_t> stride(r);
  int64_t acc = 1;
  for (int32_t d = r - 1; d >= 0; --d) {
    stride[d] = acc;
    acc *= t.shape[d];
  }
  const int32_t row_dim = trans_batch ? 0 : r - 2;
  for (int32_t d = trans_batch ? 1 : 0; d < (trans_batch ? r - 1 : r - 2); ++d) {
    v.bdims.push_back(t.shape[d]);
    v.bstrides.push_back(stride[d]);
  }
  const int64_t srows = t.shape[row_dim], scols = t.shape[r - 1];
  v.ld = stride[row_dim];
  v.trans = trans;
  v.rows = trans ? scols : srows;
  v.cols = trans ? srows : scols;
  return v;
}

int32_t matmul_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs,
                   int32_t n_outputs) {
  const FloatState* st = static_cast<const FloatState*>(state);
  const bool add = st->kind == OpKind::kMatMulAdd;
  if (n_inputs != (add ? 3 : 2) || n_outputs != 1)
    return fail_run(ctx, add ? "expects 3 inputs and 1 output" : "expects 2 inputs and 1 output");
  const olc_tensor& a = inputs[0];
  const olc_tensor& b = inputs[1];
  if (!check_input(ctx, st, a, 0) || !check_input(ctx, st, b, 1) || (add && !check_input(ctx, st, inputs[2], 2)))
    return OLC_ERROR;
  if (a.ndim < 1 || b.ndim < 1)
    return fail_run(ctx, "inputs must have rank >= 1, got A %s and B %s", shape_str(a).c_str(), shape_str(b).c_str());
  if ((st->transBatchA || st->transBatchB) && (a.ndim < 3 || a.ndim != b.ndim))
    return fail_run(ctx, "transBatchA and transBatchB need A and B of the same rank, at least 3; got A %s and B %s",
                    shape_str(a).c_str(), shape_str(b).c_str());
  const OperandView av = view_of(a, st->transA, st->transBatchA, false);
  const OperandView bv = view_of(b, st->transB, st->transBatchB, true);
  const int64_t M = av.rows, K = av.cols, N = bv.cols;
  if (K != bv.rows)
    return fail_run(ctx, "inner dimensions differ: A %s and B %s (%lld vs %lld)", shape_str(a).c_str(),
                    shape_str(b).c_str(), (long long)K, (long long)bv.rows);
  const int32_t abat = static_cast<int32_t>(av.bdims.size()), bbat = static_cast<int32_t>(bv.bdims.size());
  const int32_t nb = std::max(abat, bbat);
  // Element strides of each operand's batch dimensions, 0 where broadcast.
  std::vector<int64_t> out_batch(nb), astr(nb, 0), bstr(nb, 0);
  for (int32_t d = 0; d < nb; ++d) {
    const int32_t ad = d - (nb - abat), bd = d - (nb - bbat);
    const int64_t da = ad >= 0 ? av.bdims[ad] : 1;
    const int64_t db = bd >= 0 ? bv.bdims[bd] : 1;
    if (da != db && da != 1 && db != 1)
      return fail_run(ctx, "batch dimensions of A %s and B %s cannot be broadcast", shape_str(a).c_str(),
                      shape_str(b).c_str());
    out_batch[d] = da == 1 ? db : da;
    astr[d] = da == 1 ? 0 : av.bstrides[ad];
    bstr[d] = db == 1 ? 0 : bv.bstrides[bd];
  }
  std::vector<int64_t> out_shape(out_batch);
  if (a.ndim != 1) out_shape.push_back(M);
  if (b.ndim != 1) out_shape.push_back(N);
  // MatMulAdd: a bias along the output's last axis, added as the tiles are
  // stored (the Add's broadcast of a [N] vector; the pass takes no other).
  if (add && (b.ndim < 2 || inputs[2].ndim != 1 || inputs[2].shape[0] != N))
    return fail_run(ctx, "bias of shape %s is not [N] = [%lld] for B %s", shape_str(inputs[2]).c_str(),
                    (long long)N, shape_str(b).c_str());
  int64_t nbatch = 1;
  for (int64_t v : out_batch) nbatch *= v;
  void* y = g_api->allocate_output(ctx, 0, st->dtype, static_cast<int32_t>(out_shape.size()), out_shape.data());
  const int64_t out_count = nbatch * M * N;
  if (!y && out_count > 0) return OLC_ERROR;
  const size_t es = olc_dtype_size(st->dtype);
  const GemmTuning tun = read_tuning(st);
  GemmDesc d{};
  d.dtype = st->dtype;
  d.M = M;
  d.N = N;
  d.K = K;
  d.transA = av.trans;
  d.transB = bv.trans;
  d.lda = av.ld;
  d.ldb = bv.ld;
  d.ldc = N;
  d.alpha = st->alpha;
  d.beta = 0.0;
  BiasView bias;
  if (add && out_count > 0) {
    convert_bias(inputs[2], &bias);
    d.beta = 1.0;
    d.bias = bias.ptr;
    d.bias_rs = 0;
    d.bias_cs = 1;
  }
  const PackedB* pk = packed_matches(st, b) ? st->packed.get() : nullptr;
  // B shared by every batch entry and A with no broadcast, stored as
  // [batch..., M, K]: one GEMM with the batch folded into M.
  bool b_shared = true, a_full = !av.trans && !st->transBatchA;
  for (int32_t i = 0; i < nb; ++i) {
    b_shared = b_shared && bstr[i] == 0;
    a_full = a_full && (astr[i] != 0 || out_batch[i] == 1);
  }
  const char* path;
  if (b_shared && a_full) {
    d.M = M * nbatch;
    const void* ap = a.data;
    const void* bp = b.data;
    void* cp = y;
    const int64_t mat0 = 0;
    GemmBatch batch{1, &ap, &bp, &mat0, &cp, pk};
    path = olc_mm::gemm_run(g_api, ctx, st->ks, tun, d, batch);
  } else {
    std::vector<const void*> ap(nbatch), bp(nbatch);
    std::vector<void*> cp(nbatch);
    std::vector<int64_t> bm(nbatch);
    std::vector<int64_t> idx(nb, 0);
    for (int64_t t = 0; t < nbatch; ++t) {
      int64_t ao = 0, bo = 0;
      for (int32_t i = 0; i < nb; ++i) {
        ao += idx[i] * astr[i];
        bo += idx[i] * bstr[i];
      }
      ap[t] = static_cast<const char*>(a.data) + ao * es;
      bp[t] = static_cast<const char*>(b.data) + bo * es;
      bm[t] = K * N > 0 ? bo / (K * N) : 0;  // packed B: contiguous [nmat, K, N] matrices
      cp[t] = static_cast<char*>(y) + t * M * N * es;
      for (int32_t i = nb - 1; i >= 0; --i) {
        if (++idx[i] < out_batch[i]) break;
        idx[i] = 0;
      }
    }
    GemmBatch batch{nbatch, ap.data(), bp.data(), bm.data(), cp.data(), pk};
    path = olc_mm::gemm_run(g_api, ctx, st->ks, tun, d, batch);
  }
  if (!std::strcmp(path, "oom")) return fail_run(ctx, "out of memory for the GEMM work buffers");
  g_api->record_usage_detail(ctx, detail_for(st, path).c_str());
  return OLC_OK;
}

const olc_kernel_vtable kGemm = {OLC_ABI_VERSION, 0, "olc_matmul::Gemm", guarded_create<gemm_create>,
                                 guarded_run<gemm_run>, float_destroy};
const olc_kernel_vtable kMatMul = {OLC_ABI_VERSION, 0, "olc_matmul::MatMul", guarded_create<matmul_create>,
                                   guarded_run<matmul_run>,
                                   float_destroy};
const olc_kernel_vtable kFusedMatMul = {OLC_ABI_VERSION, 0, "olc_matmul::FusedMatMul",
                                        guarded_create<fused_matmul_create>, guarded_run<matmul_run>, float_destroy};
const olc_kernel_vtable kMatMulAdd = {OLC_ABI_VERSION, 0, "olc_matmul::MatMulAdd", guarded_create<matmul_add_create>,
                                      guarded_run<matmul_run>, float_destroy};

}  // namespace

void set_float_api(const olc_core_api* api) { g_api = api; }
const olc_kernel_vtable* gemm_vtable() { return &kGemm; }
const olc_kernel_vtable* matmul_vtable() { return &kMatMul; }
const olc_kernel_vtable* fused_matmul_vtable() { return &kFusedMatMul; }
const olc_kernel_vtable* matmul_add_vtable() { return &kMatMulAdd; }

}  // namespace olc_mm
