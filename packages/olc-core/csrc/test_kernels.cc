// Kernels built into olc-core for its own tests: they exercise the ABI, the
// run loop and the executor without any family installed. Never registered
// by default; tests register them through an in-process plugin.
#include <pybind11/pybind11.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "olc/python_api.h"

namespace {

namespace py = pybind11;

struct ScaleState {
  const olc_core_api* api;
  float factor;
  int64_t grain;
};

struct ScaleJob {
  const float* x;
  float* y;
  float factor;
};

// y = factor * x over float32; the parallel path splits by `grain` elements.
void* scale_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  if (node->n_inputs != 1 || node->n_outputs != 1) {
    std::snprintf(error, size, "expects 1 input and 1 output");
    return nullptr;
  }
  float factor = -1.0f;
  for (int32_t i = 0; i < node->n_attributes; ++i) {
    const olc_attribute& a = node->attributes[i];
    if (std::strcmp(a.name, "factor") == 0) {
      if (a.type != OLC_ATTR_FLOAT) {
        std::snprintf(error, size, "attribute 'factor' must be a float");
        return nullptr;
      }
      factor = static_cast<float>(a.f);
    }
  }
  return new ScaleState{api, factor, 4096};
}

int32_t scale_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs,
                  int32_t n_outputs) {
  auto* s = static_cast<const ScaleState*>(state);
  const olc_tensor& x = inputs[0];
  if (x.dtype != OLC_DTYPE_FLOAT) return s->api->set_error(ctx, "input 0 must be float32");
  const int64_t n = olc_element_count(&x);
  if (n < 0) return s->api->set_error(ctx, "input 0 has an invalid shape");
  auto* y = static_cast<float*>(s->api->allocate_output(ctx, 0, OLC_DTYPE_FLOAT, x.ndim, x.shape));
  if (!y) return OLC_ERROR;
  ScaleJob job{static_cast<const float*>(x.data), y, s->factor};
  s->api->parallel_for(ctx, n, s->grain, 0, [](void* user, int64_t b, int64_t e) {
    auto* j = static_cast<ScaleJob*>(user);
    for (int64_t i = b; i < e; ++i) j->y[i] = j->factor * j->x[i];
  }, &job);
  s->api->record_usage_detail(ctx, "scalar");
  return OLC_OK;
}

void scale_destroy(void* state) { delete static_cast<ScaleState*>(state); }

const olc_kernel_vtable kScaleVtable = {OLC_ABI_VERSION, OLC_KERNEL_INPLACE_INPUT0, "olc_core_test::Scale",
                                        scale_create, scale_run, scale_destroy};

// Always fails at run time after validation: checks error propagation.
int32_t fail_run(const void* state, olc_context* ctx, int32_t, const olc_tensor*, int32_t) {
  return static_cast<const ScaleState*>(state)->api->set_error(ctx, "deliberate failure for tests");
}
const olc_kernel_vtable kFailVtable = {OLC_ABI_VERSION, 0, "olc_core_test::Fail", scale_create, fail_run,
                                       scale_destroy};

// Built for another ABI version: must be refused with a clear error.
const olc_kernel_vtable kWrongAbiVtable = {OLC_ABI_VERSION + 100, 0, "olc_core_test::WrongAbi", scale_create,
                                           scale_run, scale_destroy};

// y = x + sum(constant input 1), the sum taken once in create(): checks that
// constant inputs reach create() and that dynamic ones are reported absent.
void* addsum_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  if (node->n_inputs != 2 || node->n_outputs != 1) {
    std::snprintf(error, size, "expects 2 inputs and 1 output");
    return nullptr;
  }
  const olc_tensor& c = node->input_constants[1];
  if (!c.data || c.dtype != OLC_DTYPE_FLOAT) {
    std::snprintf(error, size, "input 1 must be a float32 initializer");
    return nullptr;
  }
  if (node->input_constants[0].data) {
    std::snprintf(error, size, "input 0 is reported constant but is a graph input");
    return nullptr;
  }
  const int64_t n = olc_element_count(&c);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<const float*>(c.data)[i];
  // The "packed" form of the constant is its sum, keyed by the constant's
  // data: two nodes summing one initializer share it.
  if (OLC_API_HAS(api, report_prepacked)) api->report_prepacked(node, c.data, sizeof(float));
  return new ScaleState{api, sum, 4096};
}

int32_t addsum_run(const void* state, olc_context* ctx, int32_t, const olc_tensor* inputs, int32_t) {
  auto* s = static_cast<const ScaleState*>(state);
  const olc_tensor& x = inputs[0];
  if (x.dtype != OLC_DTYPE_FLOAT) return s->api->set_error(ctx, "input 0 must be float32");
  const int64_t n = olc_element_count(&x);
  if (n < 0) return s->api->set_error(ctx, "input 0 has an invalid shape");
  auto* y = static_cast<float*>(s->api->allocate_output(ctx, 0, OLC_DTYPE_FLOAT, x.ndim, x.shape));
  if (!y) return OLC_ERROR;
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<const float*>(x.data)[i] + s->factor;
  return OLC_OK;
}

