// QuantizeLinear (10+), DequantizeLinear (10+) and DynamicQuantizeLinear
// (11): attributes, types and the scale / zero-point layout are checked
// here; the element loops live in quantize_{scalar,avx2,avx512}.cc.
//
// Layout: x is viewed as [outer, D, inner] around the quantization axis.
// - per tensor: the scale has one element (rank 0 or 1), block_size or not;
// - per axis (13+): a 1-D scale of length D;
// - blocked (21+, block_size B > 0): a scale of x's rank, equal to x's
//   shape except ceil(D / B) on the axis (the last block may be short).
// The zero point, when given, has the scale's shape. Scales and zero points
// are widened to float32 once per run (scales rounded to the division
// precision), then the flat range of x is split across the executor.
//
// uint4 / int4 (21+): one element per byte (quantize_kernels.h), on the same
// SIMD loops as the 8-bit types; blocked int4 / uint4 weights feeding MatMul
// dequantize row by row (axis 0) or block by block (the last axis).
//
// Division precision of QuantizeLinear: the `precision` attribute (23+)
// when set, else the scale's type (the schema's rule; before 23 the scale
// is float32 or x's own type). x is rounded to it, then the quotient.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "common.h"
#include "fp8_convert.h"
#include "fp_convert.h"
#include "quantize_kernels.h"
#include "registry.h"

