// The kernels olc-core registers itself: ops that change only a tensor's
// shape (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout at
// inference) run as zero-copy views of their input (view_output), and the
// ops that read only a shape (Shape, Size) write a small int64 tensor. They
// are dtype-agnostic: no element is read or written by the views.
#include "shape_kernels.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace olc {
namespace {

enum class ShapeOp { kReshape, kFlatten, kSqueeze, kUnsqueeze, kIdentity, kDropout, kShape, kSize };

struct ShapeKernel {
  const olc_core_api* api;
  ShapeOp op;
  int64_t opset;
  bool allowzero = false;      // Reshape
  int64_t axis = 1;            // Flatten
  bool has_axes_attr = false;  // Squeeze / Unsqueeze before opset 13
  std::vector<int64_t> axes;
  int64_t start = 0;           // Shape (opset 15+)
  bool has_end = false;
  int64_t end = 0;
};

const olc_attribute* find_attr(const olc_node_info* node, const char* name) {
  for (int32_t i = 0; i < node->n_attributes; ++i)
    if (std::strcmp(node->attributes[i].name, name) == 0) return &node->attributes[i];
  return nullptr;
}

bool read_int_attr(const olc_node_info* node, const char* name, int64_t* out, char* error, size_t size) {
  const olc_attribute* a = find_attr(node, name);
  if (!a) return true;
  if (a->type != OLC_ATTR_INT) {
    std::snprintf(error, size, "attribute '%s' must be an int", name);
    return false;
  }
  *out = a->i;
  return true;
}

std::string dims_str(const int64_t* d, int64_t n) {
  std::string s = "[";
  for (int64_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

void* shape_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t size, ShapeOp op) {
  auto k = std::make_unique<ShapeKernel>();
  k->api = api;
  k->op = op;
  k->opset = node->opset;
  if (node->n_inputs < 1 || node->n_outputs < 1) {
    std::snprintf(error, size, "expects at least 1 input and 1 output");
    return nullptr;
  }
  int64_t v = 0;
  switch (op) {
    case ShapeOp::kReshape:
      if (!read_int_attr(node, "allowzero", &v, error, size)) return nullptr;
      k->allowzero = v != 0;
      break;
    case ShapeOp::kFlatten:
      if (!read_int_attr(node, "axis", &k->axis, error, size)) return nullptr;
      break;
    case ShapeOp::kSqueeze:
    case ShapeOp::kUnsqueeze:
      if (const olc_attribute* a = find_attr(node, "axes")) {
        if (a->type != OLC_ATTR_INTS) {
          std::snprintf(error, size, "attribute 'axes' must be a list of ints");
          return nullptr;
        }
        k->has_axes_attr = true;
        k->axes.assign(a->ints, a->ints + a->count);
      }
      if (op == ShapeOp::kUnsqueeze && node->opset < 13 && !k->has_axes_attr) {
        std::snprintf(error, size, "attribute 'axes' is required before opset 13");
        return nullptr;
      }
      if (op == ShapeOp::kUnsqueeze && node->opset >= 13 &&
          (node->n_inputs < 2 || node->input_dtypes[1] == OLC_DTYPE_UNDEFINED)) {
        std::snprintf(error, size, "input 'axes' is required from opset 13");
        return nullptr;
      }
      break;
    case ShapeOp::kShape:
      if (!read_int_attr(node, "start", &k->start, error, size)) return nullptr;
      if (find_attr(node, "end")) {
        k->has_end = true;
        if (!read_int_attr(node, "end", &k->end, error, size)) return nullptr;
      }
      break;
    default:
      break;
  }
  return k.release();
}

template <ShapeOp kOp>
void* create_op(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  return shape_create(api, node, error, size, kOp);
}

void shape_destroy(void* state) { delete static_cast<ShapeKernel*>(state); }

// Reads a 1-D (or scalar) int64 tensor of axes or dims.
bool read_int64s(const ShapeKernel& k, olc_context* ctx, const olc_tensor& t, const char* what,
                 std::vector<int64_t>* out) {
  if (t.dtype != OLC_DTYPE_INT64) {
    k.api->set_error(ctx, (std::string("input '") + what + "' must be int64, got " + olc_dtype_name(t.dtype)).c_str());
    return false;
  }
  if (t.ndim > 1) {
    k.api->set_error(ctx, (std::string("input '") + what + "' must be 1-D, got rank " + std::to_string(t.ndim)).c_str());
    return false;
  }
  const int64_t n = olc_element_count(&t);
  const int64_t* p = static_cast<const int64_t*>(t.data);
  out->assign(p, p + n);
  return true;
}

// Axes normalized into [0, rank): negative ones count from the end; out of
// range or repeated axes are an error.
bool normalize_axes(const ShapeKernel& k, olc_context* ctx, std::vector<int64_t>* axes, int64_t rank) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& a : *axes) {
    const int64_t given = a;
    if (a < -rank || a >= rank) {
      k.api->set_error(ctx, ("axis " + std::to_string(given) + " is out of range for rank " +
                             std::to_string(rank)).c_str());
      return false;
    }
    if (a < 0) a += rank;
    if (seen[static_cast<size_t>(a)]) {
      k.api->set_error(ctx, ("axis " + std::to_string(given) + " is given twice").c_str());
      return false;
    }
    seen[static_cast<size_t>(a)] = true;
  }
  return true;
}