const olc_kernel_vtable kAddSumVtable = {OLC_ABI_VERSION, 0, "olc_core_test::AddSum", addsum_create, addsum_run,
                                         scale_destroy};

// y = x for any type with an element size (a dtype-agnostic byte copy);
// records "<dtype name>:<element size>" as its usage detail, so tests see
// what the header helpers say about the dtype that reached the kernel.
void* copy_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  if (node->n_inputs != 1 || node->n_outputs != 1) {
    std::snprintf(error, size, "expects 1 input and 1 output");
    return nullptr;
  }
  if (olc_dtype_size(node->input_dtypes[0]) == 0) {
    std::snprintf(error, size, "input 0 has type %s, which has no element size",
                  olc_dtype_name(node->input_dtypes[0]));
    return nullptr;
  }
  return new ScaleState{api, 1.0f, 0};
}

int32_t copy_run(const void* state, olc_context* ctx, int32_t, const olc_tensor* inputs, int32_t) {
  auto* s = static_cast<const ScaleState*>(state);
  const olc_tensor& x = inputs[0];
  const size_t elem = olc_dtype_size(x.dtype);
  const int64_t n = olc_element_count(&x);
  if (elem == 0 || n < 0) return s->api->set_error(ctx, "input 0 has no element size or an invalid shape");
  void* y = s->api->allocate_output(ctx, 0, x.dtype, x.ndim, x.shape);
  if (!y && n > 0) return OLC_ERROR;
  if (n > 0) std::memcpy(y, x.data, static_cast<size_t>(n) * elem);
  const std::string detail = std::string(olc_dtype_name(x.dtype)) + ":" + std::to_string(elem);
  s->api->record_usage_detail(ctx, detail.c_str());
  return OLC_OK;
}

const olc_kernel_vtable kCopyVtable = {OLC_ABI_VERSION, 0, "olc_core_test::Copy", copy_create, copy_run,
                                       scale_destroy};

// Outputs every INTS attribute's values (int64, output 0) and every FLOATS
// attribute's (float64, output 1), concatenated in attribute order: checks
// that repeated attributes reach create() whole and exact.
struct AttrsState {
  const olc_core_api* api;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

void* attrs_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  if (node->n_outputs != 2) {
    std::snprintf(error, size, "expects 2 outputs");
    return nullptr;
  }
  auto* st = new AttrsState{api, {}, {}};
  for (int32_t i = 0; i < node->n_attributes; ++i) {
    const olc_attribute& a = node->attributes[i];
    if (a.type == OLC_ATTR_INTS) st->ints.insert(st->ints.end(), a.ints, a.ints + a.count);
    if (a.type == OLC_ATTR_FLOATS) st->floats.insert(st->floats.end(), a.floats, a.floats + a.count);
  }
  return st;
}

int32_t attrs_run(const void* state, olc_context* ctx, int32_t, const olc_tensor*, int32_t) {
  auto* s = static_cast<const AttrsState*>(state);
  const int64_t ni = static_cast<int64_t>(s->ints.size()), nf = static_cast<int64_t>(s->floats.size());
  void* yi = s->api->allocate_output(ctx, 0, OLC_DTYPE_INT64, 1, &ni);
  void* yf = s->api->allocate_output(ctx, 1, OLC_DTYPE_DOUBLE, 1, &nf);
  if ((!yi && ni) || (!yf && nf)) return OLC_ERROR;
  if (ni) std::memcpy(yi, s->ints.data(), s->ints.size() * sizeof(int64_t));
  if (nf) std::memcpy(yf, s->floats.data(), s->floats.size() * sizeof(double));
  return OLC_OK;
}

void attrs_destroy(void* state) { delete static_cast<AttrsState*>(state); }

const olc_kernel_vtable kAttrsVtable = {OLC_ABI_VERSION, 0, "olc_core_test::Attrs", attrs_create, attrs_run,
                                        attrs_destroy};

}  // namespace

namespace olc {
void bind_test_kernels(py::module_& m) {
  m.def("_test_vtable", [](const std::string& which) -> py::object {
    const olc_kernel_vtable* vt = which == "scale"  ? &kScaleVtable
                                  : which == "fail" ? &kFailVtable
                                  : which == "wrong_abi" ? &kWrongAbiVtable
                                  : which == "add_sum"   ? &kAddSumVtable
                                  : which == "copy"      ? &kCopyVtable
                                  : which == "attrs"     ? &kAttrsVtable
                                                         : nullptr;
    if (!vt) throw std::invalid_argument("unknown test kernel " + which);
    return py::reinterpret_steal<py::object>(olc_kernel_capsule(vt));
  });
  // The ABI header's helpers for one dtype code: (name, element size).
  m.def("_dtype_info", [](int32_t code) {
    return py::make_tuple(std::string(olc_dtype_name(code)), olc_dtype_size(code));
  });
}
}  // namespace olc
