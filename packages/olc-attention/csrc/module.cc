// The olc_attention._ext module: imports olc-core's API table at init and
// hands out the kernel vtable capsules (optimized and naive).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "adapter_util.h"
#include "olc/python_api.h"

namespace py = pybind11;

PYBIND11_MODULE(_ext, m) {
  m.doc() = "olc attention kernels (Attention, GroupQueryAttention, RotaryEmbedding, ...): vtables for olc-core";
  try {
    py::module_::import("olc_core._native");
  } catch (py::error_already_set& e) {
    throw py::import_error(std::string("olc_attention: cannot import olc-core's native module olc_core._native: ") +
                           e.what());
  }
  const olc_core_api* api = olc_import_core_api();
  if (!api) throw py::error_already_set();
  if (!OLC_API_HAS(api, record_usage_detail)) {
    throw py::import_error("olc_attention: the installed olc-core API table is too small (api_size " +
                           std::to_string(api->api_size) + "); upgrade olc-core");
  }
  olc_attn::set_core_api(api);
  m.def(
      "vtable",
      [](const std::string& domain, const std::string& op_type, bool naive) {
        const olc_kernel_vtable* vt = olc_attn::vtable(domain, op_type, naive);
        if (!vt) throw py::key_error("olc_attention has no kernel for " + domain + "::" + op_type);
        return py::reinterpret_steal<py::object>(olc_kernel_capsule(vt));
      },
      py::arg("domain"), py::arg("op_type"), py::arg("naive") = false,
      "The kernel vtable capsule of domain::op_type (naive: the plain reference kernel).");
  m.def("ops", &olc_attn::op_names, "Operators with a kernel in this extension, as domain::op.");
}