namespace olc_tn {
namespace {

bool is_float3(int32_t t) { return t == OLC_DTYPE_FLOAT || t == OLC_DTYPE_FLOAT16 || t == OLC_DTYPE_BFLOAT16; }

bool is_4bit(int32_t t) { return t == OLC_DTYPE_UINT4 || t == OLC_DTYPE_INT4; }

bool is_quant_int(int32_t t) {
  return t == OLC_DTYPE_UINT8 || t == OLC_DTYPE_INT8 || t == OLC_DTYPE_UINT16 || t == OLC_DTYPE_INT16 || is_4bit(t);
}

// The float32 value of element i of a scale or zero-point tensor.
float value_at(const olc_tensor& t, int64_t i) {
  const void* p = t.data;
  switch (t.dtype) {
    case OLC_DTYPE_FLOAT: return static_cast<const float*>(p)[i];
    case OLC_DTYPE_FLOAT16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case OLC_DTYPE_BFLOAT16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case OLC_DTYPE_UINT8: return static_cast<const uint8_t*>(p)[i];
    case OLC_DTYPE_INT8: return static_cast<const int8_t*>(p)[i];
    case OLC_DTYPE_UINT16: return static_cast<const uint16_t*>(p)[i];
    case OLC_DTYPE_INT16: return static_cast<const int16_t*>(p)[i];
    case OLC_DTYPE_INT32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    case OLC_DTYPE_UINT4: return static_cast<float>(nibble_value(UInt4{}, static_cast<const uint8_t*>(p)[i]));
    case OLC_DTYPE_INT4: return static_cast<float>(nibble_value(Int4{}, static_cast<const uint8_t*>(p)[i]));
    case OLC_DTYPE_FLOAT8E4M3FN: return f8_table<OLC_DTYPE_FLOAT8E4M3FN>()[static_cast<const uint8_t*>(p)[i]];
    case OLC_DTYPE_FLOAT8E4M3FNUZ: return f8_table<OLC_DTYPE_FLOAT8E4M3FNUZ>()[static_cast<const uint8_t*>(p)[i]];
    case OLC_DTYPE_FLOAT8E5M2: return f8_table<OLC_DTYPE_FLOAT8E5M2>()[static_cast<const uint8_t*>(p)[i]];
    case OLC_DTYPE_FLOAT8E5M2FNUZ: return f8_table<OLC_DTYPE_FLOAT8E5M2FNUZ>()[static_cast<const uint8_t*>(p)[i]];
    default: return 0.0f;
  }
}

float round_to(int32_t p, float v) {
  if (p == OLC_DTYPE_FLOAT16) return f16_to_f32(f32_to_f16(v));
  if (p == OLC_DTYPE_BFLOAT16) return bf16_to_f32(f32_to_bf16(v));
  return v;
}

enum Mode { kPerTensor, kPerAxis, kBlocked };

struct Layout {
  Mode mode = kPerTensor;
  int64_t n = 0, outer = 1, d = 1, inner = 1, block = 0, sd = 1;
};

// Checks the scale / zero-point shapes against x; fills the layout.
bool plan_layout(const olc_tensor& x, const olc_tensor& s, const olc_tensor* zp, int64_t opset, int64_t axis_attr,
                 int64_t block, const char* sname, const char* zname, Layout* L, std::string* err) {
  L->n = checked_count(x);
  if (L->n < 0) {
    *err = "input 0 (x) has a negative dimension, too many elements or no data";
    return false;
  }
  const int64_t ns = checked_count(s);
  if (ns < 0) {
    *err = strf("%s has an invalid shape or no data", sname);
    return false;
  }
  if (zp) {
    const int64_t nz = checked_count(*zp);
    bool same = nz == ns && nz >= 0;
    if (same && !(zp->ndim <= 1 && s.ndim <= 1 && nz == 1)) {
      same = zp->ndim == s.ndim;
      for (int i = 0; same && i < s.ndim; ++i) same = zp->shape[i] == s.shape[i];
    }
    if (!same) {
      *err = strf("%s shape %s does not match %s shape %s", zname, shape_str(zp->shape, zp->ndim).c_str(), sname,
                  shape_str(s.shape, s.ndim).c_str());
      return false;
    }
  }
  const std::string xs = shape_str(x.shape, x.ndim), ss = shape_str(s.shape, s.ndim);
  if (ns == 1 && s.ndim <= 1) {  // one scale: per tensor, with or without block_size
    L->mode = kPerTensor;
    return true;
  }
  if (block > 0) {
    if (x.ndim == 0 || s.ndim != x.ndim) {
      *err = strf("blocked quantization (block_size %lld) needs %s of x's rank: x %s, %s %s", (long long)block, sname,
                  xs.c_str(), sname, ss.c_str());
      return false;
    }
  } else if (s.ndim != 1) {
    *err = strf("%s must be a scalar or 1-D without block_size, got shape %s", sname, ss.c_str());
    return false;
  } else if (opset < 13) {
    *err = strf("%s must be a scalar at opset %lld (per-axis scales come with opset 13), got shape %s", sname,
                (long long)opset, ss.c_str());
    return false;
  }
  const int64_t r = x.ndim;
  if (axis_attr < -r || axis_attr >= r) {
    *err = strf("axis %lld is out of range for x of rank %lld", (long long)axis_attr, (long long)r);
    return false;
  }
  const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + r : axis_attr);
  L->d = x.shape[axis];
  for (int i = 0; i < axis; ++i) L->outer *= x.shape[i];
  for (int i = axis + 1; i < r; ++i) L->inner *= x.shape[i];
  if (block <= 0) {
    if (s.shape[0] != L->d) {
      *err = strf("%s has %lld elements, x %s has %lld on axis %d", sname, (long long)s.shape[0], xs.c_str(),
                  (long long)L->d, axis);
      return false;
    }
    L->mode = kPerAxis;
    return true;
  }
  for (int i = 0; i < r; ++i) {
    if (i != axis && s.shape[i] != x.shape[i]) {
      *err = strf("%s shape %s must equal x shape %s except on axis %d", sname, ss.c_str(), xs.c_str(), axis);
      return false;
    }
  }
  L->sd = s.shape[axis];
  const int64_t want = (L->d + block - 1) / block;
  if (L->sd != want) {
    *err = strf("block_size %lld does not fit: x %s has %lld on axis %d, which needs %lld blocks, %s has %lld",
                (long long)block, xs.c_str(), (long long)L->d, axis, (long long)want, sname, (long long)L->sd);
    return false;
  }
  L->mode = kBlocked;
  L->block = block;
  return true;
}

// The kernels of one (input, output, precision) combination.
struct Loops {
  QuantUniformFn uni = nullptr;
  QuantVectorFn vec = nullptr;
  const char* isa = "generic";
};

// Runs the loops over x ([outer, D, inner]) with the float32 scales S and
// zero points Z laid out as the scale tensor is.
void drive(olc_context* ctx, const Layout& L, const Loops& k, const char* x, int64_t xs, char* y, int64_t ys,
           const float* S, const float* Z, int64_t blk, int64_t pmin) {
  std::vector<float> es, ez;  // per-axis with short rows: the pattern of one outer slice
  const float* ps = S;
  const float* pz = Z;
  int64_t period = 0;
  constexpr int64_t kShortRow = 64, kMaxPattern = 1 << 20;
  if (L.mode == kPerAxis && L.inner < kShortRow && L.d * L.inner <= kMaxPattern) {
    period = L.d * L.inner;
    es.resize(static_cast<size_t>(period));
    ez.resize(static_cast<size_t>(period));
    for (int64_t j = 0; j < period; ++j) {
      es[j] = S[j / L.inner];
      ez[j] = Z[j / L.inner];
    }
    ps = es.data();
    pz = ez.data();
  }
  auto range = [&](int64_t lo, int64_t hi) {
    while (lo < hi) {
      int64_t end = hi;
      if (L.mode == kPerTensor) {
        k.uni(x + lo * xs, hi - lo, S[0], Z[0], y + lo * ys);
      } else if (period) {
        const int64_t off = lo % period;
        end = std::min(hi, lo + (period - off));
        k.vec(x + lo * xs, end - lo, ps + off, pz + off, y + lo * ys);
      } else if (L.mode == kPerAxis) {
        const int64_t row = lo / L.inner, j = lo % L.inner, c = row % L.d;
        end = std::min(hi, lo + (L.inner - j));
        k.uni(x + lo * xs, end - lo, S[c], Z[c], y + lo * ys);
      } else if (L.inner == 1) {
        const int64_t o = lo / L.d, dd = lo % L.d, b = dd / L.block;
        end = std::min(hi, o * L.d + std::min(L.d, (b + 1) * L.block));
        const int64_t c = o * L.sd + b;
        k.uni(x + lo * xs, end - lo, S[c], Z[c], y + lo * ys);
      } else {
        const int64_t o = lo / (L.d * L.inner), rem = lo % (L.d * L.inner);
        const int64_t dd = rem / L.inner, j = rem % L.inner;
        end = std::min(hi, lo + (L.inner - j));
        const int64_t base = (o * L.sd + dd / L.block) * L.inner + j;
        k.vec(x + lo * xs, end - lo, S + base, Z + base, y + lo * ys);
      }
      lo = end;
    }
  };
  const int64_t chunks = (L.n + blk - 1) / blk;
  if (chunks <= 1 || L.n * (xs + ys) < pmin || g_api->concurrency(ctx) <= 1) {
    range(0, L.n);
    return;
  }
  par_for(ctx, chunks, 1, L.n * (xs + ys), pmin,
          [&](int64_t b, int64_t e) { range(b * blk, std::min(L.n, e * blk)); });
}

int64_t block_of(const olc_tuning_param* p) { return std::max<int64_t>(64, g_api->tuning_read_int(p) / 64 * 64); }

// ------------------------------------------------------------ QuantizeLinear

Loops quant_loops(int32_t xt, int32_t pt, int32_t yt, bool saturate) {
  Loops k;
  if (xt == OLC_DTYPE_FLOAT && pt == OLC_DTYPE_FLOAT && is_quant_int(yt)) {
    int which = kQI16;
    switch (yt) {
      case OLC_DTYPE_UINT8: which = kQU8; break;
      case OLC_DTYPE_INT8: which = kQI8; break;
      case OLC_DTYPE_UINT16: which = kQU16; break;
      case OLC_DTYPE_UINT4: which = kQU4; break;
      case OLC_DTYPE_INT4: which = kQI4; break;
      default: break;
    }
    const int32_t level = g_api->simd_level();
    if (level >= OLC_SIMD_AVX512) return {avx512::quant_uniform(which), avx512::quant_vector(which), "avx512"};
    if (level >= OLC_SIMD_AVX2) return {avx2::quant_uniform(which), avx2::quant_vector(which), "avx2"};
    return {scalar::quant_uniform(which), scalar::quant_vector(which), "scalar"};
  }
  k.uni = scalar::quant_any_uniform(xt, pt, yt, saturate);
  k.vec = scalar::quant_any_vector(xt, pt, yt, saturate);
  return k;
}

// What QuantizeLinear and DequantizeLinear share: the created state and the
// run (x, scale and the optional zero point checked and laid out, y
// allocated, the loops driven over the layout).
class QuantizeBase : public Kernel {
 public:
  int64_t opset = 0, axis = 1, block = 0;
  int32_t xt = 0, st = 0, yt = 0;
  Loops k;
  const olc_tuning_param* par_min = nullptr;
  const olc_tuning_param* blk = nullptr;

