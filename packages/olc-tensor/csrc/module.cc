// The olc_tensor._ext module: imports olc-core's API table at init and
// hands out one kernel vtable capsule per operator.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "olc/python_api.h"
#include "cast_kernels.h"
#include "registry.h"

namespace py = pybind11;

PYBIND11_MODULE(_ext, m) {
  m.doc() = "olc tensor kernels (data movement, Cast): vtables for olc-core";
  try {
    py::module_::import("olc_core._native");
  } catch (py::error_already_set& e) {
    throw py::import_error(std::string("olc_tensor: cannot import olc-core's native module olc_core._native: ") +
                           e.what());
  }
  const olc_core_api* api = olc_import_core_api();
  if (!api) throw py::error_already_set();
  if (api->api_size < offsetof(olc_core_api, record_usage_detail) + sizeof(api->record_usage_detail)) {
    throw py::import_error("olc_tensor: the installed olc-core API table is too small (api_size " +
                           std::to_string(api->api_size) + "); upgrade olc-core");
  }
  olc_tn::g_api = api;
  olc_tn::register_all();

  m.def(
      "vtable",
      [](const std::string& op_type) {
        const olc_kernel_vtable* vt = olc_tn::vtable_of(op_type);
        if (!vt) throw py::key_error("olc_tensor has no kernel for op " + op_type);
        return py::reinterpret_steal<py::object>(olc_kernel_capsule(vt));
      },
      py::arg("op_type"), "The kernel vtable capsule of op_type (a KernelRegistration factory).");
  m.def("ops", &olc_tn::op_names, "Operators with a kernel in this extension.");
  m.def("cast_isa", &olc_tn::cast_isa_name, py::arg("src_dtype"), py::arg("dst_dtype"),
        "The ISA variant Cast would choose now for (src, dst) ONNX dtype codes.");
}