int32_t run_reshape(const ShapeKernel& k, olc_context* ctx, int32_t n_inputs, const olc_tensor* in) {
  if (n_inputs < 2 || in[1].dtype == OLC_DTYPE_UNDEFINED) return k.api->set_error(ctx, "input 'shape' is required");
  std::vector<int64_t> dims;
  if (!read_int64s(k, ctx, in[1], "shape", &dims)) return OLC_ERROR;
  const olc_tensor& x = in[0];
  const int64_t total = olc_element_count(&x);
  int64_t inferred = -1;
  int64_t known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d == -1) {
      if (inferred >= 0) return k.api->set_error(ctx, ("shape " + dims_str(dims.data(), dims.size()) +
                                                       " has more than one -1").c_str());
      inferred = static_cast<int64_t>(i);
      continue;
    }
    if (d == 0 && !k.allowzero) {
      if (static_cast<int64_t>(i) >= x.ndim)
        return k.api->set_error(ctx, ("shape " + dims_str(dims.data(), dims.size()) + " copies dimension " +
                                      std::to_string(i) + " (0), but the input " +
                                      dims_str(x.shape, x.ndim) + " has rank " + std::to_string(x.ndim)).c_str());
      d = x.shape[i];
      dims[i] = d;
    } else if (d < 0) {
      return k.api->set_error(ctx, ("shape " + dims_str(dims.data(), dims.size()) + " has a negative dimension").c_str());
    }
    has_zero |= d == 0;
    if (__builtin_mul_overflow(known, d, &known))
      return k.api->set_error(ctx, ("shape " + dims_str(dims.data(), dims.size()) + " overflows").c_str());
  }
  if (inferred >= 0) {
    if (k.allowzero && has_zero)
      return k.api->set_error(ctx, "allowzero=1 forbids a -1 beside a 0 in the shape");
    if (known == 0 || total % known != 0)
      return k.api->set_error(ctx, ("cannot reshape " + dims_str(x.shape, x.ndim) + " (" + std::to_string(total) +
                                    " elements) to " + dims_str(dims.data(), dims.size())).c_str());
    dims[static_cast<size_t>(inferred)] = total / known;
  } else if (known != total) {
    return k.api->set_error(ctx, ("cannot reshape " + dims_str(x.shape, x.ndim) + " (" + std::to_string(total) +
                                  " elements) to " + dims_str(dims.data(), dims.size()) + " (" +
                                  std::to_string(known) + " elements)").c_str());
  }
  return k.api->view_output(ctx, 0, 0, static_cast<int32_t>(dims.size()), dims.data());
}

