// The olc_normalization._ext module: imports olc-core's API table at init
// and hands out one kernel vtable capsule per operator.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "norm_adapter.h"
#include "olc/python_api.h"

namespace py = pybind11;

PYBIND11_MODULE(_ext, m) {
  m.doc() = "olc normalization kernels (Softmax, LayerNormalization, ...): vtables for olc-core";

  // Import core's native module first so a failure keeps its real reason
  // (olc_import_core_api() reports only that the capsule is missing).
  try {
    py::module_::import("olc_core._native");
  } catch (py::error_already_set& e) {
    throw py::import_error(std::string("olc_normalization: cannot import olc-core's native module "
                                       "olc_core._native: ") + e.what());
  }
  const olc_core_api* api = olc_import_core_api();
  if (!api) throw py::error_already_set();
  if (api->api_size < offsetof(olc_core_api, record_usage_detail) + sizeof(api->record_usage_detail)) {
    throw py::import_error("olc_normalization: the installed olc-core API table is too small (api_size " +
                           std::to_string(api->api_size) + "); upgrade olc-core");
  }
  olc_norm::set_core_api(api);

  m.def(
      "vtable",
      [](const std::string& op_type) {
        const olc_kernel_vtable* vt = olc_norm::vtable(op_type);
        if (!vt) throw py::key_error("olc_normalization has no kernel for op " + op_type);
        return py::reinterpret_steal<py::object>(olc_kernel_capsule(vt));
      },
      py::arg("op_type"), "The kernel vtable capsule of op_type (a KernelRegistration factory).");
  m.def("ops", &olc_norm::op_names, "Operators with a kernel in this extension.");
  m.def(
      "engine_f32",
      [](const std::string& isa, const std::string& fn,
         py::array_t<float, py::array::c_style | py::array::forcecast> x) {
        const int64_t n = static_cast<int64_t>(x.size());
        const bool rows = fn.find("softmax") != std::string::npos;  // softmax, logsoftmax and their _f16 / _bf16
        py::array_t<float> y(rows ? n : 1);
        float second = 0.0f;
        bool ok;
        {
          py::gil_scoped_release release;
          ok = olc_norm::engine_f32(isa, fn, x.data(), y.mutable_data(), n, &second);
        }
        if (!ok) throw py::value_error("engine_f32: unknown or unavailable level/function, or empty row");
        return py::make_tuple(y, second);
      },
      py::arg("isa"), py::arg("fn"), py::arg("x"),
      "Runs one float32 row primitive of the row engine at one ISA level (for tests).");
  m.def(
      "engine_convert",
      [](const std::string& isa, const std::string& fn, py::array x) {
        const bool to_f32 = fn == "f16_to_f32" || fn == "bf16_to_f32";
        const int64_t n = static_cast<int64_t>(x.size());
        if (to_f32) {
          auto h = py::array_t<uint16_t, py::array::c_style | py::array::forcecast>::ensure(x);
          if (!h) throw py::value_error("engine_convert: expected uint16 bit patterns");
          py::array_t<float> f(n);
          if (!olc_norm::engine_convert(isa, fn, const_cast<uint16_t*>(h.data()), f.mutable_data(), n))
            throw py::value_error("engine_convert: unknown or unavailable level/function");
          return py::object(f);
        }
        auto f = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(x);
        if (!f) throw py::value_error("engine_convert: expected float32 values");
        py::array_t<uint16_t> h(n);
        if (!olc_norm::engine_convert(isa, fn, h.mutable_data(), const_cast<float*>(f.data()), n))
          throw py::value_error("engine_convert: unknown or unavailable level/function");
        return py::object(h);
      },
      py::arg("isa"), py::arg("fn"), py::arg("x"),
      "Runs one element conversion of one ISA level (for tests); 16-bit types as uint16 bit patterns.");
}
