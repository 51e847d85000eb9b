// olc_core._native: the runtime's extension module.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "olc/python_api.h"
#include "cpu_features.h"
#include "executor.h"
#include "runtime.h"
#include "shape_kernels.h"
#include "tuning.h"

namespace py = pybind11;

namespace olc {
void bind_test_kernels(py::module_& m);
}

namespace {

// Runs parallel_for `runs` times on a private executor and reports how often
// each index was visited, how many threads took part and, per run, which
// thread took each index (0: the caller, then the others in order of first
// appearance): the executor's own test hook. Each range sleeps `sleep_us`.
py::dict executor_probe(int threads, int64_t n, int64_t grain, int max_participants, bool nested, int runs,
                        int sleep_us) {
  struct Probe {
    std::vector<std::atomic<int>> hits;
    std::vector<std::thread::id> owner;
    int sleep_us = 0;
    std::mutex mutex;
    std::set<std::thread::id> ids;
    olc::Executor* ex;
    bool nested;
    std::atomic<bool> nested_escaped{false};
    std::vector<std::pair<int64_t, int64_t>> ranges;  // of the last run
    explicit Probe(int64_t n) : hits(static_cast<size_t>(n)), owner(static_cast<size_t>(n)) {}
  };
  olc::Executor ex(threads, 0);
  Probe probe(n);
  probe.ex = &ex;
  probe.nested = nested;
  probe.sleep_us = sleep_us;
  auto body = [](void* user, int64_t begin, int64_t end) {
    auto* p = static_cast<Probe*>(user);
    {
      std::lock_guard<std::mutex> lock(p->mutex);
      p->ids.insert(std::this_thread::get_id());
      p->ranges.emplace_back(begin, end);
      for (int64_t i = begin; i < end; ++i) p->owner[i] = std::this_thread::get_id();
    }
    if (p->sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(p->sleep_us));
    if (p->nested) {
      // A nested region must run inline, on this very thread.
      struct Inner {
        Probe* p;
        int64_t offset;
        std::thread::id tid;
        bool inline_only;
      } inner{p, begin, std::this_thread::get_id(), true};
      p->ex->parallel_for(end - begin, 1, 0, [](void* u, int64_t b, int64_t e) {
        auto* in = static_cast<Inner*>(u);
        if (std::this_thread::get_id() != in->tid) in->inline_only = false;
        for (int64_t i = b; i < e; ++i) in->p->hits[in->offset + i].fetch_add(1);
      }, &inner);
      if (!inner.inline_only) p->nested_escaped = true;
      return;
    }
    for (int64_t i = begin; i < end; ++i) p->hits[i].fetch_add(1);
  };
  std::vector<std::thread::id> labels{std::this_thread::get_id()};
  py::list owners;
  for (int r = 0; r < std::max(1, runs); ++r) {
    probe.ranges.clear();
    {
      py::gil_scoped_release nogil;
      ex.parallel_for(n, grain, max_participants, body, &probe);
    }
    py::list run_owners;
    for (const auto& id : probe.owner) {
      auto it = std::find(labels.begin(), labels.end(), id);
      if (it == labels.end()) it = labels.insert(labels.end(), id);
      run_owners.append(static_cast<int>(it - labels.begin()));
    }
    owners.append(run_owners);
  }
  int min_hits = n ? 1 << 30 : 0, max_hits = 0;
  for (auto& h : probe.hits) {
    min_hits = std::min(min_hits, h.load());
    max_hits = std::max(max_hits, h.load());
  }
  py::dict d;
  d["min_hits"] = min_hits;
  d["max_hits"] = max_hits;
  d["nested_escaped"] = probe.nested_escaped.load();
  d["threads_used"] = static_cast<int>(probe.ids.size());
  d["owners"] = owners;
  std::sort(probe.ranges.begin(), probe.ranges.end());
  d["ranges"] = probe.ranges;
  return d;
}

void bind_cpu_features(py::module_& m) {
  m.def("simd_level", &olc::simd_level,
        "SIMD level kernels may use: the detected level capped by OLC_SIMD or "
        "set_simd_cap (0 scalar, 1 avx2, 2 avx512).");
  m.def("detected_simd_level", &olc::detected_simd_level,
        "SIMD level of this CPU and OS, ignoring any cap.");
  m.def("cpu_features", &olc::cpu_features,
        "olc_cpu_feature bits usable under the current cap.");
  m.def("detected_cpu_features", &olc::detected_cpu_features,
        "olc_cpu_feature bits of this CPU and OS, ignoring any cap.");
  m.def("set_simd_cap", &olc::set_simd_cap, py::arg("level"),
        "Caps the SIMD level (0, 1, 2); a negative level removes the cap.");
  m.def("simd_cap", &olc::simd_cap, "The current cap, -1 when uncapped.");
  m.def("simd_env_error", &olc::simd_env_error,
        "Empty, or why the OLC_SIMD value was rejected (it is then ignored).");
  m.def(
      "data_cache_bytes",
      [](int32_t level) {
        int32_t shared_by = 1;
        const int64_t bytes = olc::data_cache_bytes(level, &shared_by);
        return py::make_tuple(bytes, shared_by);
      },
      py::arg("level"),
      "(bytes, shared_by) of CPU 0's data cache of that level (1-3), what "
      "kernels read through the core API's data_cache_bytes; (0, 1) where "
      "the OS does not say.");
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "olc-core runtime internals; use the olc_core package instead.";
  bind_cpu_features(m);
  olc::bind_tuning(m);
  olc::bind_runtime(m);
  olc::bind_test_kernels(m);
  m.attr("ABI_VERSION") = OLC_ABI_VERSION;
  m.def("_builtin_vtable", [](const std::string& op) -> py::object {
    const olc_kernel_vtable* vt = olc::shape_kernel_vtable(op);
    if (!vt) throw std::invalid_argument("olc-core has no built-in kernel for " + op);
    return py::reinterpret_steal<py::object>(olc_kernel_capsule(vt));
  }, py::arg("op"), "The capsule of olc-core's own kernel for op (its plugin registers these).");
  m.attr("_C_API") = py::capsule(static_cast<const void*>(olc::core_api()), OLC_CORE_API_CAPSULE);
  m.def("executor_probe", &executor_probe, py::arg("threads"), py::arg("n"), py::arg("grain"),
        py::arg("max_participants") = 0, py::arg("nested") = false, py::arg("runs") = 1, py::arg("sleep_us") = 0);
}