int32_t run_flatten(const ShapeKernel& k, olc_context* ctx, const olc_tensor& x) {
  int64_t axis = k.axis;
  if (axis < -x.ndim || axis > x.ndim)
    return k.api->set_error(ctx, ("axis " + std::to_string(axis) + " is out of range for rank " +
                                  std::to_string(x.ndim)).c_str());
  if (axis < 0) axis += x.ndim;
  int64_t dims[2] = {1, 1};
  for (int32_t d = 0; d < x.ndim; ++d) dims[d < axis ? 0 : 1] *= x.shape[d];
  return k.api->view_output(ctx, 0, 0, 2, dims);
}

int32_t run_squeeze(const ShapeKernel& k, olc_context* ctx, int32_t n_inputs, const olc_tensor* in) {
  const olc_tensor& x = in[0];
  std::vector<int64_t> axes = k.axes;
  bool given = k.has_axes_attr;
  if (k.opset >= 13 && n_inputs >= 2 && in[1].dtype != OLC_DTYPE_UNDEFINED) {
    if (!read_int64s(k, ctx, in[1], "axes", &axes)) return OLC_ERROR;
    given = true;
  }
  std::vector<bool> drop(static_cast<size_t>(x.ndim), false);
  if (given) {
    if (!normalize_axes(k, ctx, &axes, x.ndim)) return OLC_ERROR;
    for (int64_t a : axes) {
      if (x.shape[a] != 1)
        return k.api->set_error(ctx, ("cannot squeeze axis " + std::to_string(a) + " of " +
                                      dims_str(x.shape, x.ndim) + ": its size is not 1").c_str());
      drop[static_cast<size_t>(a)] = true;
    }
  } else {
    for (int32_t d = 0; d < x.ndim; ++d) drop[static_cast<size_t>(d)] = x.shape[d] == 1;
  }
  std::vector<int64_t> dims;
  for (int32_t d = 0; d < x.ndim; ++d)
    if (!drop[static_cast<size_t>(d)]) dims.push_back(x.shape[d]);
  return k.api->view_output(ctx, 0, 0, static_cast<int32_t>(dims.size()), dims.data());
}

int32_t run_unsqueeze(const ShapeKernel& k, olc_context* ctx, int32_t n_inputs, const olc_tensor* in) {
  const olc_tensor& x = in[0];
  std::vector<int64_t> axes = k.axes;
  if (k.opset >= 13) {
    if (n_inputs < 2 || in[1].dtype == OLC_DTYPE_UNDEFINED) return k.api->set_error(ctx, "input 'axes' is required");
    if (!read_int64s(k, ctx, in[1], "axes", &axes)) return OLC_ERROR;
  }
  const int64_t rank = x.ndim + static_cast<int64_t>(axes.size());
  if (!normalize_axes(k, ctx, &axes, rank)) return OLC_ERROR;
  std::vector<int64_t> dims(static_cast<size_t>(rank), 0);
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : axes) inserted[static_cast<size_t>(a)] = true;
  int32_t src = 0;
  for (int64_t d = 0; d < rank; ++d) dims[static_cast<size_t>(d)] = inserted[static_cast<size_t>(d)] ? 1 : x.shape[src++];
  return k.api->view_output(ctx, 0, 0, static_cast<int32_t>(rank), dims.data());
}

int32_t run_dropout(const ShapeKernel& k, olc_context* ctx, int32_t n_inputs, const olc_tensor* in,
                    int32_t n_outputs) {
  // Inference: the output is the input. Training mode draws a random mask,
  // which olc does not do (the registration declines such nodes).
  if (n_inputs >= 3 && in[2].dtype != OLC_DTYPE_UNDEFINED) {
    if (in[2].dtype != OLC_DTYPE_BOOL || olc_element_count(&in[2]) != 1)
      return k.api->set_error(ctx, "input 'training_mode' must be a bool scalar");
    if (*static_cast<const uint8_t*>(in[2].data) != 0)
      return k.api->set_error(ctx, "training_mode=true is not supported (inference only)");
  }
  const olc_tensor& x = in[0];
  if (k.api->view_output(ctx, 0, 0, x.ndim, x.shape) != OLC_OK) return OLC_ERROR;
  if (n_outputs >= 2) {
    auto* mask = static_cast<uint8_t*>(k.api->allocate_output(ctx, 1, OLC_DTYPE_BOOL, x.ndim, x.shape));
    const int64_t n = olc_element_count(&x);
    if (!mask && n > 0) return OLC_ERROR;
    if (n > 0) std::memset(mask, 1, static_cast<size_t>(n));
  }
  return OLC_OK;
}

