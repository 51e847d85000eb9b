// The tuning registry.
//
// Records live in a process-wide registry that is never destroyed (kernels
// in other extension modules may hold handles until interpreter exit), and
// each record is heap-allocated once and never moves, so handles stay valid.
// Every record keeps its value both as int64 and as double, updated together
// on each write, so read_int and read_float are each one relaxed load even
// when a caller reads a parameter with the other kind than it was declared
// with (first declaration wins; see tuning_declare_impl).

#include "tuning.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <Python.h>
#include <pybind11/pybind11.h>

enum class TuningKind : int32_t { kInt = 0, kFloat = 1 };

// Reads are promised to be one plain load, never a hidden lock.
static_assert(std::atomic<int64_t>::is_always_lock_free, "int64 atomics must be lock-free");
static_assert(std::atomic<double>::is_always_lock_free, "double atomics must be lock-free");

// Global scope: kernel_abi.h declares it as an opaque C struct.
struct olc_tuning_param {
  std::string library, kernel, implementation;
  int32_t dtype = 0;
  std::string name;
  TuningKind kind = TuningKind::kInt;
  int64_t default_int = 0;
  double default_float = 0.0;
  std::atomic<int64_t> int_value{0};
  std::atomic<double> float_value{0.0};
  std::atomic<bool> overridden{false};
};