 protected:
  // zp_type: the zero point's required type, `zp_owner` naming it in the
  // message; precision: the type scales are rounded to first (0: none);
  // zero_f8_zp: a float8 zero point must be all zeros.
  int32_t run_layout(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out, int32_t zp_type,
                     const char* zp_owner, const char* scale_name, const char* zp_name, int32_t precision,
                     bool zero_f8_zp) const {
    if (n_in < 2 || n_in > 3 || n_out != 1) return fail(ctx, "expects 2 or 3 inputs and 1 output, got %d and %d", n_in, n_out);
    const olc_tensor& x = in[0];
    const olc_tensor& s = in[1];
    const olc_tensor* zp = n_in == 3 && in[2].dtype != OLC_DTYPE_UNDEFINED ? &in[2] : nullptr;
    if (x.dtype != xt || s.dtype != st)
      return fail(ctx, "inputs have types %s, %s; the kernel was created for %s, %s", olc_dtype_name(x.dtype),
                  olc_dtype_name(s.dtype), olc_dtype_name(xt), olc_dtype_name(st));
    if (zp && zp->dtype != zp_type)
      return fail(ctx, "%s has type %s, %s %s", zp_name, olc_dtype_name(zp->dtype), zp_owner, olc_dtype_name(zp_type));
    Layout L;
    std::string err;
    if (!plan_layout(x, s, zp, opset, axis, block, scale_name, zp_name, &L, &err))
      return fail(ctx, "%s", err.c_str());
    const int64_t ns = olc_element_count(&s);
    std::vector<float> S(static_cast<size_t>(ns)), Z(static_cast<size_t>(ns), 0.0f);
    for (int64_t i = 0; i < ns; ++i) S[i] = round_to(precision, value_at(s, i));
    if (zp) {
      for (int64_t i = 0; i < ns; ++i) Z[i] = value_at(*zp, i);
      if (zero_f8_zp && is_f8(zp_type)) {
        for (int64_t i = 0; i < ns; ++i)
          if (static_cast<const uint8_t*>(zp->data)[i] != 0)
            return fail(ctx, "%s must be zero for float8 inputs (element %lld is not)", zp_name, (long long)i);
      }
    }
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, yt, x.ndim, x.shape));
    if (!y && L.n > 0) return OLC_ERROR;
    g_api->record_usage_detail(ctx, k.isa);
    if (L.n == 0) return OLC_OK;
    drive(ctx, L, k, static_cast<const char*>(x.data), static_cast<int64_t>(olc_dtype_size(xt)), y,
          static_cast<int64_t>(olc_dtype_size(yt)), S.data(), Z.data(), block_of(blk), g_api->tuning_read_int(par_min));
    return OLC_OK;
  }
};

