// Adapters: attribute, type and shape validation, parameter conversion and
// the row / span scheduler over the session executor. Compiled without ISA
// flags; the per-ISA engines (cm_*.cc) and the reference (cm_naive.cc) do
// the arithmetic. The operators other than the normalizations and the
// activations run in cm_adapter_ops.cc.
#include "cm_adapter.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cm_adapter_state.h"
#include "cm_common.h"

namespace olc_cm {

const olc_core_api* g_api = nullptr;

namespace {

struct AttrSpec {
  const char* name;
  int32_t type;  // olc_attribute_type
};

struct OpSpec {
  const char* name;
  Op op;
  int min_inputs, max_inputs, max_outputs;
  std::vector<AttrSpec> attrs;
  olc_kernel_vtable vtables[2];  // optimized, naive
};

std::vector<AttrSpec> moe_attrs(bool quantized) {
  std::vector<AttrSpec> a = {{"k", OLC_ATTR_INT},
                             {"activation_type", OLC_ATTR_STRING},
                             {"normalize_routing_weights", OLC_ATTR_INT},
                             {"use_sparse_mixer", OLC_ATTR_INT},
                             {"swiglu_fusion", OLC_ATTR_INT},
                             {"swiglu_limit", OLC_ATTR_FLOAT},
                             {"swiglu_limit_after_activation", OLC_ATTR_INT},
                             {"activation_alpha", OLC_ATTR_FLOAT},
                             {"activation_beta", OLC_ATTR_FLOAT}};
  if (quantized) {
    for (const char* n : {"expert_weight_bits", "fc1_expert_weight_bits", "fc2_expert_weight_bits",
                          "fc3_expert_weight_bits", "block_size", "weights_prepacked", "accuracy_level"})
      a.push_back({n, OLC_ATTR_INT});
    a.push_back({"quant_type", OLC_ATTR_STRING});
  }
  return a;
}

std::vector<OpSpec>& specs() {
  static std::vector<OpSpec> s = {
      {"SkipLayerNormalization", Op::SkipLN, 3, 5, 4, {{"epsilon", OLC_ATTR_FLOAT}}, {}},
      {"SkipSimplifiedLayerNormalization", Op::SkipSLN, 3, 4, 4, {{"epsilon", OLC_ATTR_FLOAT}}, {}},
      {"BiasGelu", Op::BiasGelu, 2, 2, 1, {}, {}},
      {"FastGelu", Op::FastGelu, 1, 2, 1, {}, {}},
      {"QuickGelu", Op::QuickGelu, 1, 1, 1, {{"alpha", OLC_ATTR_FLOAT}}, {}},
      {"Gelu", Op::Gelu, 1, 1, 1, {}, {}},
      {"BiasAdd", Op::BiasAdd, 3, 3, 1, {}, {}},
      {"EmbedLayerNormalization", Op::EmbedLN, 7, 9, 3,
       {{"epsilon", OLC_ATTR_FLOAT}, {"mask_index_type", OLC_ATTR_INT}}, {}},
      {"BiasSoftmax", Op::BiasSoftmax, 2, 2, 1, {{"axis", OLC_ATTR_INT}, {"is_inner_broadcast", OLC_ATTR_INT}}, {}},
      {"CDist", Op::CDist, 2, 2, 1, {{"metric", OLC_ATTR_STRING}}, {}},
      {"GatherBlockQuantized", Op::GatherBQ, 3, 4, 1,
       {{"gather_axis", OLC_ATTR_INT}, {"quantize_axis", OLC_ATTR_INT}, {"block_size", OLC_ATTR_INT},
        {"bits", OLC_ATTR_INT}},
       {}},
      {"MoE", Op::MoE, 5, 8, 1, moe_attrs(false), {}},
      {"QMoE", Op::QMoE, 7, 15, 1, moe_attrs(true), {}},
  };
  return s;
}

const OpSpec* find_spec(const char* op_type) {
  for (const OpSpec& s : specs())
    if (op_type && std::strcmp(s.name, op_type) == 0) return &s;
  return nullptr;
}

int storage_of(int32_t dtype) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: return kF32;
    case OLC_DTYPE_FLOAT16: return kF16;
    case OLC_DTYPE_BFLOAT16: return kBF16;
    case OLC_DTYPE_DOUBLE: return kF64;
    default: return -1;
  }
}

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

}  // namespace