namespace olc {
namespace {

namespace py = pybind11;

using Key = std::tuple<std::string, std::string, std::string, int32_t, std::string>;

struct Value {
  TuningKind kind = TuningKind::kInt;
  int64_t i = 0;
  double f = 0.0;
};

struct Registry {
  std::mutex mu;
  std::map<Key, std::unique_ptr<olc_tuning_param>> params;
  std::vector<olc_tuning_param*> order;  // declaration order, for listing
  std::map<Key, Value> pending;          // overrides set before the declare
  std::vector<std::string> errors;       // pending overrides that did not fit
};

Registry& registry() {
  static Registry* r = new Registry();  // intentionally leaked: see top
  return *r;
}

std::string str_or(const char* s, const char* fallback) {
  return s != nullptr ? std::string(s) : std::string(fallback);
}

// Clamped, so that a float override read through read_int is never UB.
int64_t to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

void store(olc_tuning_param* p, const Value& v) {
  if (v.kind == TuningKind::kInt) {
    p->float_value.store(static_cast<double>(v.i), std::memory_order_relaxed);
    p->int_value.store(v.i, std::memory_order_relaxed);
  } else {
    p->int_value.store(to_int(v.f), std::memory_order_relaxed);
    p->float_value.store(v.f, std::memory_order_relaxed);
  }
}

Value default_of(const olc_tuning_param* p) {
  Value v;
  v.kind = p->kind;
  v.i = p->default_int;
  v.f = p->default_float;
  return v;
}

const char* kind_name(TuningKind k) { return k == TuningKind::kInt ? "int" : "float"; }

std::string describe(const Key& k) {
  return std::get<0>(k) + "::" + std::get<1>(k) + "[" + std::get<2>(k) + ", dtype " +
         std::to_string(std::get<3>(k)) + "]." + std::get<4>(k);
}

// Converts `v` to a param of kind `kind`: an int fits a float param; a float
// fits an int param only when it is integral (a block size of 1.5 is a
// mistake, not something to round silently). Returns false when it does not.
bool coerce(const Value& v, TuningKind kind, Value* out) {
  out->kind = kind;
  if (kind == v.kind) {
    *out = v;
    return true;
  }
  if (kind == TuningKind::kFloat) {
    out->f = static_cast<double>(v.i);
    return true;
  }
  if (std::trunc(v.f) != v.f || std::fabs(v.f) >= 9.2233720368547758e18) return false;
  out->i = static_cast<int64_t>(v.f);
  return true;
}

// First declaration wins: a second declare of the same key returns the same
// handle even if it asks for another kind or default (the record keeps the
// first kind; reading it with the other read_* still works, see top).
olc_tuning_param* tuning_declare_impl(const char* library, const char* kernel,
                                      const char* implementation, int32_t dtype,
                                      const char* name, const Value& def) {
  Key key{str_or(library, ""), str_or(kernel, ""), str_or(implementation, "default"),
          dtype, str_or(name, "")};
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.params.find(key);
  if (it != r.params.end()) return it->second.get();

  auto p = std::make_unique<olc_tuning_param>();
  p->library = std::get<0>(key);
  p->kernel = std::get<1>(key);
  p->implementation = std::get<2>(key);
  p->dtype = dtype;
  p->name = std::get<4>(key);
  p->kind = def.kind;
  if (def.kind == TuningKind::kInt) {
    p->default_int = def.i;
    p->default_float = static_cast<double>(def.i);
  } else {
    p->default_float = def.f;
    p->default_int = to_int(def.f);
  }
  store(p.get(), default_of(p.get()));

  auto pit = r.pending.find(key);
  if (pit != r.pending.end()) {
    Value v;
    if (coerce(pit->second, p->kind, &v)) {
      store(p.get(), v);
      p->overridden.store(true, std::memory_order_relaxed);
    } else {
      // Cannot raise from a kernel's declare; keep it for tuning_errors().
      r.errors.push_back("pending override " + describe(key) + " = " +
                         std::to_string(pit->second.f) +
                         " ignored: the parameter was declared as int");
    }
    r.pending.erase(pit);
  }
  olc_tuning_param* raw = p.get();
  r.params.emplace(std::move(key), std::move(p));
  r.order.push_back(raw);
  return raw;
}

// ---- Python side -----------------------------------------------------------

Value value_from_py(const py::handle& obj) {
  Value v;
  if (PyBool_Check(obj.ptr())) {
    throw py::type_error("tuning value must be an int or a float, not bool");
  }
  if (PyLong_Check(obj.ptr())) {
    int overflow = 0;
    const long long i = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
    if (overflow != 0) throw py::value_error("tuning value does not fit in int64");
    v.kind = TuningKind::kInt;
    v.i = static_cast<int64_t>(i);
    return v;
  }
  if (PyFloat_Check(obj.ptr())) {
    v.kind = TuningKind::kFloat;
    v.f = PyFloat_AsDouble(obj.ptr());
    if (!std::isfinite(v.f)) throw py::value_error("tuning value must be finite");
    return v;
  }
  throw py::type_error(std::string("tuning value must be an int or a float, not ") +
                       Py_TYPE(obj.ptr())->tp_name);
}

py::object value_to_py(const Value& v) {
  if (v.kind == TuningKind::kInt) return py::int_(v.i);
  return py::float_(v.f);
}

Value current_of(const olc_tuning_param* p) {
  Value v;
  v.kind = p->kind;
  v.i = p->int_value.load(std::memory_order_relaxed);
  v.f = p->float_value.load(std::memory_order_relaxed);
  return v;
}

const char* dtype_name(int32_t code) {
  // onnx.TensorProto.DataType codes -> the names olc uses elsewhere.
  switch (code) {
    case 0: return "any";
    case 1: return "float32";
    case 2: return "uint8";
    case 3: return "int8";
    case 4: return "uint16";
    case 5: return "int16";
    case 6: return "int32";
    case 7: return "int64";
    case 8: return "string";
    case 9: return "bool";
    case 10: return "float16";
    case 11: return "float64";
    case 12: return "uint32";
    case 13: return "uint64";
    case 14: return "complex64";
    case 15: return "complex128";
    case 16: return "bfloat16";
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    case 23: return "float4e2m1";
    default: return nullptr;
  }
}

py::str dtype_str(int32_t code) {
  const char* n = dtype_name(code);
  return n != nullptr ? py::str(n) : py::str("dtype" + std::to_string(code));
}

py::dict key_dict(const Key& k) {
  py::dict d;
  d["library"] = std::get<0>(k);
  d["kernel"] = std::get<1>(k);
  d["implementation"] = std::get<2>(k);
  d["dtype"] = dtype_str(std::get<3>(k));
  d["dtype_code"] = std::get<3>(k);
  d["name"] = std::get<4>(k);
  return d;
}

py::list tuning_list() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  py::list out;
  for (const olc_tuning_param* p : r.order) {
    py::dict d = key_dict(Key{p->library, p->kernel, p->implementation, p->dtype, p->name});
    d["kind"] = kind_name(p->kind);
    d["default"] = value_to_py(default_of(p));
    d["value"] = value_to_py(current_of(p));
    d["overridden"] = p->overridden.load(std::memory_order_relaxed);
    out.append(std::move(d));
  }
  return out;
}

py::list tuning_pending() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  py::list out;
  for (const auto& kv : r.pending) {
    py::dict d = key_dict(kv.first);
    d["kind"] = kind_name(kv.second.kind);
    d["value"] = value_to_py(kv.second);
    out.append(std::move(d));
  }
  return out;
}

void tuning_set(const std::string& library, const std::string& kernel,
                const std::string& implementation, int32_t dtype, const std::string& name,
                const py::handle& value) {
  const Value v = value_from_py(value);
  Key key{library, kernel, implementation, dtype, name};
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.params.find(key);
  if (it == r.params.end()) {
    r.pending[key] = v;  // applied when a kernel declares it
    return;
  }
  olc_tuning_param* p = it->second.get();
  Value c;
  if (!coerce(v, p->kind, &c)) {
    throw py::type_error("tuning parameter " + describe(key) +
                         " is an int parameter; got a non-integral float");
  }
  store(p, c);
  p->overridden.store(true, std::memory_order_relaxed);
}

