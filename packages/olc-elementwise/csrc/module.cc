// The olc_elementwise._ext module: imports olc-core's API table at init and
// hands out one kernel vtable capsule per operator.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "olc/python_api.h"
#include "binary_adapter.h"
#include "fused_adapter.h"
#include "unary_adapter.h"

namespace py = pybind11;

namespace {

// The defaults this host's caches give (streaming and split thresholds,
// float32 at the level in force), declared at import so that `olc info`
// lists them before any session exists: a kernel of a memory-bound unary
// op (Relu) and one of a binary op (Add) created and destroyed once. Every
// kernel declares its own keys with the same rule when a session creates it.
void declare_host_defaults(const olc_core_api* api) {
  for (const char* op : {"Relu", "Add"}) {
    const olc_kernel_vtable* unary = olc_ew::unary_vtable(op);
    const olc_kernel_vtable* vt = unary ? unary : olc_ew::nary_vtable(op);
    if (!vt) continue;
    const int32_t n_in = unary ? 1 : 2;
    const int32_t in_dtypes[2] = {OLC_DTYPE_FLOAT, OLC_DTYPE_FLOAT};
    const int32_t in_ranks[2] = {-1, -1};
    const int32_t out_dtypes[1] = {OLC_DTYPE_UNDEFINED};
    const olc_node_info node = {"host_defaults", "ai.onnx", op, 17, n_in, in_dtypes, in_ranks,
                                1, out_dtypes, 0, nullptr, nullptr};
    char error[256];
    if (void* state = vt->create(api, &node, error, sizeof error)) vt->destroy(state);
  }
}

}  // namespace

PYBIND11_MODULE(_ext, m) {
  m.doc() = "olc elementwise kernels (unary ops): vtables for olc-core";

  // Import core's native module first so a failure keeps its real reason
  // (olc_import_core_api() reports only that the capsule is missing).
  try {
    py::module_::import("olc_core._native");
  } catch (py::error_already_set& e) {
    throw py::import_error(std::string("olc_elementwise: cannot import olc-core's native module "
                                       "olc_core._native: ") + e.what());
  }
  const olc_core_api* api = olc_import_core_api();
  if (!api) throw py::error_already_set();
  if (api->api_size < offsetof(olc_core_api, record_usage_detail) + sizeof(api->record_usage_detail)) {
    throw py::import_error("olc_elementwise: the installed olc-core API table is too small (api_size " +
                           std::to_string(api->api_size) + "); upgrade olc-core");
  }
  olc_ew::set_core_api(api);
  olc_ew::set_fused_core_api(api);
  olc_ew::set_nary_core_api(api);
  declare_host_defaults(api);

  m.def(
      "vtable",
      [](const std::string& op_type) {
        const olc_kernel_vtable* vt = olc_ew::unary_vtable(op_type);
        if (!vt) vt = olc_ew::nary_vtable(op_type);
        if (!vt) throw py::key_error("olc_elementwise has no kernel for op " + op_type);
        return py::reinterpret_steal<py::object>(olc_kernel_capsule(vt));
      },
      py::arg("op_type"), "The kernel vtable capsule of op_type (a KernelRegistration factory).");
  m.def("ops", &olc_ew::unary_op_names, "Operators with a kernel in this extension.");
  m.def("nary_ops", &olc_ew::nary_op_names,
        "Binary, variadic, Where, Clip and SwiGLU operators with a kernel in this extension.");
  m.def(
      "fused_vtable",
      []() { return py::reinterpret_steal<py::object>(olc_kernel_capsule(olc_ew::fused_vtable())); },
      "The vtable capsule of the fused elementwise kernel (olc.fused::ElementwisePlan).");
  m.def("fused_ops", &olc_ew::fused_op_names, "Step op names a fused elementwise program may use.");
  m.def(
      "attribute_defaults",
      [](const std::string& op_type) {
        py::dict d;
        for (const auto& a : olc_ew::unary_attribute_defaults(op_type)) {
          if (a.type == OLC_ATTR_FLOAT) d[py::str(a.name)] = a.f;
          else if (a.type == OLC_ATTR_INT) d[py::str(a.name)] = a.i;
          else d[py::str(a.name)] = a.s;
        }
        return d;
      },
      py::arg("op_type"), "Attribute defaults the kernel applies when a node omits them.");
}