class Quantize final : public QuantizeBase {
 public:
  int32_t pt = 0;  // the type scales are rounded to (precision)

  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    return run_layout(ctx, n_in, in, n_out, yt, "the output type is", "y_scale", "y_zero_point", pt, false);
  }
};

bool quant_output_ok(int32_t t, int64_t opset) {
  if (t == OLC_DTYPE_UINT8 || t == OLC_DTYPE_INT8) return true;
  if (is_f8(t)) return opset >= 19;
  if (t == OLC_DTYPE_UINT16 || t == OLC_DTYPE_INT16 || is_4bit(t)) return opset >= 21;
  return false;
}

bool common_attrs(const olc_node_info* node, int64_t* axis, int64_t* block, int64_t* out_dtype, std::string* error) {
  if (!attr_int(node, "axis", 1, axis, error) || !attr_int(node, "block_size", 0, block, error) ||
      !attr_int(node, "output_dtype", 0, out_dtype, error))
    return false;
  if (*block < 0) {
    *error = strf("block_size must be positive (0: not blocked), got %lld", (long long)*block);
    return false;
  }
  if (*block > 0 && node->opset < 21) {
    *error = strf("block_size needs opset 21, the model imports %lld", (long long)node->opset);
    return false;
  }
  return true;
}

Kernel* make_quantize(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"axis", "saturate", "block_size", "output_dtype", "precision", nullptr};
  if (!check_attr_names(node, kAttrs, error)) return nullptr;
  if (node->n_inputs < 2 || node->n_inputs > 3 || node->n_outputs != 1) {
    *error = strf("expects 2 or 3 inputs and 1 output, got %d and %d", node->n_inputs, node->n_outputs);
    return nullptr;
  }
  auto k = std::make_unique<Quantize>();
  k->opset = node->opset;
  int64_t out_dtype = 0, saturate = 1, precision = 0;
  if (!common_attrs(node, &k->axis, &k->block, &out_dtype, error)) return nullptr;
  if (!attr_int(node, "saturate", 1, &saturate, error) || !attr_int(node, "precision", 0, &precision, error))
    return nullptr;
  if (saturate != 0 && saturate != 1) {
    *error = strf("attribute 'saturate' must be 0 or 1, got %lld", (long long)saturate);
    return nullptr;
  }
  k->xt = node->input_dtypes[0];
  k->st = node->input_dtypes[1];
  const int32_t zt = node->n_inputs == 3 ? node->input_dtypes[2] : OLC_DTYPE_UNDEFINED;
  if (!(is_float3(k->xt) || k->xt == OLC_DTYPE_INT32)) {
    *error = strf("x must be float32, float16, bfloat16 or int32, got %s", olc_dtype_name(k->xt));
    return nullptr;
  }
  if (!is_float3(k->st)) {
    *error = strf("y_scale must be float32, float16 or bfloat16, got %s", olc_dtype_name(k->st));
    return nullptr;
  }
  if (zt != OLC_DTYPE_UNDEFINED && out_dtype != 0 && out_dtype != zt) {
    *error = strf("output_dtype %lld does not match the type of y_zero_point (%s)", (long long)out_dtype,
                  olc_dtype_name(zt));
    return nullptr;
  }
  k->yt = zt != OLC_DTYPE_UNDEFINED ? zt : out_dtype != 0 ? static_cast<int32_t>(out_dtype) : OLC_DTYPE_UINT8;
  if (!quant_output_ok(k->yt, node->opset)) {
    *error = strf("output type %s is not a quantized type of QuantizeLinear-%lld", olc_dtype_name(k->yt),
                  (long long)node->opset);
    return nullptr;
  }
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != k->yt) {
    *error = strf("output type %s does not match the quantized type %s", olc_dtype_name(node->output_dtypes[0]),
                  olc_dtype_name(k->yt));
    return nullptr;
  }
  if (precision != 0 && !is_float3(static_cast<int32_t>(precision))) {
    *error = strf("precision %lld is not float32, float16 or bfloat16", (long long)precision);
    return nullptr;
  }
  k->pt = precision != 0 ? static_cast<int32_t>(precision) : k->st;
  k->k = quant_loops(k->xt, k->pt, k->yt, saturate != 0);
  if (!k->k.uni || !k->k.vec) {
    *error = strf("unsupported combination %s -> %s", olc_dtype_name(k->xt), olc_dtype_name(k->yt));
    return nullptr;
  }
  k->par_min = g_api->tuning_declare_int(kLibrary, "QuantizeLinear", k->k.isa, k->xt, "parallel_min_bytes", 256 << 10);
  k->blk = g_api->tuning_declare_int(kLibrary, "QuantizeLinear", k->k.isa, k->xt, "block_elements", 16384);
  return k.release();
}