py::object tuning_get(const std::string& library, const std::string& kernel,
                      const std::string& implementation, int32_t dtype,
                      const std::string& name) {
  Key key{library, kernel, implementation, dtype, name};
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.params.find(key);
  if (it != r.params.end()) return value_to_py(current_of(it->second.get()));
  // Not declared yet: the value the kernel will get when it declares it.
  auto pit = r.pending.find(key);
  if (pit != r.pending.end()) return value_to_py(pit->second);
  throw py::key_error("no tuning parameter " + describe(key) +
                      " (declared parameters appear once their kernel is created)");
}

void reset_one(olc_tuning_param* p) {
  store(p, default_of(p));
  p->overridden.store(false, std::memory_order_relaxed);
}

}  // namespace

olc_tuning_param* tuning_declare_int(const char* library, const char* kernel,
                                     const char* implementation, int32_t dtype,
                                     const char* name, int64_t default_value) {
  Value v;
  v.kind = TuningKind::kInt;
  v.i = default_value;
  return tuning_declare_impl(library, kernel, implementation, dtype, name, v);
}

int64_t tuning_read_int(const olc_tuning_param* param) {
  return param->int_value.load(std::memory_order_relaxed);
}

olc_tuning_param* tuning_declare_float(const char* library, const char* kernel,
                                       const char* implementation, int32_t dtype,
                                       const char* name, double default_value) {
  Value v;
  v.kind = TuningKind::kFloat;
  v.f = default_value;
  return tuning_declare_impl(library, kernel, implementation, dtype, name, v);
}

double tuning_read_float(const olc_tuning_param* param) {
  return param->float_value.load(std::memory_order_relaxed);
}

void bind_tuning(pybind11::module_& m) {
  m.def("tuning_list", &tuning_list,
        "Declared tuning parameters, in declaration order, as dicts.");
  m.def("tuning_pending", &tuning_pending,
        "Overrides set for parameters that no kernel has declared yet.");
  m.def("tuning_set", &tuning_set, py::arg("library"), py::arg("kernel"),
        py::arg("implementation"), py::arg("dtype"), py::arg("name"), py::arg("value"),
        "Overrides a parameter (int or float). Kept pending until declared.");
  m.def("tuning_get", &tuning_get, py::arg("library"), py::arg("kernel"),
        py::arg("implementation"), py::arg("dtype"), py::arg("name"),
        "Current value of a declared parameter, or its pending override.");
  m.def(
      "tuning_reset",
      [] {
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.mu);
        for (olc_tuning_param* p : r.order) reset_one(p);
        r.pending.clear();
        r.errors.clear();
      },
      "Every parameter back to its default; pending overrides dropped.");
  m.def(
      "tuning_reset",
      [](const std::string& library, const std::string& kernel,
         const std::string& implementation, int32_t dtype, const std::string& name) {
        Key key{library, kernel, implementation, dtype, name};
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.mu);
        r.pending.erase(key);
        auto it = r.params.find(key);
        if (it != r.params.end()) reset_one(it->second.get());
      },
      py::arg("library"), py::arg("kernel"), py::arg("implementation"), py::arg("dtype"),
      py::arg("name"), "One parameter back to its default (pending override dropped).");
  m.def(
      "tuning_errors",
      [] {
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.mu);
        py::list out;
        for (const std::string& e : r.errors) out.append(e);
        return out;
      },
      "Pending overrides dropped at declaration because they did not fit the kind.");
  m.def(
      "tuning_dtype_names",
      [] {
        py::dict d;
        for (int32_t code = 0; code < 64; ++code) {
          if (const char* n = dtype_name(code)) d[py::int_(code)] = n;
        }
        return d;
      },
      "ONNX dtype code -> the name used in tuning keys (0 is 'any').");
  // Test-only: declares like a kernel would (the default's Python type picks
  // int or float) and returns what the C++ read path sees through the handle.
  m.def(
      "_tuning_declare_for_tests",
      [](const std::string& library, const std::string& kernel,
         const std::string& implementation, int32_t dtype, const std::string& name,
         const py::handle& default_value) -> py::object {
        const Value d = value_from_py(default_value);
        if (d.kind == TuningKind::kInt) {
          olc_tuning_param* p = tuning_declare_int(library.c_str(), kernel.c_str(),
                                                   implementation.c_str(), dtype,
                                                   name.c_str(), d.i);
          return py::int_(tuning_read_int(p));
        }
        olc_tuning_param* p = tuning_declare_float(
            library.c_str(), kernel.c_str(), implementation.c_str(), dtype, name.c_str(), d.f);
        return py::float_(tuning_read_float(p));
      },
      py::arg("library"), py::arg("kernel"), py::arg("implementation"), py::arg("dtype"),
      py::arg("name"), py::arg("default"));
}

}  // namespace olc
