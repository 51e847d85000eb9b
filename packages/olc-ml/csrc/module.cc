// The olc_ml._ext module: imports olc-core's API table at init and hands out
// one kernel vtable capsule per operator.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <list>

#include "olc/python_api.h"
#include "tree_adapter.h"

namespace py = pybind11;

PYBIND11_MODULE(_ext, m) {
  m.doc() = "olc ai.onnx.ml kernels (TreeEnsembleRegressor, TreeEnsembleClassifier): vtables for olc-core";
  try {
    py::module_::import("olc_core._native");
  } catch (py::error_already_set& e) {
    throw py::import_error(std::string("olc_ml: cannot import olc-core's native module olc_core._native: ") +
                           e.what());
  }
  const olc_core_api* api = olc_import_core_api();
  if (!api) throw py::error_already_set();
  if (api->api_size < offsetof(olc_core_api, record_usage_detail) + sizeof(api->record_usage_detail)) {
    throw py::import_error("olc_ml: the installed olc-core API table is too small (api_size " +
                           std::to_string(api->api_size) + "); upgrade olc-core");
  }
  olc_ml::set_core_api(api);

  m.def(
      "vtable",
      [](const std::string& op_type) {
        const olc_kernel_vtable* vt = olc_ml::vtable(op_type);
        if (!vt) throw py::key_error("olc_ml has no kernel for op " + op_type);
        return py::reinterpret_steal<py::object>(olc_kernel_capsule(vt));
      },
      py::arg("op_type"), "The kernel vtable capsule of op_type (a KernelRegistration factory).");
  m.def("ops", &olc_ml::op_names, "Operators with a kernel in this extension.");
  m.def(
      "check_attributes",
      [](const std::string& op_type, const py::dict& attrs) {
        // name -> int | str | list[int] or integer array (INTS) | list[float] or float array (FLOATS),
        // as the ABI passes them.
        std::list<std::string> names, strings;
        std::list<std::vector<int64_t>> ints;
        std::list<std::vector<double>> floats;
        std::vector<olc_attribute> out;
        for (auto item : attrs) {
          olc_attribute a{};
          names.push_back(py::cast<std::string>(item.first));
          a.name = names.back().c_str();
          py::handle v = item.second;
          if (py::isinstance<py::str>(v)) {
            strings.push_back(py::cast<std::string>(v));
            a.type = OLC_ATTR_STRING;
            a.s = strings.back().c_str();
          } else if (py::isinstance<py::int_>(v)) {
            a.type = OLC_ATTR_INT;
            a.i = py::cast<int64_t>(v);
          } else if (py::isinstance<py::float_>(v)) {
            a.type = OLC_ATTR_FLOAT;
            a.f = py::cast<double>(v);
          } else if (py::isinstance<py::array>(v)) {
            py::array arr = py::reinterpret_borrow<py::array>(v);
            if (arr.dtype().kind() == 'f') {
              auto f = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(arr);
              floats.emplace_back(f.data(), f.data() + f.size());
              a.type = OLC_ATTR_FLOATS;
              a.count = static_cast<int64_t>(floats.back().size());
              a.floats = floats.back().data();
            } else {
              auto q = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
              ints.emplace_back(q.data(), q.data() + q.size());
              a.type = OLC_ATTR_INTS;
              a.count = static_cast<int64_t>(ints.back().size());
              a.ints = ints.back().data();
            }
          } else {
            py::list l = py::cast<py::list>(v);
            bool all_int = true;
            for (auto e : l) all_int = all_int && py::isinstance<py::int_>(e);
            if (all_int && l.size() > 0) {
              ints.push_back(py::cast<std::vector<int64_t>>(l));
              a.type = OLC_ATTR_INTS;
              a.count = static_cast<int64_t>(ints.back().size());
              a.ints = ints.back().data();
            } else {
              floats.push_back(py::cast<std::vector<double>>(l));
              a.type = l.size() == 0 ? OLC_ATTR_INTS : OLC_ATTR_FLOATS;
              a.count = static_cast<int64_t>(floats.back().size());
              a.floats = floats.back().data();
            }
          }
          out.push_back(a);
        }
        return olc_ml::check_attributes(op_type, out.data(), static_cast<int>(out.size()));
      },
      py::arg("op_type"), py::arg("attributes"),
      "Checks a restated node's attributes as create() would: '' or the reason.");
}