// ---------------------------------------------------------- DequantizeLinear

Loops dequant_loops(int32_t xt, int32_t yt) {
  int which = -1;
  switch (xt) {
    case OLC_DTYPE_UINT8: which = kDU8; break;
    case OLC_DTYPE_INT8: which = kDI8; break;
    case OLC_DTYPE_UINT16: which = kDU16; break;
    case OLC_DTYPE_INT16: which = kDI16; break;
    case OLC_DTYPE_INT32: which = kDI32; break;
    case OLC_DTYPE_UINT4: which = kDU4; break;
    case OLC_DTYPE_INT4: which = kDI4; break;
    default: break;
  }
  if (which >= 0 && yt == OLC_DTYPE_FLOAT) {
    const int32_t level = g_api->simd_level();
    if (level >= OLC_SIMD_AVX512) return {avx512::dequant_uniform(which), avx512::dequant_vector(which), "avx512"};
    if (level >= OLC_SIMD_AVX2) return {avx2::dequant_uniform(which), avx2::dequant_vector(which), "avx2"};
    return {scalar::dequant_uniform(which), scalar::dequant_vector(which), "scalar"};
  }
  Loops k;
  k.uni = scalar::dequant_any_uniform(xt, yt);
  k.vec = scalar::dequant_any_vector(xt, yt);
  return k;
}

