// The olc_ml._ext module: imports olc-core's API table at init and hands out
// one kernel vtable capsule per operator.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string_view>

#include "half.h"
#include "ml_adapter.h"
#include "olc/python_api.h"

namespace py = pybind11;

namespace {

olc_ml::VtableTable g_vtables;

// Reads a protobuf varint at p (< end); false when it runs past end.
bool read_varint(const uint8_t*& p, const uint8_t* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t b = *p++;
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// The `strings` (field 9) of a serialized onnx.AttributeProto, each as the
// index of the equal entry of `names` or -1: a STRINGS attribute of
// millions of entries without a Python object per entry.
py::array_t<int64_t> string_codes(const py::bytes& serialized, const std::vector<std::string>& names) {
  const std::string_view data = serialized;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(data.data());
  const uint8_t* end = p + data.size();
  std::vector<int64_t> codes;
  while (p < end) {
    uint64_t tag = 0, len = 0;
    if (!read_varint(p, end, &tag)) throw py::value_error("malformed attribute");
    switch (tag & 7) {
      case 0:
        if (!read_varint(p, end, &len)) throw py::value_error("malformed attribute");
        break;
      case 1: p += 8; break;
      case 5: p += 4; break;
      case 2: {
        if (!read_varint(p, end, &len) || len > static_cast<uint64_t>(end - p))
          throw py::value_error("malformed attribute");
        if ((tag >> 3) == 9) {
          const std::string_view s(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
          int64_t code = -1;
          for (size_t k = 0; k < names.size(); ++k)
            if (s == names[k]) code = static_cast<int64_t>(k);
          codes.push_back(code);
        }
        p += len;
        break;
      }
      default: throw py::value_error("malformed attribute");
    }
  }
  if (p != end) throw py::value_error("malformed attribute");
  py::array_t<int64_t> out(static_cast<py::ssize_t>(codes.size()));
  if (!codes.empty()) std::memcpy(out.mutable_data(), codes.data(), codes.size() * sizeof(int64_t));
  return out;
}

// ZipMap's output: row r of x [rows, n] (a 1-D x is one row) as the dict
// {keys[k]: x[r, columns[k]]}, built through the C API (a Python
// comprehension costs several times more per row). Made once per node;
// called with the GIL held (a Python kernel).
class ZipRows {
 public:
  ZipRows(py::list keys, std::vector<int64_t> columns) : keys_(std::move(keys)), columns_(std::move(columns)) {
    const int64_t n = static_cast<int64_t>(keys_.size());
    if (static_cast<int64_t>(columns_.size()) != n) throw py::value_error("one column per key");
    for (int64_t c : columns_)
      if (c < 0 || c >= n) throw py::value_error("column out of range");
  }

  py::list operator()(const py::array_t<float, py::array::c_style | py::array::forcecast>& x) const {
    const int64_t n = static_cast<int64_t>(keys_.size());
    if (x.ndim() != 1 && x.ndim() != 2)
      throw py::value_error("ZipMap takes a 1-D or 2-D input, got rank " + std::to_string(x.ndim()));
    const int64_t width = x.shape(x.ndim() - 1);
    if (width != n)
      throw py::value_error("the input has " + std::to_string(width) + " scores per row for " + std::to_string(n) +
                            " class labels");
    const int64_t rows = x.ndim() == 1 ? 1 : x.shape(0);
    const float* data = x.data();
    py::list out(rows);
    for (int64_t r = 0; r < rows; ++r) {
      PyObject* d = PyDict_New();
      if (!d) throw py::error_already_set();
      PyList_SET_ITEM(out.ptr(), r, d);  // the list owns it from here
      const float* row = data + r * n;
      for (int64_t k = 0; k < n; ++k) {
        PyObject* v = PyFloat_FromDouble(static_cast<double>(row[columns_[static_cast<size_t>(k)]]));
        if (!v) throw py::error_already_set();
        const int rc = PyDict_SetItem(d, PyList_GET_ITEM(keys_.ptr(), k), v);
        Py_DECREF(v);
        if (rc != 0) throw py::error_already_set();
      }
    }
    return out;
  }

 private:
  py::list keys_;
  std::vector<int64_t> columns_;
};

}  // namespace

PYBIND11_MODULE(_ext, m) {
  m.doc() = "olc ai.onnx.ml kernels: vtables for olc-core";
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
  olc_ml::register_tree_kernels(api, &g_vtables);
  olc_ml::register_linear_kernels(api, &g_vtables);
  olc_ml::register_preprocess_kernels(api, &g_vtables);

  m.def(
      "vtable",
      [](const std::string& op_type) {
        auto it = g_vtables.find(op_type);
        if (it == g_vtables.end()) throw py::key_error("olc_ml has no native kernel for op " + op_type);
        return py::reinterpret_steal<py::object>(olc_kernel_capsule(it->second));
      },
      py::arg("op_type"), "The kernel vtable capsule of op_type (a KernelRegistration factory).");
  m.def(
      "ops",
      [] {
        std::vector<std::string> names;
        for (const auto& kv : g_vtables) names.push_back(kv.first);
        return names;
      },
      "Operators with a native kernel in this extension.");
  py::class_<ZipRows>(m, "ZipRows", "ZipMap's rows as dicts {keys[k]: row[columns[k]]}.")
      .def(py::init<py::list, std::vector<int64_t>>(), py::arg("keys"), py::arg("columns"))
      .def("__call__", &ZipRows::operator(), py::arg("x"));
  m.def("string_codes", &string_codes, py::arg("serialized_attribute"), py::arg("names"),
        "The strings of a serialized STRINGS AttributeProto as indices into names (-1: not there).");
  // The float16 conversions the kernels use, for the tests.
  m.def("_float_to_half", [](py::array_t<float, py::array::c_style | py::array::forcecast> x) {
    py::array_t<uint16_t> y(x.size());
    olc_ml::float_to_half(x.data(), y.mutable_data(), x.size());
    return y;
  });
  m.def("_half_to_float", [](py::array_t<uint16_t, py::array::c_style | py::array::forcecast> x) {
    py::array_t<float> y(x.size());
    olc_ml::half_to_float(x.data(), y.mutable_data(), x.size());
    return y;
  });
}
