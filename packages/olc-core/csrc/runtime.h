// The prepared execution plan of a Session and its C++ run loop.
//
// Python builds a Plan once per session (kernels created, value slots
// numbered, last uses computed); run() then executes every step in C++ with
// the GIL released, taking it back only for Python-implemented steps
// (fallbacks) and to convert feeds and outputs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "executor.h"
#include "olc/kernel_abi.h"

namespace olc {

namespace py = pybind11;

const olc_core_api* core_api();

// A kernel created from a vtable for one node; immutable after creation.
class NativeKernel {
 public:
  NativeKernel(const olc_kernel_vtable* vtable, void* state)
      : vtable_(vtable), state_(state) {}
  ~NativeKernel() {
    if (vtable_->destroy) vtable_->destroy(state_);
  }
  NativeKernel(const NativeKernel&) = delete;
  NativeKernel& operator=(const NativeKernel&) = delete;
  const olc_kernel_vtable* vtable() const { return vtable_; }
  const void* state() const { return state_; }
  // What create() reported through report_prepacked: (buffer key, bytes).
  std::vector<std::pair<uintptr_t, int64_t>> prepacked;

 private:
  const olc_kernel_vtable* vtable_;
  void* state_;
};

// Builds a kernel: validates the capsule and the ABI version, converts the
// node description (a dict prepared by olc_core.session) and calls create().
std::shared_ptr<NativeKernel> create_native_kernel(py::capsule capsule, py::dict node);

void bind_runtime(py::module_& m);

}  // namespace olc