class Dequantize final : public QuantizeBase {
 public:
  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    return run_layout(ctx, n_in, in, n_out, xt, "x has type", "x_scale", "x_zero_point", 0, true);
  }
};

bool dequant_input_ok(int32_t t, int64_t opset) {
  if (t == OLC_DTYPE_UINT8 || t == OLC_DTYPE_INT8 || t == OLC_DTYPE_INT32) return true;
  if (is_f8(t)) return opset >= 19;
  if (t == OLC_DTYPE_UINT16 || t == OLC_DTYPE_INT16 || is_4bit(t)) return opset >= 21;
  return false;
}

Kernel* make_dequantize(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {"axis", "block_size", "output_dtype", nullptr};
  if (!check_attr_names(node, kAttrs, error)) return nullptr;
  if (node->n_inputs < 2 || node->n_inputs > 3 || node->n_outputs != 1) {
    *error = strf("expects 2 or 3 inputs and 1 output, got %d and %d", node->n_inputs, node->n_outputs);
    return nullptr;
  }
  auto k = std::make_unique<Dequantize>();
  k->opset = node->opset;
  int64_t out_dtype = 0;
  if (!common_attrs(node, &k->axis, &k->block, &out_dtype, error)) return nullptr;
  k->xt = node->input_dtypes[0];
  k->st = node->input_dtypes[1];
  const int32_t zt = node->n_inputs == 3 ? node->input_dtypes[2] : OLC_DTYPE_UNDEFINED;
  if (!dequant_input_ok(k->xt, node->opset)) {
    *error = strf("x has type %s, not a quantized type of DequantizeLinear-%lld", olc_dtype_name(k->xt),
                  (long long)node->opset);
    return nullptr;
  }
  if (zt != OLC_DTYPE_UNDEFINED && zt != k->xt) {
    *error = strf("x_zero_point has type %s, x has type %s", olc_dtype_name(zt), olc_dtype_name(k->xt));
    return nullptr;
  }
  if (!is_float3(k->st)) {
    *error = strf("x_scale must be float32, float16 or bfloat16, got %s", olc_dtype_name(k->st));
    return nullptr;
  }
  k->yt = out_dtype != 0 ? static_cast<int32_t>(out_dtype) : k->st;
  if (!is_float3(k->yt)) {
    *error = strf("output_dtype %lld is not float32, float16 or bfloat16", (long long)out_dtype);
    return nullptr;
  }
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != k->yt) {
    *error = strf("output type %s does not match the expected %s", olc_dtype_name(node->output_dtypes[0]),
                  olc_dtype_name(k->yt));
    return nullptr;
  }
  k->k = dequant_loops(k->xt, k->yt);
  if (!k->k.uni || !k->k.vec) {
    *error = strf("unsupported combination %s -> %s", olc_dtype_name(k->xt), olc_dtype_name(k->yt));
    return nullptr;
  }
  // Dequantizing is a few cycles per 16 elements: two threads only pay off
  // from about 200K 8-bit inputs (64K uint8 -> float32 on the 2-core Zen 4:
  // 4.1 us on one thread, 6.2 us on two).
  k->par_min = g_api->tuning_declare_int(kLibrary, "DequantizeLinear", k->k.isa, k->xt, "parallel_min_bytes", 1 << 20);
  k->blk = g_api->tuning_declare_int(kLibrary, "DequantizeLinear", k->k.isa, k->xt, "block_elements", 16384);
  return k.release();
}

// ----------------------------------------------------- DynamicQuantizeLinear

using MinMaxFn = void (*)(const float* x, int64_t n, float* mn, float* mx);

class DynamicQuantize final : public Kernel {
 public:
  Loops k;
  MinMaxFn min_max = nullptr;
  const olc_tuning_param* par_min = nullptr;
  const olc_tuning_param* blk = nullptr;

