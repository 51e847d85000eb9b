// Python module of the example plugin: imports olc-core's API table once and
// hands the kernel vtable to the plugin as a capsule.
#include <pybind11/pybind11.h>

#include "olc/python_api.h"
#include "scaled_softsign.h"

namespace py = pybind11;

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "Native kernels of olc-example-plugin";
  const olc_core_api* api = olc_import_core_api();
  if (api == nullptr) throw py::error_already_set();  // ImportError naming the ABI problem
  olc_example::scaled_softsign_init(api);
  m.attr("ABI_VERSION") = OLC_ABI_VERSION;
  m.def("scaled_softsign_vtable",
        []() { return py::reinterpret_steal<py::object>(olc_kernel_capsule(&olc_example::kScaledSoftsignVtable)); },
        "The olc_kernel_vtable capsule of olc_example::ScaledSoftsign");
}