int32_t run_shape(const ShapeKernel& k, olc_context* ctx, const olc_tensor& x) {
  const int64_t r = x.ndim;
  auto clamp = [r](int64_t v) { return v < 0 ? (v + r < 0 ? 0 : v + r) : (v > r ? r : v); };
  const int64_t b = clamp(k.start);
  const int64_t e = k.has_end ? clamp(k.end) : r;
  const int64_t n = e > b ? e - b : 0;
  auto* y = static_cast<int64_t*>(k.api->allocate_output(ctx, 0, OLC_DTYPE_INT64, 1, &n));
  if (!y) return OLC_ERROR;
  for (int64_t i = 0; i < n; ++i) y[i] = x.shape[b + i];
  return OLC_OK;
}

int32_t run_size(const ShapeKernel& k, olc_context* ctx, const olc_tensor& x) {
  auto* y = static_cast<int64_t*>(k.api->allocate_output(ctx, 0, OLC_DTYPE_INT64, 0, nullptr));
  if (!y) return OLC_ERROR;
  *y = olc_element_count(&x);
  return OLC_OK;
}

int32_t shape_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* in, int32_t n_outputs) {
  const auto& k = *static_cast<const ShapeKernel*>(state);
  if (n_inputs < 1 || in[0].dtype == OLC_DTYPE_UNDEFINED) return k.api->set_error(ctx, "input 0 is required");
  if (olc_element_count(&in[0]) < 0) return k.api->set_error(ctx, "input 0 has an invalid shape");
  switch (k.op) {
    case ShapeOp::kReshape: return run_reshape(k, ctx, n_inputs, in);
    case ShapeOp::kFlatten: return run_flatten(k, ctx, in[0]);
    case ShapeOp::kSqueeze: return run_squeeze(k, ctx, n_inputs, in);
    case ShapeOp::kUnsqueeze: return run_unsqueeze(k, ctx, n_inputs, in);
    case ShapeOp::kIdentity: return k.api->view_output(ctx, 0, 0, in[0].ndim, in[0].shape);
    case ShapeOp::kDropout: return run_dropout(k, ctx, n_inputs, in, n_outputs);
    case ShapeOp::kShape: return run_shape(k, ctx, in[0]);
    case ShapeOp::kSize: return run_size(k, ctx, in[0]);
  }
  return k.api->set_error(ctx, "unknown shape op");
}

#define OLC_SHAPE_VTABLE(NAME, OP) \
  {OLC_ABI_VERSION, 0, "olc_core::" NAME, create_op<ShapeOp::OP>, shape_run, shape_destroy}

const olc_kernel_vtable kVtables[] = {
    OLC_SHAPE_VTABLE("Reshape", kReshape),     OLC_SHAPE_VTABLE("Flatten", kFlatten),
    OLC_SHAPE_VTABLE("Squeeze", kSqueeze),     OLC_SHAPE_VTABLE("Unsqueeze", kUnsqueeze),
    OLC_SHAPE_VTABLE("Identity", kIdentity),   OLC_SHAPE_VTABLE("Dropout", kDropout),
    OLC_SHAPE_VTABLE("Shape", kShape),         OLC_SHAPE_VTABLE("Size", kSize),
};

}  // namespace

const olc_kernel_vtable* shape_kernel_vtable(const std::string& op) {
  const std::string name = "olc_core::" + op;
  for (const auto& vt : kVtables)
    if (name == vt.name) return &vt;
  return nullptr;
}

}  // namespace olc