  int32_t run(olc_context* ctx, int32_t n_in, const olc_tensor* in, int32_t n_out) const override {
    if (n_in != 1 || n_out != 3) return fail(ctx, "expects 1 input and 3 outputs, got %d and %d", n_in, n_out);
    const olc_tensor& x = in[0];
    if (x.dtype != OLC_DTYPE_FLOAT) return fail(ctx, "x must be float32, got %s", olc_dtype_name(x.dtype));
    Layout L;
    L.n = checked_count(x);
    if (L.n < 0) return fail(ctx, "input 0 (x) has a negative dimension, too many elements or no data");
    const float* xs = static_cast<const float*>(x.data);
    const int64_t b = block_of(blk), pmin = g_api->tuning_read_int(par_min);
    const int64_t chunks = std::max<int64_t>(1, (L.n + b - 1) / b);
    // One pass for the range; it always includes 0 (the accumulators start
    // there) and skips NaN.
    std::vector<float> mn(static_cast<size_t>(chunks), 0.0f), mx(static_cast<size_t>(chunks), 0.0f);
    par_for(ctx, chunks, 1, L.n * 4, pmin, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t lo = c * b, hi = std::min(L.n, lo + b);
        if (hi > lo) min_max(xs + lo, hi - lo, &mn[c], &mx[c]);
      }
    });
    float lo = 0.0f, hi = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      lo = std::min(lo, mn[c]);
      hi = std::max(hi, mx[c]);
    }
    // The schema's formulas, in float32. An all-zero (or empty) input has
    // no range: scale 1, as onnxruntime gives (onnx.reference's 1/255
    // comes from a misplaced parenthesis around the same rule).
    const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float izp = 0.0f - lo / scale;
    if (!(izp > 0.0f)) izp = 0.0f;  // NaN too (an infinite range)
    if (izp > 255.0f) izp = 255.0f;
    const float zp = std::nearbyint(izp);
    char* y = static_cast<char*>(g_api->allocate_output(ctx, 0, OLC_DTYPE_UINT8, x.ndim, x.shape));
    if (!y && L.n > 0) return OLC_ERROR;
    float* ys = static_cast<float*>(g_api->allocate_output(ctx, 1, OLC_DTYPE_FLOAT, 0, nullptr));
    if (!ys) return OLC_ERROR;
    uint8_t* yz = static_cast<uint8_t*>(g_api->allocate_output(ctx, 2, OLC_DTYPE_UINT8, 0, nullptr));
    if (!yz) return OLC_ERROR;
    *ys = scale;
    *yz = static_cast<uint8_t>(zp);
    g_api->record_usage_detail(ctx, k.isa);
    if (L.n == 0) return OLC_OK;
    drive(ctx, L, k, reinterpret_cast<const char*>(xs), 4, y, 1, &scale, &zp, b, pmin);
    return OLC_OK;
  }
};

Kernel* make_dynamic_quantize(const olc_node_info* node, std::string* error) {
  static const char* const kAttrs[] = {nullptr};
  if (!check_attr_names(node, kAttrs, error)) return nullptr;
  if (node->n_inputs != 1 || node->n_outputs != 3) {
    *error = strf("expects 1 input and 3 outputs, got %d and %d", node->n_inputs, node->n_outputs);
    return nullptr;
  }
  if (node->input_dtypes[0] != OLC_DTYPE_FLOAT) {
    *error = strf("x must be float32, got %s", olc_dtype_name(node->input_dtypes[0]));
    return nullptr;
  }
  auto k = std::make_unique<DynamicQuantize>();
  k->k = quant_loops(OLC_DTYPE_FLOAT, OLC_DTYPE_FLOAT, OLC_DTYPE_UINT8, true);
  const int32_t level = g_api->simd_level();
  k->min_max = level >= OLC_SIMD_AVX512 ? &avx512::min_max : level >= OLC_SIMD_AVX2 ? &avx2::min_max : &scalar::min_max;
  k->par_min = g_api->tuning_declare_int(kLibrary, "DynamicQuantizeLinear", k->k.isa, OLC_DTYPE_FLOAT,
                                         "parallel_min_bytes", 256 << 10);
  k->blk = g_api->tuning_declare_int(kLibrary, "DynamicQuantizeLinear", k->k.isa, OLC_DTYPE_FLOAT, "block_elements",
                                     16384);
  return k.release();
}

}  // namespace

Kernel* make_quantize_linear(const olc_node_info* node, std::string* error) { return make_quantize(node, error); }
Kernel* make_dequantize_linear(const olc_node_info* node, std::string* error) { return make_dequantize(node, error); }
Kernel* make_dynamic_quantize_linear(const olc_node_info* node, std::string* error) {
  return make_dynamic_quantize(node, error);
}

}  // namespace olc_tn