std::string shape_str(int32_t ndim, const int64_t* shape) {
  std::string s = "[";
  for (int32_t i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool same_shape(const olc_tensor& a, const olc_tensor& b) {
  if (a.ndim != b.ndim) return false;
  for (int32_t i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}

int64_t dims_product(const olc_tensor& t, int32_t begin, int32_t end) {
  int64_t n = 1;
  for (int32_t i = begin; i < end; ++i) n *= t.shape[i];
  return n;
}

const char* input_name(Op op, int i) {
  switch (op) {
    case Op::SkipLN: {
      static const char* n[] = {"input", "skip", "gamma", "beta", "bias"};
      return n[i];
    }
    case Op::SkipSLN: {
      static const char* n[] = {"input", "skip", "gamma", "bias"};
      return n[i];
    }
    case Op::BiasGelu: return i == 0 ? "A" : "B";
    case Op::BiasAdd: {
      static const char* n[] = {"X", "bias", "skip"};
      return n[i];
    }
    case Op::EmbedLN: {
      static const char* n[] = {"input_ids", "segment_ids", "word_embedding", "position_embedding",
                                "segment_embedding", "gamma", "beta", "mask", "position_ids"};
      return n[i];
    }
    case Op::BiasSoftmax: return i == 0 ? "data" : "bias";
    case Op::CDist: return i == 0 ? "A" : "B";
    case Op::GatherBQ: {
      static const char* n[] = {"data", "indices", "scales", "zero_points"};
      return n[i];
    }
    case Op::MoE: {
      static const char* n[] = {"input", "router_probs", "fc1_experts_weights", "fc1_experts_bias",
                                "fc2_experts_weights", "fc2_experts_bias", "fc3_experts_weights", "fc3_experts_bias"};
      return n[i];
    }
    case Op::QMoE: {
      static const char* n[] = {"input", "router_probs", "fc1_experts_weights", "fc1_scales", "fc1_experts_bias",
                                "fc2_experts_weights", "fc2_scales", "fc2_experts_bias", "fc3_experts_weights",
                                "fc3_scales", "fc3_experts_bias", "fc1_zero_points", "fc2_zero_points",
                                "fc3_zero_points", "router_weights"};
      return n[i];
    }
    default: return i == 0 ? "X" : "bias";
  }
}

const float* param_f32(const KernelState* st, const olc_tensor& p, std::vector<float>* buf) {
  const int64_t n = olc_element_count(&p);
  if (st->dt == kF32) return static_cast<const float*>(p.data);
  buf->resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
  if (n > 0) st->k->to_f32[st->dt](p.data, buf->data(), n);
  return buf->data();
}

bool go_parallel(const KernelState* st, olc_context* ctx, int64_t n) {
  const int64_t par_min = g_api->tuning_read_int(st->parallel_min_elements);
  return par_min > 0 && n >= par_min && g_api->concurrency(ctx) > 1;
}

namespace {

// ---------------------------------------------------------------- create

bool is_float_family(Op op) {
  return op == Op::SkipLN || op == Op::SkipSLN || op == Op::BiasGelu || op == Op::FastGelu || op == Op::QuickGelu ||
         op == Op::Gelu || op == Op::BiasAdd;
}

// The attributes, each checked against its declared type.
// String attributes, by name, for check_attributes.
using Strings = std::vector<std::pair<std::string, std::string>>;

std::string string_attr(const Strings& strings, const char* name, const char* fallback) {
  for (const auto& kv : strings)
    if (kv.first == name) return kv.second;
  return fallback;
}

bool read_attributes(const OpSpec* spec, const olc_node_info* node, KernelState* st, Strings* strings, char* error,
                     size_t es) {
  for (int32_t k = 0; k < node->n_attributes; ++k) {
    const olc_attribute& a = node->attributes[k];
    const char* nm = a.name ? a.name : "";
    const AttrSpec* as = nullptr;
    for (const AttrSpec& x : spec->attrs)
      if (std::strcmp(x.name, nm) == 0) as = &x;
    if (!as) return fail(error, es, "unknown attribute '%s'", nm);
    if (a.type != as->type) {
      const char* want = as->type == OLC_ATTR_FLOAT ? "a float" : as->type == OLC_ATTR_INT ? "an int" : "a string";
      return fail(error, es, "attribute '%s' must be %s (type code %d), got type code %d", nm, want, as->type, a.type);
    }
    if (a.type == OLC_ATTR_FLOAT && !std::isfinite(a.f))
      return fail(error, es, "attribute '%s' must be finite, got %g", nm, a.f);
    if (!std::strcmp(nm, "epsilon")) {
      if (a.f < 0) return fail(error, es, "attribute 'epsilon' must be >= 0, got %g", a.f);
      st->epsilon = static_cast<float>(a.f);
    } else if (!std::strcmp(nm, "alpha")) {
      st->alpha = static_cast<float>(a.f);
    } else if (!std::strcmp(nm, "mask_index_type")) {
      // Only tells shape inference whether mask_index exists; both values
      // produce it when the node names it.
      if (a.i != 0 && a.i != 1) return fail(error, es, "attribute 'mask_index_type' must be 0 or 1, got %lld",
                                            static_cast<long long>(a.i));
    } else if (!std::strcmp(nm, "axis")) {
      st->axis = a.i;
    } else if (!std::strcmp(nm, "is_inner_broadcast")) {
      if (a.i != 0 && a.i != 1) return fail(error, es, "attribute 'is_inner_broadcast' must be 0 or 1, got %lld",
                                            static_cast<long long>(a.i));
      st->inner_broadcast = a.i;
    } else if (a.type == OLC_ATTR_STRING) {
      strings->emplace_back(nm, a.s ? a.s : "");
    } else if (!std::strcmp(nm, "gather_axis")) {
      st->gather_axis = a.i;
    } else if (!std::strcmp(nm, "quantize_axis")) {
      st->quantize_axis = a.i;
    } else if (!std::strcmp(nm, "block_size")) {
      st->block_size = a.i;
      st->moe_block_size = a.i;
    } else if (!std::strcmp(nm, "bits") || !std::strcmp(nm, "expert_weight_bits")) {
      st->bits = a.i;
    } else if (!std::strcmp(nm, "fc1_expert_weight_bits") || !std::strcmp(nm, "fc2_expert_weight_bits") ||
               !std::strcmp(nm, "fc3_expert_weight_bits")) {
      st->fc_bits[nm[2] - '1'] = a.i;
    } else if (!std::strcmp(nm, "k")) {
      st->moe_k = a.i;
    } else if (!std::strcmp(nm, "normalize_routing_weights")) {
      st->normalize_routing = a.i != 0;
    } else if (!std::strcmp(nm, "use_sparse_mixer")) {
      if (a.i != 0) return fail(error, es, "use_sparse_mixer=1 is not supported");
    } else if (!std::strcmp(nm, "swiglu_limit_after_activation")) {
      if (a.i != 0) return fail(error, es, "swiglu_limit_after_activation=1 is not supported (onnxruntime has it on "
                                           "CUDA only)");
    } else if (!std::strcmp(nm, "swiglu_fusion")) {
      if (a.i < 0 || a.i > 2) return fail(error, es, "attribute 'swiglu_fusion' must be 0, 1 or 2, got %lld",
                                          static_cast<long long>(a.i));
      st->moe_act.layout = static_cast<int>(a.i);
    } else if (!std::strcmp(nm, "swiglu_limit")) {
      st->moe_act.limit = static_cast<float>(a.f);
    } else if (!std::strcmp(nm, "activation_alpha")) {
      st->moe_act.alpha = static_cast<float>(a.f);
    } else if (!std::strcmp(nm, "activation_beta")) {
      st->moe_act.beta = static_cast<float>(a.f);
    } else if (!std::strcmp(nm, "weights_prepacked")) {
      if (a.i == 1) return fail(error, es, "weights_prepacked=1 (an execution provider's own layout) is not supported; "
                                           "0 or -1 read the raw [E, N, K * bits / 8] layout");
    }
  }
  return true;
}

// One float type T over the inputs listed (true in `is_t`), from `allowed`.
bool bind_float_type(const olc_node_info* node, KernelState* st, const bool* is_t, const int32_t* allowed,
                     const char* allowed_names, char* error, size_t es) {
  for (int32_t i = 0; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (!is_t[i] || t == OLC_DTYPE_UNDEFINED) continue;
    bool ok = false;
    for (const int32_t* a = allowed; *a != OLC_DTYPE_UNDEFINED; ++a) ok = ok || *a == t;
    if (!ok)
      return fail(error, es, "input %d (%s) has unsupported type %s (expected %s)", i, input_name(st->op, i),
                  olc_dtype_name(t), allowed_names);
    if (st->dtype == OLC_DTYPE_UNDEFINED) st->dtype = t;
    if (t != st->dtype)
      return fail(error, es, "input %d (%s) has type %s but the other inputs of type T have %s (the schema "
                  "requires one type T)", i, input_name(st->op, i), olc_dtype_name(t), olc_dtype_name(st->dtype));
  }
  return true;
}

// Per operator: which inputs are T, and the types of the others.
bool check_types(const olc_node_info* node, KernelState* st, char* error, size_t es) {
  static const int32_t kFloats[] = {OLC_DTYPE_FLOAT, OLC_DTYPE_FLOAT16, OLC_DTYPE_BFLOAT16, OLC_DTYPE_UNDEFINED};
  static const int32_t kFloats64[] = {OLC_DTYPE_FLOAT, OLC_DTYPE_FLOAT16, OLC_DTYPE_BFLOAT16, OLC_DTYPE_DOUBLE,
                                      OLC_DTYPE_UNDEFINED};
  static const int32_t kF32F64[] = {OLC_DTYPE_FLOAT, OLC_DTYPE_DOUBLE, OLC_DTYPE_UNDEFINED};
  const int32_t* dtypes = node->input_dtypes;
  bool is_t[kMaxInputs] = {};
  switch (st->op) {
    case Op::EmbedLN: {
      for (int i : {2, 3, 4, 5, 6}) is_t[i] = true;
      if (!bind_float_type(node, st, is_t, kFloats, "float32, float16 or bfloat16", error, es)) return false;
      int32_t ids = OLC_DTYPE_UNDEFINED;
      for (int i : {0, 1, 7, 8}) {
        if (i >= node->n_inputs || dtypes[i] == OLC_DTYPE_UNDEFINED) continue;
        if (dtypes[i] != OLC_DTYPE_INT32 && dtypes[i] != OLC_DTYPE_INT64)
          return fail(error, es, "input %d (%s) has unsupported type %s (expected int32 or int64)", i,
                      input_name(st->op, i), olc_dtype_name(dtypes[i]));
        if (ids == OLC_DTYPE_UNDEFINED) ids = dtypes[i];
        if (dtypes[i] != ids)
          return fail(error, es, "input %d (%s) has type %s but input_ids has %s (the schema requires one type T1)",
                      i, input_name(st->op, i), olc_dtype_name(dtypes[i]), olc_dtype_name(ids));
      }
      const bool seg_ids = node->n_inputs > 1 && dtypes[1] != OLC_DTYPE_UNDEFINED;
      const bool seg_emb = node->n_inputs > 4 && dtypes[4] != OLC_DTYPE_UNDEFINED;
      if (seg_ids != seg_emb)
        return fail(error, es, "segment_ids and segment_embedding must be given together (got %s without %s)",
                    seg_ids ? "segment_ids" : "segment_embedding", seg_ids ? "segment_embedding" : "segment_ids");
      break;
    }
    case Op::BiasSoftmax:
      is_t[0] = is_t[1] = true;
      if (!bind_float_type(node, st, is_t, kFloats64, "float32, float16, bfloat16 or float64", error, es))
        return false;
      break;
    case Op::CDist:
      is_t[0] = is_t[1] = true;
      if (!bind_float_type(node, st, is_t, kF32F64, "float32 or float64", error, es)) return false;
      break;
    case Op::GatherBQ: {
      is_t[2] = true;
      if (!bind_float_type(node, st, is_t, kFloats, "float32, float16 or bfloat16", error, es)) return false;
      const int32_t q = dtypes[0];
      if (q != OLC_DTYPE_UINT8 && q != OLC_DTYPE_UINT4 && q != OLC_DTYPE_INT4)
        return fail(error, es, "input 0 (data) has unsupported type %s (expected uint8, uint4 or int4)",
                    olc_dtype_name(q));
      if (dtypes[1] != OLC_DTYPE_INT32 && dtypes[1] != OLC_DTYPE_INT64)
        return fail(error, es, "input 1 (indices) has unsupported type %s (expected int32 or int64)",
                    olc_dtype_name(dtypes[1]));
      if (node->n_inputs > 3 && dtypes[3] != OLC_DTYPE_UNDEFINED && dtypes[3] != q)
        return fail(error, es, "input 3 (zero_points) has type %s but data has %s (the schema requires one type T1)",
                    olc_dtype_name(dtypes[3]), olc_dtype_name(q));
      break;
    }
    case Op::QMoE: {
      for (int i : {0, 1, 4, 7, 10, 14}) is_t[i] = true;
      if (!bind_float_type(node, st, is_t, kFloats, "float32, float16 or bfloat16", error, es)) return false;
      for (int32_t i = 2; i < node->n_inputs; ++i) {
        const int32_t t = dtypes[i];
        if (is_t[i] || t == OLC_DTYPE_UNDEFINED) continue;
        const bool scales = i == 3 || i == 6 || i == 9;
        if (scales ? storage_of(t) < 0 || t == OLC_DTYPE_DOUBLE : t != OLC_DTYPE_UINT8)
          return fail(error, es, "input %d (%s) has unsupported type %s (expected %s)", i, input_name(st->op, i),
                      olc_dtype_name(t), scales ? "float32, float16 or bfloat16" : "uint8");
      }
      break;
    }
    default:
      for (int32_t i = 0; i < node->n_inputs; ++i) is_t[i] = true;
      if (!bind_float_type(node, st, is_t, kFloats, "float32, float16 or bfloat16", error, es)) return false;
      break;
  }
  for (int32_t i = 0; i < node->n_inputs; ++i) {
    st->in_dtype[i] = dtypes[i];
    st->present[i] = dtypes[i] != OLC_DTYPE_UNDEFINED;
  }
  st->dt = storage_of(st->dtype);
  return st->dt >= 0 || fail(error, es, "no input of type T");
}

// The type of output o as the schema makes it.
int32_t output_type(const KernelState* st, int32_t o) {
  switch (st->op) {
    case Op::EmbedLN: return o == 1 ? OLC_DTYPE_INT32 : st->dtype;
    case Op::SkipLN:
    case Op::SkipSLN: return (o == 1 || o == 2) ? OLC_DTYPE_FLOAT : st->dtype;
    default: return st->dtype;
  }
}

bool check_moe_attributes(KernelState* st, const olc_node_info* node, const Strings& strings, char* error,
                          size_t es) {
  const std::string act = string_attr(strings, "activation_type", "relu");
  static const std::pair<const char*, int> kActs[] = {{"relu", kMoeRelu}, {"gelu", kMoeGelu}, {"silu", kMoeSilu},
                                                      {"identity", kMoeIdentity}, {"swiglu", kMoeSwiglu}};
  bool known = false;
  for (const auto& a : kActs)
    if (act == a.first) {
      st->moe_act.act = a.second;
      known = true;
    }
  if (!known)
    return fail(error, es, "activation_type '%s' is not supported (relu, gelu, silu, identity, swiglu)", act.c_str());
  if (st->moe_act.act != kMoeSwiglu && st->moe_act.layout != kMoeSeparate)
    return fail(error, es, "swiglu_fusion=%d needs activation_type 'swiglu'", st->moe_act.layout);
  const bool fc3 = st->op == Op::MoE ? node->n_inputs > 6 && node->input_dtypes[6] != OLC_DTYPE_UNDEFINED
                                     : node->n_inputs > 8 && node->input_dtypes[8] != OLC_DTYPE_UNDEFINED;
  if (st->moe_act.act == kMoeSwiglu && st->moe_act.layout == kMoeSeparate && !fc3)
    return fail(error, es, "swiglu with swiglu_fusion=0 takes its linear half from fc3_experts_weights, which is "
                "absent");
  if (fc3 && st->moe_act.layout != kMoeSeparate)
    return fail(error, es, "fc3_experts_weights is given but swiglu_fusion=%d keeps both halves in FC1",
                st->moe_act.layout);
  if (st->moe_k < 1) return fail(error, es, "attribute 'k' must be >= 1, got %lld", static_cast<long long>(st->moe_k));
  if (st->op == Op::QMoE) {
    const std::string qt = string_attr(strings, "quant_type", "int");
    if (qt != "int") return fail(error, es, "quant_type '%s' is not supported (only 'int')", qt.c_str());
    for (int f = 0; f < 3; ++f) {
      if (st->fc_bits[f] < 0) st->fc_bits[f] = st->bits;
      if (st->fc_bits[f] != 2 && st->fc_bits[f] != 4 && st->fc_bits[f] != 8)
        return fail(error, es, "FC%d weights of %lld bits are not supported (2, 4 or 8)", f + 1,
                    static_cast<long long>(st->fc_bits[f]));
    }
    const int64_t bs = st->moe_block_size;
    if (bs != 0 && (bs < 16 || (bs & (bs - 1)) != 0))
      return fail(error, es, "attribute 'block_size' must be a power of 2 and at least 16, got %lld",
                  static_cast<long long>(bs));
  }
  return true;
}

bool check_attributes(KernelState* st, const olc_node_info* node, const Strings& strings, char* error, size_t es) {
  const std::string metric = string_attr(strings, "metric", "sqeuclidean");
  switch (st->op) {
    case Op::BiasSoftmax:
      if (st->inner_broadcast < 0) return fail(error, es, "attribute 'is_inner_broadcast' is required");
      return true;
    case Op::CDist:
      if (metric == "euclidean") st->euclidean = true;
      else if (metric == "sqeuclidean") st->euclidean = false;
      else return fail(error, es, "metric '%s' is not supported (only 'sqeuclidean' and 'euclidean')", metric.c_str());
      return true;
    case Op::GatherBQ: {
      const int64_t bs = st->block_size;
      if (bs < 16 || (bs & (bs - 1)) != 0)
        return fail(error, es, "attribute 'block_size' must be a power of 2 and at least 16, got %lld",
                    static_cast<long long>(bs));
      const int32_t q = node->input_dtypes[0];
      if (q == OLC_DTYPE_UINT8) {
        if (st->bits != 2 && st->bits != 4 && st->bits != 8)
          return fail(error, es, "attribute 'bits' must be 2, 4 or 8 for uint8 data, got %lld",
                      static_cast<long long>(st->bits));
        st->qfmt = st->bits == 8 ? kQU8 : st->bits == 4 ? kQP4 : kQP2;
        st->default_zp = 1 << (st->bits - 1);  // 128, 8, 2: the middle of the range
      } else {
        if (st->bits != 4)
          return fail(error, es, "attribute 'bits' must be 4 for %s data, got %lld", olc_dtype_name(q),
                      static_cast<long long>(st->bits));
        st->qfmt = q == OLC_DTYPE_INT4 ? kQI4 : kQU4;
        st->default_zp = 0;
      }
      // Axes against the rank when it is known now (else at the run).
      const int32_t rank = node->input_ranks ? node->input_ranks[0] : -1;
      if (rank >= 0) {
        if (st->gather_axis < -rank || st->gather_axis >= rank)
          return fail(error, es, "attribute 'gather_axis' %lld is out of range for data of rank %d",
                      static_cast<long long>(st->gather_axis), rank);
        if (st->quantize_axis < -rank || st->quantize_axis >= rank)
          return fail(error, es, "attribute 'quantize_axis' %lld is out of range for data of rank %d",
                      static_cast<long long>(st->quantize_axis), rank);
      }
      return true;
    }
    case Op::MoE:
    case Op::QMoE: return check_moe_attributes(st, node, strings, error, es);
    default: return true;
  }
}

void* cm_create_impl(const olc_core_api* api, const olc_node_info* node, char* error, size_t es, bool naive) {
  const OpSpec* spec = find_spec(node->op_type);
  if (!spec) {
    fail(error, es, "op %s is not an operator of olc_contrib_microsoft", node->op_type);
    return nullptr;
  }
  if (node->n_inputs < spec->min_inputs || node->n_inputs > spec->max_inputs) {
    fail(error, es, "expects %d to %d inputs, got %d", spec->min_inputs, spec->max_inputs, node->n_inputs);
    return nullptr;
  }
  if (node->n_outputs < 1 || node->n_outputs > spec->max_outputs) {
    fail(error, es, "expects 1 to %d outputs, got %d", spec->max_outputs, node->n_outputs);
    return nullptr;
  }
  std::unique_ptr<KernelState> st(new (std::nothrow) KernelState());
  if (!st) {
    fail(error, es, "out of memory");
    return nullptr;
  }
  st->op = spec->op;
  st->name = spec->name;
  st->naive = naive;
  st->n_inputs = node->n_inputs;
  Strings strings;
  st->fc_bits[0] = st->fc_bits[1] = st->fc_bits[2] = -1;  // QMoE: inherit expert_weight_bits
  st->moe_act.limit = INFINITY;
  if (!read_attributes(spec, node, st.get(), &strings, error, es)) return nullptr;
  // Required inputs: the first min_inputs, but for the optional ones among
  // them (EmbedLayerNormalization's segments, the MoE FC1 bias).
  for (int32_t i = 0; i < spec->min_inputs; ++i) {
    const bool optional = (st->op == Op::EmbedLN && (i == 1 || i == 4)) || (st->op == Op::MoE && i == 3) ||
                          (st->op == Op::QMoE && i == 4);
    if (!optional && node->input_dtypes[i] == OLC_DTYPE_UNDEFINED) {
      fail(error, es, "input %d (%s) is required", i, input_name(st->op, i));
      return nullptr;
    }
  }
  if (!check_types(node, st.get(), error, es)) return nullptr;
  for (int32_t o = 0; o < node->n_outputs; ++o) {
    const int32_t t = node->output_dtypes[o];
    // The runtime expects every output slot up to n_outputs filled, an
    // absent optional one ("" in the node) included: it is computed and dropped.
    st->want[o] = true;
    if (t == OLC_DTYPE_UNDEFINED) continue;
    const int32_t expect = output_type(st.get(), o);
    if (t != expect) {
      fail(error, es, "output %d has type %s, expected %s", o, olc_dtype_name(t), olc_dtype_name(expect));
      return nullptr;
    }
  }
  if (!check_attributes(st.get(), node, strings, error, es)) return nullptr;
  if (naive) {
    st->isa = "naive";
  } else {
    const int32_t level = api->simd_level();
    st->k = level >= OLC_SIMD_AVX512 ? avx512::kernels() : level >= OLC_SIMD_AVX2 ? avx2::kernels() : scalar::kernels();
    st->isa = st->k->isa;
    // Work below parallel_min_elements runs on the calling thread; above,
    // it is split in ranges of at least grain_elements. Memory-bound rows
    // (the normalizations, BiasAdd, the dequantization) need larger pieces
    // than the activations' arithmetic to pay for a second thread.
    const bool cheap = st->op == Op::BiasAdd || st->op == Op::SkipLN || st->op == Op::SkipSLN ||
                       st->op == Op::EmbedLN || st->op == Op::GatherBQ;
    int64_t par_min = cheap ? 32768 : 8192, grain = cheap ? 16384 : 4096;
    if (st->op == Op::CDist || st->op == Op::MoE || st->op == Op::QMoE)
      par_min = grain = 1 << 20;  // multiply-adds
    st->parallel_min_elements =
        api->tuning_declare_int(kLibrary, spec->name, st->isa, OLC_DTYPE_FLOAT, "parallel_min_elements", par_min);
    st->grain_elements = api->tuning_declare_int(kLibrary, spec->name, st->isa, OLC_DTYPE_FLOAT, "grain_elements", grain);
    if (st->op == Op::CDist) {
      // Up to this many rows of A, every pair is summed exactly (B read
      // once, no packing) instead of taking the packed product form.
      st->direct_max_rows = api->tuning_declare_int(kLibrary, spec->name, st->isa, OLC_DTYPE_FLOAT, "direct_max_rows", 8);
      if (!cdist_prepare(st.get(), node, error, es)) return nullptr;
    }
  }
  return st.release();
}

void* cm_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t es) {
  return cm_create_impl(api, node, error, es, false);
}
void* cm_create_naive(const olc_core_api* api, const olc_node_info* node, char* error, size_t es) {
  return cm_create_impl(api, node, error, es, true);
}

void cm_destroy(void* state) { delete static_cast<KernelState*>(state); }

// ---------------------------------------------------------------- run

struct NormJob {
  const KernelState* st;
  SkipRow row;
  const char* x;
  const char* skip;
  int64_t skip_rows;
  char* y;
  char* sum;
  float* mean;
  float* inv;
  size_t es;
  std::atomic<bool>* oom;
};

void norm_rows(void* user, int64_t begin, int64_t end) {
  const NormJob& j = *static_cast<const NormJob*>(user);
  const int64_t H = j.row.H;
  const size_t rb = static_cast<size_t>(H) * j.es;
  std::unique_ptr<float[]> scratch;
  if (!(j.st->dt == kF32 && j.sum)) {
    scratch.reset(new (std::nothrow) float[static_cast<size_t>(H)]);
    if (!scratch) {
      j.oom->store(true);
      return;
    }
  }
  auto fn = j.st->k->skip_norm_row[j.st->dt];
  for (int64_t r = begin; r < end; ++r) {
    float m, iv;
    fn(&j.row, j.x + r * rb, j.skip + (r % j.skip_rows) * rb, nullptr, j.y + r * rb, j.sum ? j.sum + r * rb : nullptr,
       scratch.get(), &m, &iv);
    if (j.mean) j.mean[r] = m;
    if (j.inv) j.inv[r] = iv;
  }
}

int32_t run_norm(Ctx& c, const olc_tensor* in, int32_t n_inputs) {
  const KernelState* st = c.st;
  const olc_core_api* api = g_api;
  const olc_tensor& x = in[0];
  const olc_tensor& skip = in[1];
  if (x.ndim != 2 && x.ndim != 3)
    return c.err("input must have rank 3 [batch, sequence, hidden] or 2 [tokens, hidden], got shape %s",
                 shape_str(x.ndim, x.shape).c_str());
  const int64_t H = x.shape[x.ndim - 1];
  const int64_t n = olc_element_count(&x);
  const int64_t rows = H > 0 ? n / H : 0;
  int64_t skip_rows = rows;
  bool same = skip.ndim == x.ndim;
  for (int32_t i = 0; same && i < x.ndim; ++i) same = skip.shape[i] == x.shape[i];
  if (!same) {
    bool ok = false;
    if (x.ndim == 3) {
      const bool s3 = skip.ndim == 3 && skip.shape[0] == 1 && skip.shape[1] == x.shape[1] && skip.shape[2] == H;
      const bool s2 = skip.ndim == 2 && skip.shape[0] == x.shape[1] && skip.shape[1] == H;
      ok = s3 || s2;
      skip_rows = x.shape[1];
    }
    if (!ok) {
      const std::string xs = shape_str(x.ndim, x.shape);
      if (x.ndim == 3)
        return c.err("skip has shape %s; for input %s it must be [%lld, %lld, %lld], [1, %lld, %lld] or [%lld, %lld]",
                     shape_str(skip.ndim, skip.shape).c_str(), xs.c_str(), (long long)x.shape[0],
                     (long long)x.shape[1], (long long)H, (long long)x.shape[1], (long long)H, (long long)x.shape[1],
                     (long long)H);
      return c.err("skip has shape %s; for input %s it must have the same shape", shape_str(skip.ndim, skip.shape).c_str(),
                   xs.c_str());
    }
  }
  for (int32_t i = 2; i < n_inputs; ++i) {
    if (!st->present[i]) continue;
    const olc_tensor& p = in[i];
    if (p.ndim != 1 || p.shape[0] != H)
      return c.err("%s has shape %s, expected [%lld] (the hidden size, the last dimension of input %s)",
                   input_name(st->op, i), shape_str(p.ndim, p.shape).c_str(), (long long)H,
                   shape_str(x.ndim, x.shape).c_str());
  }
  if (skip_rows == 0 && rows > 0) return c.err("skip is empty");
  // Validation done: outputs.
  std::vector<int64_t> sshape(x.shape, x.shape + x.ndim);
  sshape.back() = 1;
  void* y = api->allocate_output(c.ctx, 0, st->dtype, x.ndim, x.shape);
  if (!y && n > 0) return OLC_ERROR;
  float* mean = nullptr;
  float* inv = nullptr;
  void* sum = nullptr;
  if (st->want[1]) {
    mean = static_cast<float*>(api->allocate_output(c.ctx, 1, OLC_DTYPE_FLOAT, x.ndim, sshape.data()));
    if (!mean && rows > 0) return OLC_ERROR;
  }
  if (st->want[2]) {
    inv = static_cast<float*>(api->allocate_output(c.ctx, 2, OLC_DTYPE_FLOAT, x.ndim, sshape.data()));
    if (!inv && rows > 0) return OLC_ERROR;
  }
  if (st->want[3]) {
    sum = api->allocate_output(c.ctx, 3, st->dtype, x.ndim, x.shape);
    if (!sum && n > 0) return OLC_ERROR;
  }
  api->record_usage_detail(c.ctx, st->isa);
  if (rows == 0) return OLC_OK;
  if (H == 0) {
    // Empty rows: the statistics of nothing (0 / 0).
    for (int64_t r = 0; r < rows; ++r) {
      if (mean) mean[r] = st->op == Op::SkipSLN ? 0.0f : NAN;
      if (inv) inv[r] = NAN;
    }
    return OLC_OK;
  }
  const int bias_i = st->op == Op::SkipLN ? 4 : 3;
  const bool has_beta = st->op == Op::SkipLN && n_inputs > 3 && st->present[3];
  const bool has_bias = n_inputs > bias_i && st->present[bias_i];
  if (st->naive) {
    naive::skip_norm(st->dt, st->op == Op::SkipSLN, st->epsilon, x.data, skip.data, skip_rows, in[2].data,
                     has_beta ? in[3].data : nullptr, has_bias ? in[bias_i].data : nullptr, rows, H, y, mean, inv, sum);
    return OLC_OK;
  }
  std::vector<float> gb, bb, sb;
  NormJob j{};
  j.st = st;
  j.row.gamma = param_f32(st, in[2], &gb);
  j.row.beta = has_beta ? param_f32(st, in[3], &bb) : nullptr;
  j.row.bias = has_bias ? param_f32(st, in[bias_i], &sb) : nullptr;
  j.row.H = H;
  j.row.eps = st->epsilon;
  j.row.simplified = st->op == Op::SkipSLN;
  j.x = static_cast<const char*>(x.data);
  j.skip = static_cast<const char*>(skip.data);
  j.skip_rows = skip_rows;
  j.y = static_cast<char*>(y);
  j.sum = static_cast<char*>(sum);
  j.mean = mean;
  j.inv = inv;
  j.es = olc_dtype_size(st->dtype);
  std::atomic<bool> oom{false};
  j.oom = &oom;
  const int64_t par_min = api->tuning_read_int(st->parallel_min_elements);
  const int64_t grain_el = std::max<int64_t>(1, api->tuning_read_int(st->grain_elements));
  if (par_min <= 0 || n < par_min || rows < 2 || api->concurrency(c.ctx) <= 1) {
    norm_rows(&j, 0, rows);
  } else {
    api->parallel_for(c.ctx, rows, std::max<int64_t>(1, grain_el / H), 0, &norm_rows, &j);
  }
  if (oom.load()) return c.err("out of memory (row buffers)");
  return OLC_OK;
}

struct ActJob {
  const KernelState* st;
  int act;
  const char* x;
  const char* skip;
  const float* bias;
  int64_t H;
  char* y;
  size_t es;
};

// Work item w: elements [w * kBlock, min(n, (w + 1) * kBlock)).
constexpr int64_t kBlock = 1024;

struct ActRange {
  const ActJob* j;
  int64_t n;
};

void act_range(void* user, int64_t begin, int64_t end) {
  const ActRange& r = *static_cast<const ActRange*>(user);
  const ActJob& j = *r.j;
  const int64_t i0 = begin * kBlock, i1 = std::min(r.n, end * kBlock);
  if (i1 <= i0) return;
  const size_t off = static_cast<size_t>(i0) * j.es;
  j.st->k->act_span[j.st->dt](j.act, j.st->alpha, j.x + off, j.skip ? j.skip + off : nullptr, j.bias, j.H,
                              j.bias ? i0 % j.H : 0, j.y + off, i1 - i0);
}

int32_t run_act(Ctx& c, const olc_tensor* in, int32_t n_inputs) {
  const KernelState* st = c.st;
  const olc_core_api* api = g_api;
  const olc_tensor& x = in[0];
  const int64_t n = olc_element_count(&x);
  int act = kActNone;
  int bias_i = -1, skip_i = -1;
  switch (st->op) {
    case Op::BiasGelu: act = kActGeluErf; bias_i = 1; break;
    case Op::Gelu: act = kActGeluErf; break;
    case Op::FastGelu: act = kActGeluTanh; bias_i = (n_inputs > 1 && st->present[1]) ? 1 : -1; break;
    case Op::QuickGelu: act = kActQuick; break;
    case Op::BiasAdd: act = kActNone; bias_i = 1; skip_i = 2; break;
    default: break;
  }
  if (st->op == Op::BiasAdd && x.ndim != 3)
    return c.err("X must have rank 3 [batch, sequence, channels], got shape %s", shape_str(x.ndim, x.shape).c_str());
  int64_t H = 1;
  if (bias_i >= 0) {
    if (x.ndim < 1) return c.err("%s must have rank >= 1 when a bias is given", input_name(st->op, 0));
    H = x.shape[x.ndim - 1];
    const olc_tensor& b = in[bias_i];
    if (b.ndim != 1 || b.shape[0] != H)
      return c.err("%s has shape %s, expected [%lld] (the last dimension of %s %s)", input_name(st->op, bias_i),
                   shape_str(b.ndim, b.shape).c_str(), (long long)H, input_name(st->op, 0),
                   shape_str(x.ndim, x.shape).c_str());
  }
  if (skip_i >= 0) {
    const olc_tensor& s = in[skip_i];
    bool same = s.ndim == x.ndim;
    for (int32_t i = 0; same && i < x.ndim; ++i) same = s.shape[i] == x.shape[i];
    if (!same)
      return c.err("skip has shape %s, expected the shape of X %s", shape_str(s.ndim, s.shape).c_str(),
                   shape_str(x.ndim, x.shape).c_str());
  }
  void* y = api->allocate_output(c.ctx, 0, st->dtype, x.ndim, x.shape);
  if (!y && n > 0) return OLC_ERROR;
  api->record_usage_detail(c.ctx, st->isa);
  if (n == 0) return OLC_OK;
  if (st->naive) {
    naive::act(st->dt, act, st->alpha, x.data, bias_i >= 0 ? in[bias_i].data : nullptr, H,
               skip_i >= 0 ? in[skip_i].data : nullptr, y, n);
    return OLC_OK;
  }
  std::vector<float> bb;
  ActJob j{};
  j.st = st;
  j.act = act;
  j.x = static_cast<const char*>(x.data);
  j.skip = skip_i >= 0 ? static_cast<const char*>(in[skip_i].data) : nullptr;
  j.bias = bias_i >= 0 ? param_f32(st, in[bias_i], &bb) : nullptr;
  j.H = H;
  j.y = static_cast<char*>(y);
  j.es = olc_dtype_size(st->dtype);
  ActRange r{&j, n};
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int64_t par_min = api->tuning_read_int(st->parallel_min_elements);
  const int64_t grain_el = std::max<int64_t>(kBlock, api->tuning_read_int(st->grain_elements));
  if (par_min <= 0 || n < par_min || blocks < 2 || api->concurrency(c.ctx) <= 1) act_range(&r, 0, blocks);
  else api->parallel_for(c.ctx, blocks, grain_el / kBlock, 0, &act_range, &r);
  return OLC_OK;
}

int32_t cm_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs, int32_t n_outputs) {
  const KernelState* st = static_cast<const KernelState*>(state);
  Ctx c{st, ctx, {}};
  if (n_inputs != st->n_inputs) return c.err("expects %d inputs, got %d", st->n_inputs, n_inputs);
  for (int32_t i = 0; i < n_inputs; ++i) {
    const olc_tensor& t = inputs[i];
    if (!st->present[i]) {
      if (t.dtype != OLC_DTYPE_UNDEFINED) return c.err("input %d was absent when the kernel was created", i);
      continue;
    }
    if (t.dtype != st->in_dtype[i])
      return c.err("input %d (%s) has type %s, the kernel was created for %s", i, input_name(st->op, i),
                   olc_dtype_name(t.dtype), olc_dtype_name(st->in_dtype[i]));
    const int64_t cnt = olc_element_count(&t);
    if (cnt < 0) return c.err("input %d has a negative dimension or too many elements", i);
    if (cnt > 0 && t.data == nullptr) return c.err("input %d has no data", i);
  }
  try {
    switch (st->op) {
      case Op::SkipLN:
      case Op::SkipSLN: return run_norm(c, inputs, n_inputs);
      case Op::EmbedLN: return run_embed(c, inputs, n_inputs);
      case Op::BiasSoftmax: return run_bias_softmax(c, inputs, n_inputs);
      case Op::CDist: return run_cdist(c, inputs, n_inputs);
      case Op::GatherBQ: return run_gather_bq(c, inputs, n_inputs);
      case Op::MoE:
      case Op::QMoE: return run_moe(c, inputs, n_inputs);
      default: return run_act(c, inputs, n_inputs);
    }
  } catch (const std::bad_alloc&) {
    return g_api->set_error(ctx, "out of memory");
  } catch (...) {
    return g_api->set_error(ctx, "internal error");
  }
}

struct VtableInit {
  VtableInit() {
    static std::vector<std::string> names;
    names.reserve(2 * specs().size());
    for (OpSpec& s : specs()) {
      for (int v = 0; v < 2; ++v) {
        names.push_back(std::string(kLibrary) + (v ? "::Naive" : "::") + s.name);
        olc_kernel_vtable& vt = s.vtables[v];
        vt.abi_version = OLC_ABI_VERSION;
        vt.flags = 0;
        vt.name = names.back().c_str();
        vt.create = v ? &cm_create_naive : &cm_create;
        vt.run = &cm_run;
        vt.destroy = &cm_destroy;
      }
    }
  }
};

}  // namespace

void set_core_api(const olc_core_api* api) {
  g_api = api;
  static VtableInit init;
  (void)init;
}

const olc_kernel_vtable* vtable(const std::string& op_type, bool naive) {
  OpSpec* s = const_cast<OpSpec*>(find_spec(op_type.c_str()));
  return s ? &s->vtables[naive ? 1 : 0] : nullptr;
}

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const OpSpec& s : specs()) out.emplace_back(s.name);
  return out;
}

}  // namespace olc_cm
