#include "runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "cpu_features.h"
#include "tuning.h"

// Under AddressSanitizer the slack a size class adds past a buffer's bytes
// is poisoned, so a kernel reading or writing past its tensor faults there
// as it would past a numpy array (otherwise the rounding hides it).
#if defined(__SANITIZE_ADDRESS__)
#define OLC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OLC_ASAN 1
#endif
#endif
#ifdef OLC_ASAN
#include <sanitizer/asan_interface.h>
#define OLC_POISON(p, n) __asan_poison_memory_region((p), (n))
#define OLC_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define OLC_POISON(p, n) ((void)(p), (void)(n))
#define OLC_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace olc {

namespace {

// ---------------------------------------------------------------- dtypes

constexpr int kMaxDtype = 32;

struct DtypeTable {
  py::object numpy[kMaxDtype];  // numpy dtype object per ONNX code, or empty
  // numpy type numbers of the ml_dtypes types (assigned when ml_dtypes
  // registers them, so looked up at import) and their ONNX codes.
  struct Extra {
    int num;
    int32_t code;
  };
  Extra extra[8];
  int n_extra = 0;
};

// Leaked on purpose: destroying Python objects at process exit without the
// GIL is unsafe.
DtypeTable* g_dtypes = nullptr;
PyObject* g_error_type = nullptr;  // olc_core.OlcError, set at import

int32_t onnx_code_of(const py::dtype& dt) {
  const int num = dt.num();
  switch (num) {
    case 0: return OLC_DTYPE_BOOL;
    case 1: return OLC_DTYPE_INT8;
    case 2: return OLC_DTYPE_UINT8;
    case 3: return OLC_DTYPE_INT16;
    case 4: return OLC_DTYPE_UINT16;
    case 5: return dt.itemsize() == 4 ? OLC_DTYPE_INT32 : OLC_DTYPE_UNDEFINED;
    case 6: return dt.itemsize() == 4 ? OLC_DTYPE_UINT32 : OLC_DTYPE_UNDEFINED;
    case 7:
    case 9: return dt.itemsize() == 8 ? OLC_DTYPE_INT64 : OLC_DTYPE_UNDEFINED;
    case 8:
    case 10: return dt.itemsize() == 8 ? OLC_DTYPE_UINT64 : OLC_DTYPE_UNDEFINED;
    case 11: return OLC_DTYPE_FLOAT;
    case 12: return OLC_DTYPE_DOUBLE;
    case 23: return OLC_DTYPE_FLOAT16;
    default: break;
  }
  if (g_dtypes) {
    for (int i = 0; i < g_dtypes->n_extra; ++i)
      if (num == g_dtypes->extra[i].num) return g_dtypes->extra[i].code;
  }
  return OLC_DTYPE_UNDEFINED;
}

[[noreturn]] void raise_olc_error(const std::string& message) {
  // Messages quote the model's names and string attributes, and a kernel's
  // fixed-size error buffer may cut a multi-byte character: bytes that are
  // not UTF-8 are shown as \xNN escapes (PyErr_SetString would raise a
  // UnicodeDecodeError instead of the error meant).
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace");
  if (!text) throw py::error_already_set();
  PyErr_SetObject(g_error_type ? g_error_type : PyExc_RuntimeError, text);
  Py_DECREF(text);
  throw py::error_already_set();
}

// ---------------------------------------------------------------- values

// A tensor shape with room for the common ranks inline.
class Shape {
 public:
  void assign(int32_t ndim, const int64_t* dims) {
    ndim_ = ndim;
    if (ndim <= kInline) {
      std::copy(dims, dims + ndim, inline_);
      heap_.clear();
    } else {
      heap_.assign(dims, dims + ndim);
    }
  }
  int32_t ndim() const { return ndim_; }
  const int64_t* data() const { return ndim_ <= kInline ? inline_ : heap_.data(); }

 private:
  static constexpr int kInline = 6;
  int32_t ndim_ = 0;
  int64_t inline_[kInline] = {};
  std::vector<int64_t> heap_;
};

// Output buffers are recycled: a fresh multi-megabyte block costs a page
// fault per 4 KiB on first touch, often more than the kernel that fills it,
// and the tens-of-KiB activations of a small CNN went through malloc's
// consolidation of its fast bins on every run (4 % of a MobileNet-style
// stack's run on one thread). Freed blocks of at least kMinCachedBytes wait
// here (up to kMaxCachedBytes in all) for the next allocation of the same
// size class (from kPageClassBytes on, of up to half their class: see
// take()); below that, malloc's thread cache serves them well.
class BufferCache {
 public:
  static constexpr size_t kMinCachedBytes = size_t(4) << 10;
  // Size classes are 64 bytes apart below this and a page apart above.
  static constexpr size_t kPageClassBytes = size_t(256) << 10;
  static constexpr size_t kMaxCachedBytes = size_t(256) << 20;
  // Blocks from this size on are 2 MiB aligned and asked to be backed by
  // transparent huge pages (as numpy does for its own arrays): a 16 MiB
  // output in 4 KiB pages takes 4096 TLB entries, more than the second-level
  // TLB holds, so a streaming kernel page-walks on every page.
  static constexpr size_t kHugePage = size_t(2) << 20;
  static constexpr size_t kHugeMinBytes = size_t(4) << 20;

  static size_t size_class(size_t nbytes) {
    if (nbytes >= kHugeMinBytes) return (nbytes + kHugePage - 1) & ~(kHugePage - 1);
    return nbytes < kPageClassBytes ? (nbytes + 63) & ~size_t(63) : (nbytes + 4095) & ~size_t(4095);
  }

  static void* allocate(size_t cls) {
    if (cls < kHugeMinBytes) return std::aligned_alloc(64, cls);
    void* p = std::aligned_alloc(kHugePage, cls);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p) madvise(p, cls, MADV_HUGEPAGE);  // advice only: failure keeps 4 KiB pages
#endif
    return p;
  }

  // A free block for a request of class *cls; *cls becomes the block's
  // own class. From kPageClassBytes on, a request takes the most recently
  // freed block of up to twice its class: its lines are the likeliest to
  // be in cache. A block that has waited since early in the previous run
  // has been evicted, and a kernel writing its whole output there reads
  // every line from memory first (write-allocate) for nothing. Taken by
  // class alone, the first layers of the PP-OCRv4 detector at 640x640
  // (tensors of 4-14 MiB, classes apart) each wrote to such a cold block:
  // the same process alternating the two rules, the detector ran 3-4 %
  // faster this way, YOLOv8n at 320x320 and the PP-OCRv4 recognizer 3 %.
  void* take(size_t* cls) {
    if (*cls < kMinCachedBytes) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    if (*cls >= kPageClassBytes) {
      for (size_t i = large_.size(); i-- > 0;) {
        if (large_[i].second < *cls || large_[i].second > 2 * *cls) continue;
        void* p = large_[i].first;
        *cls = large_[i].second;
        large_.erase(large_.begin() + static_cast<std::ptrdiff_t>(i));
        cached_ -= *cls;
        return p;
      }
      return nullptr;
    }
    auto it = free_.find(*cls);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= *cls;
    return p;
  }

  void give(void* p, size_t cls) {
    if (cls >= kMinCachedBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + cls <= kMaxCachedBytes) {
        if (cls >= kPageClassBytes) large_.emplace_back(p, cls);
        else free_[cls].push_back(p);
        cached_ += cls;
        return;
      }
    }
    std::free(p);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  // Blocks from kPageClassBytes on: (block, class), most recently freed last.
  std::vector<std::pair<void*, size_t>> large_;
  size_t cached_ = 0;
};

// Leaked on purpose: buffers may be released by numpy arrays that outlive
// static destruction at interpreter exit.
BufferCache& buffer_cache() {
  static BufferCache* cache = new BufferCache();
  return *cache;
}

std::shared_ptr<void> allocate_buffer(size_t nbytes) {
  size_t cls = BufferCache::size_class(nbytes);
  void* p = buffer_cache().take(&cls);
  if (!p) p = BufferCache::allocate(cls);
  if (!p) return nullptr;
  OLC_POISON(static_cast<char*>(p) + nbytes, cls - nbytes);
  return std::shared_ptr<void>(p, [cls](void* q) {
    OLC_UNPOISON(q, cls);
    buffer_cache().give(q, cls);
  });
}

struct Value {
  enum Kind : uint8_t { kEmpty = 0, kTensor, kObject };
  Kind kind = kEmpty;
  // Storage allocated by this run: may be reused in place and is wrapped
  // (not copied) when returned.
  bool runtime_owned = false;
  // A feed or an initializer: returned as a copy, never written.
  bool external = false;
  int32_t dtype = 0;
  size_t nbytes = 0;
  Shape shape;
  void* data = nullptr;
  std::shared_ptr<void> buffer;  // runtime-owned storage (shared by its views)
  PyObject* obj = nullptr;       // strong reference (array or other object)
  // A view (view_output) of a value that holds `obj`: `obj` is borrowed
  // from that value, whose reference is kept until the run ends (pinned).
  bool borrowed = false;
  // Some view borrows `obj`: clearing this value keeps the reference.
  bool pinned = false;
};

// ---------------------------------------------------------------- plan

struct Step {
  bool native = false;
  std::shared_ptr<NativeKernel> kernel;
  py::object callable;
  std::vector<int32_t> inputs;   // -1: absent optional input
  std::vector<int32_t> outputs;  // every output has a slot
  std::vector<int32_t> release;  // slots dead after this step
  bool inplace_input0 = false;   // kernel allows it and input 0 dies here
  std::string label;             // "node 'name' (Op)"
  std::string kernel_name;
};

struct InputSpec {
  int32_t slot;
  std::string name;
  py::object key;        // interned str for dict look-ups
  int32_t dtype;         // expected ONNX code; 0: not checked
  bool is_tensor;
  bool has_shape;
  std::vector<int64_t> dims;  // -1: any size
  bool has_default;      // an initializer provides it when not fed
  std::string consumer;  // "node 'n' (Op)" for messages
};

struct ConstantSpec {
  int32_t slot;
  py::object object;  // numpy array (tensor) or any object
  // A tensor's value, worked out once: each run copies it (its reference
  // borrowed from `object`) instead of reading the array again, which was
  // the largest part of a run's own time outside its steps (about a third
  // of it in a perf profile of the MobileNet-style stack). Empty for other
  // objects: those are read per run.
  Value value;
};

struct RunState;

// One step of one run, recorded when profiling is on.
struct StepTiming {
  int32_t step;
  int64_t start_ns;  // from the start of the run (feeds checked, first step about to run)
  int64_t duration_ns;
  std::vector<std::vector<int64_t>> output_shapes;  // empty for a non-tensor output
  bool cached = false;  // skipped: the shape-plan cache gave its outputs
};

// One value of a shape plan, copied from the run that computed it.
struct CapturedValue {
  int32_t dtype = 0;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

// What the shape-plan cache holds for one feed-shape signature: the
// frontier values (read-only arrays), or nothing when they were too large
// or not tensors (runs with that signature then run every step).
struct ShapePlanEntry {
  bool usable = false;
  std::vector<py::object> values;
};

}  // namespace
}  // namespace olc

// The opaque context handed to kernels.
struct olc_context {
  olc::RunState* run;
  const olc::Step* step;
  std::string error;
};

namespace olc {
namespace {

class Plan {
 public:
  // `executor`: a thread pool to share (a session and its subgraphs' plans
  // run on one pool); null: the plan makes its own.
  Plan(int32_t n_values, int threads, int participant_limit, bool record_usage,
       std::shared_ptr<Executor> executor = nullptr)
      : n_values_(n_values),
        record_usage_(record_usage),
        executor_(executor ? std::move(executor) : std::make_shared<Executor>(threads, participant_limit)) {}

  ~Plan() {
    // Steps hold Python objects: make sure they die with the GIL held (the
    // destructor runs from Python's garbage collection, so it is).
  }

  void add_constant(int32_t slot, py::object obj) {
    check_slot(slot);
    constants_.push_back({slot, std::move(obj), Value{}});
    prepare_constant(constants_.back());
  }

  void add_input(int32_t slot, const std::string& name, int32_t dtype, bool is_tensor,
                 py::object dims, bool has_default, const std::string& consumer) {
    check_slot(slot);
    InputSpec spec;
    spec.slot = slot;
    spec.name = name;
    spec.key = py::reinterpret_steal<py::object>(PyUnicode_InternFromString(name.c_str()));
    if (!spec.key) {
      // A name that is not UTF-8 (a damaged model) has no str key to look
      // feeds up by; a null key would be dereferenced at run time.
      PyErr_Clear();
      raise_olc_error("graph input name '" + name + "' is not valid UTF-8");
    }
    spec.dtype = dtype;
    spec.is_tensor = is_tensor;
    spec.has_shape = !dims.is_none();
    if (spec.has_shape) {
      for (auto d : dims) spec.dims.push_back(d.cast<int64_t>());
    }
    spec.has_default = has_default;
    spec.consumer = consumer;
    inputs_.push_back(std::move(spec));
  }

  void add_output(int32_t slot, const std::string& name) {
    check_slot(slot);
    output_slots_.push_back(slot);
    output_names_.push_back(name);
    output_index_[name] = static_cast<int32_t>(output_slots_.size() - 1);
  }

  void add_native_step(std::shared_ptr<NativeKernel> kernel, std::vector<int32_t> inputs,
                       std::vector<int32_t> outputs, std::vector<int32_t> release,
                       const std::string& label) {
    Step s;
    s.native = true;
    s.kernel_name = kernel->vtable()->name ? kernel->vtable()->name : "?";
    s.inplace_input0 = (kernel->vtable()->flags & OLC_KERNEL_INPLACE_INPUT0) && !inputs.empty() &&
                       inputs[0] >= 0 &&
                       std::find(release.begin(), release.end(), inputs[0]) != release.end();
    s.kernel = std::move(kernel);
    fill_step(s, std::move(inputs), std::move(outputs), std::move(release), label);
  }

  void add_python_step(py::object callable, std::vector<int32_t> inputs,
                       std::vector<int32_t> outputs, std::vector<int32_t> release,
                       const std::string& label, const std::string& kernel_name) {
    Step s;
    s.callable = std::move(callable);
    s.kernel_name = kernel_name;
    fill_step(s, std::move(inputs), std::move(outputs), std::move(release), label);
  }

  py::list run(py::object output_names, py::object feeds);

  std::vector<std::string> last_usage() const {
    std::lock_guard<std::mutex> lock(usage_mutex_);
    return last_usage_;
  }
  std::vector<std::string> last_usage_details() const {
    std::lock_guard<std::mutex> lock(usage_mutex_);
    return last_details_;
  }

  void set_profiling(bool on) { profile_ = on; }
  // The steps of the last run, in order, and its duration: ((step,
  // start_ns, duration_ns, output shapes, cached), ...), run duration_ns.
  py::tuple last_profile() const {
    std::lock_guard<std::mutex> lock(usage_mutex_);
    py::list steps;
    for (const auto& t : last_profile_) {
      py::list shapes;
      for (const auto& sh : t.output_shapes) shapes.append(py::tuple(py::cast(sh)));
      steps.append(py::make_tuple(t.step, t.start_ns, t.duration_ns, shapes, t.cached));
    }
    return py::make_tuple(steps, last_run_ns_);
  }

  // The shape plan: `steps` compute values that depend only on the feeds'
  // shapes; `frontier` are the slots of those values that other steps or
  // the graph outputs read. A run whose feed shapes were seen before skips
  // the steps and takes the frontier values from the cache.
  void set_shape_plan(const std::vector<int32_t>& steps, const std::vector<int32_t>& frontier,
                      int32_t capacity, int64_t max_bytes) {
    shape_step_.assign(steps_.size(), 0);
    for (int32_t i : steps) {
      if (i < 0 || static_cast<size_t>(i) >= steps_.size()) throw std::out_of_range("shape-plan step out of range");
      shape_step_[i] = 1;
    }
    frontier_of_slot_.assign(n_values_, -1);
    for (size_t j = 0; j < frontier.size(); ++j) {
      check_slot(frontier[j]);
      frontier_of_slot_[frontier[j]] = static_cast<int32_t>(j);
    }
    shape_frontier_ = frontier;
    shape_capacity_ = capacity > 0 ? static_cast<size_t>(capacity) : 1;
    shape_max_bytes_ = max_bytes > 0 ? static_cast<size_t>(max_bytes) : 0;
    std::lock_guard<std::mutex> lock(shape_mutex_);
    shape_cache_.clear();
    shape_order_.clear();
  }

  // (hits, misses, cached signatures) since the plan was made.
  py::tuple shape_plan_stats() const {
    std::lock_guard<std::mutex> lock(shape_mutex_);
    return py::make_tuple(shape_hits_, shape_misses_, shape_cache_.size());
  }

  int threads() const { return executor_->threads(); }
  Executor& executor() { return *executor_; }
  std::shared_ptr<Executor> shared_executor() const { return executor_; }

 private:
  // Stores a new signature's frontier values (GIL held), evicting the
  // oldest signature past the capacity.
  void remember_shape_plan(std::vector<int64_t> key, bool usable, const std::vector<CapturedValue>& captured);

 public:
  bool record_usage() const { return record_usage_; }

 private:
  void check_slot(int32_t slot) const {
    if (slot < 0 || slot >= n_values_) throw std::out_of_range("value slot out of range");
  }
  void prepare_constant(ConstantSpec& c);
  void fill_step(Step& s, std::vector<int32_t> inputs, std::vector<int32_t> outputs,
                 std::vector<int32_t> release, const std::string& label) {
    for (int32_t v : inputs)
      if (v != -1) check_slot(v);
    for (int32_t v : outputs) check_slot(v);
    for (int32_t v : release) check_slot(v);
    s.inputs = std::move(inputs);
    s.outputs = std::move(outputs);
    s.release = std::move(release);
    s.label = label;
    steps_.push_back(std::move(s));
  }

  friend struct RunState;

  int32_t n_values_;
  bool record_usage_;
  std::shared_ptr<Executor> executor_;
  std::vector<ConstantSpec> constants_;
  std::vector<InputSpec> inputs_;
  std::vector<int32_t> output_slots_;
  std::vector<std::string> output_names_;
  std::unordered_map<std::string, int32_t> output_index_;
  std::vector<Step> steps_;

  mutable std::mutex usage_mutex_;
  std::vector<std::string> last_usage_;
  std::vector<std::string> last_details_;

  bool profile_ = false;
  std::vector<StepTiming> last_profile_;
  int64_t last_run_ns_ = 0;

  // Shape plan (set_shape_plan); empty when the graph has none.
  std::vector<uint8_t> shape_step_;
  std::vector<int32_t> frontier_of_slot_;
  std::vector<int32_t> shape_frontier_;
  size_t shape_capacity_ = 0;
  size_t shape_max_bytes_ = 0;
  mutable std::mutex shape_mutex_;
  std::map<std::vector<int64_t>, ShapePlanEntry> shape_cache_;
  std::deque<std::vector<int64_t>> shape_order_;  // oldest first, for eviction
  int64_t shape_hits_ = 0;
  int64_t shape_misses_ = 0;

  // The value slots of finished runs, cleared, for the next runs: a fresh
  // vector value-initializes every slot (a rep stos each: half of
  // Plan::run's own time in a perf profile of the MobileNet-style stack).
  std::vector<Value> take_values() {
    {
      std::lock_guard<std::mutex> lock(pool_mutex_);
      if (!value_pool_.empty()) {
        std::vector<Value> v = std::move(value_pool_.back());
        value_pool_.pop_back();
        return v;
      }
    }
    return std::vector<Value>(static_cast<size_t>(n_values_));
  }
  void give_values(std::vector<Value>&& v) noexcept {
    try {
      std::lock_guard<std::mutex> lock(pool_mutex_);
      if (value_pool_.size() < kValuePool) value_pool_.push_back(std::move(v));
    } catch (...) {  // a full pool or no memory: the vector is just freed
    }
  }
  static constexpr size_t kValuePool = 4;  // runs at once that reuse slots
  std::mutex pool_mutex_;
  std::vector<std::vector<Value>> value_pool_;
};

// Everything one run() call owns. Values holding Python objects may only be
// released with the GIL held: releases during native stretches are deferred.
struct RunState {
  Plan* plan;
  std::vector<Value> values;
  std::vector<PyObject*> deferred_decref;
  // References of values that views borrowed from; dropped when the run ends.
  std::vector<PyObject*> pinned_refs;
  std::string error;
  bool record;
  std::vector<const char*> usage;
  std::vector<std::string> details;
  bool gil_held = true;

  explicit RunState(Plan* p) : plan(p), values(p->take_values()), record(p->record_usage_) {}

  ~RunState() {
    // Always destroyed with the GIL held.
    for (auto& v : values) clear(v);
    for (PyObject* o : deferred_decref) Py_DECREF(o);
    for (PyObject* o : pinned_refs) Py_DECREF(o);
    plan->give_values(std::move(values));
  }

  void clear(Value& v) {
    if (v.obj && !v.borrowed) {
      if (v.pinned) {
        pinned_refs.push_back(v.obj);
      } else if (gil_held) {
        Py_DECREF(v.obj);
      } else {
        deferred_decref.push_back(v.obj);
      }
    }
    v.obj = nullptr;
    v.borrowed = false;
    v.pinned = false;
    v.buffer.reset();
    v.data = nullptr;
    v.kind = Value::kEmpty;
    v.runtime_owned = false;
    v.external = false;
    // As a new Value: the slots are reused by later runs.
    v.dtype = 0;
    v.nbytes = 0;
    v.shape.assign(0, nullptr);
  }

  void flush_deferred() {
    for (PyObject* o : deferred_decref) Py_DECREF(o);
    deferred_decref.clear();
  }
};

// --------------------------------------------------- numpy conversions

bool numpy_dtype_known(int32_t code) {
  return code > 0 && code < kMaxDtype && g_dtypes && g_dtypes->numpy[code];
}

py::object numpy_dtype(int32_t code) {
  if (code <= 0 || code >= kMaxDtype || !g_dtypes || !g_dtypes->numpy[code])
    throw std::runtime_error(std::string("no numpy dtype for ") + olc_dtype_name(code));
  return g_dtypes->numpy[code];
}

// Wraps a runtime-owned buffer in an array that keeps the buffer alive.
py::object wrap_buffer(const Value& v) {
  auto* keep = new std::shared_ptr<void>(v.buffer);
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); });
  std::vector<py::ssize_t> shape(v.shape.data(), v.shape.data() + v.shape.ndim());
  return py::array(py::reinterpret_borrow<py::dtype>(numpy_dtype(v.dtype)), std::move(shape),
                   v.data, base);
}

// A view of the array `v.obj` with v's own shape; read-only for a feed or
// an initializer.
py::object wrap_borrowed(const Value& v) {
  std::vector<py::ssize_t> shape(v.shape.data(), v.shape.data() + v.shape.ndim());
  py::array arr(py::reinterpret_borrow<py::dtype>(numpy_dtype(v.dtype)), std::move(shape), v.data,
                py::handle(v.obj));
  if (v.external) arr.attr("setflags")(py::arg("write") = false);
  return std::move(arr);
}

// The value as a Python object for a Python step (no copy).
py::object value_to_python(const Value& v) {
  if (v.kind == Value::kEmpty) return py::none();
  if (v.borrowed) return wrap_borrowed(v);
  if (v.obj) return py::reinterpret_borrow<py::object>(v.obj);
  return wrap_buffer(v);
}

// Kernels read elements as their type: an array they get must be C-contiguous
// and aligned (an unpickled or frombuffer array at an odd offset is copied).
constexpr int kCAligned = py::array::c_style | py::detail::npy_api::NPY_ARRAY_ALIGNED_;

// `arr` as a tensor Value (kind, dtype, shape, size, data; no reference
// taken), made C-contiguous and aligned first if it is not. False: not a
// native dtype (v untouched).
bool tensor_from_array(py::array& arr, Value& v) {
  const int32_t code = onnx_code_of(arr.dtype());
  if (code == OLC_DTYPE_UNDEFINED) return false;
  if ((arr.flags() & kCAligned) != kCAligned) {
    arr = py::array::ensure(arr, kCAligned);
    if (!arr) throw py::error_already_set();
  }
  v.kind = Value::kTensor;
  v.dtype = code;
  std::vector<int64_t> dims(arr.shape(), arr.shape() + arr.ndim());
  v.shape.assign(static_cast<int32_t>(arr.ndim()), dims.data());
  v.nbytes = static_cast<size_t>(arr.nbytes());
  v.data = const_cast<void*>(arr.data());
  return true;
}

// Fills `v` from a Python object (a new reference); arrays of native
// dtypes become tensors.
void value_from_python(RunState& rs, Value& v, py::handle obj, bool external) {
  rs.clear(v);
  v.external = external;
  if (py::isinstance<py::array>(obj)) {
    auto arr = py::reinterpret_borrow<py::array>(obj);
    if (tensor_from_array(arr, v)) {
      v.obj = arr.release().ptr();
      return;
    }
  }
  v.kind = Value::kObject;
  v.obj = obj.inc_ref().ptr();
}

// A constant tensor as the Value every run starts from: the plan's array
// (made C-contiguous and aligned once) lent, not owned (borrowed: a run
// never releases its reference; an output that is a constant is a copy).
void Plan::prepare_constant(ConstantSpec& c) {
  if (!py::isinstance<py::array>(c.object)) return;
  auto arr = py::reinterpret_borrow<py::array>(c.object);
  if (!tensor_from_array(arr, c.value)) return;
  c.object = arr;
  c.value.external = true;
  c.value.borrowed = true;
  c.value.obj = c.object.ptr();
}

std::string shape_str(const int64_t* dims, size_t n) {
  std::string s = "(";
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += dims[i] < 0 ? std::string("?") : std::to_string(dims[i]);
  }
  if (n == 1) s += ",";
  return s + ")";
}

// ------------------------------------------------------------ run loop

bool run_native_step(RunState& rs, const Step& step) {
  olc_tensor stack_inputs[8];
  std::vector<olc_tensor> heap_inputs;
  olc_tensor* ins = stack_inputs;
  if (step.inputs.size() > 8) {
    heap_inputs.resize(step.inputs.size());
    ins = heap_inputs.data();
  }
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    const int32_t slot = step.inputs[i];
    if (slot < 0) {
      ins[i] = olc_tensor{OLC_DTYPE_UNDEFINED, 0, nullptr, nullptr};
      continue;
    }
    const Value& v = rs.values[slot];
    if (v.kind != Value::kTensor) {
      rs.error = step.label + ": input " + std::to_string(i) +
                 (v.kind == Value::kEmpty ? " has no value" : " is not a tensor of a native type");
      return false;
    }
    ins[i] = olc_tensor{v.dtype, v.shape.ndim(), v.shape.data(), v.data};
  }
  olc_context ctx{&rs, &step, {}};
  const int32_t rc = step.kernel->vtable()->run(step.kernel->state(), &ctx,
                                                static_cast<int32_t>(step.inputs.size()), ins,
                                                static_cast<int32_t>(step.outputs.size()));
  if (rc != OLC_OK) {
    rs.error = step.label + ": " + (ctx.error.empty() ? "kernel failed without a message" : ctx.error);
    return false;
  }
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    if (rs.values[step.outputs[i]].kind == Value::kEmpty) {
      rs.error = step.label + ": kernel " + step.kernel_name + " did not produce output " +
                 std::to_string(i);
      return false;
    }
  }
  return true;
}

bool run_python_step(RunState& rs, const Step& step) {
  py::gil_scoped_acquire gil;
  rs.gil_held = true;
  rs.flush_deferred();
  bool ok = true;
  try {
    py::tuple args(step.inputs.size());
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      const int32_t slot = step.inputs[i];
      args[i] = slot < 0 ? py::none() : value_to_python(rs.values[slot]);
    }
    py::object result = step.callable(*args);
    py::sequence outs = py::reinterpret_borrow<py::sequence>(result);
    if (static_cast<size_t>(py::len(outs)) < step.outputs.size()) {
      rs.error = step.label + ": kernel " + step.kernel_name + " returned " +
                 std::to_string(py::len(outs)) + " outputs, expected " +
                 std::to_string(step.outputs.size());
      ok = false;
    } else {
      for (size_t i = 0; i < step.outputs.size(); ++i) {
        py::object o = outs[i];
        // numpy scalars and lists become arrays so native consumers can read them.
        if (!py::isinstance<py::array>(o) && !o.is_none() && PyObject_HasAttrString(o.ptr(), "dtype"))
          o = py::array::ensure(o);
        value_from_python(rs, rs.values[step.outputs[i]], o, false);
      }
    }
  } catch (py::error_already_set& e) {
    rs.error = step.label + ": " + e.what();
    ok = false;
  } catch (std::exception& e) {
    rs.error = step.label + ": " + e.what();
    ok = false;
  }
  rs.gil_held = false;
  return ok;
}

void record_timing(const RunState& rs, const Step& step, int32_t index, std::chrono::steady_clock::time_point run_start,
                   std::chrono::steady_clock::time_point t0, std::vector<StepTiming>* out) {
  const auto t1 = std::chrono::steady_clock::now();
  StepTiming t;
  t.step = index;
  t.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t0 - run_start).count();
  t.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  for (int32_t slot : step.outputs) {
    const Value& v = rs.values[slot];
    if (v.kind == Value::kTensor) t.output_shapes.emplace_back(v.shape.data(), v.shape.data() + v.shape.ndim());
    else t.output_shapes.emplace_back();
  }
  out->push_back(std::move(t));
}

// The shape-plan cache key: every graph input's rank and dims, in input
// order. False when some input is not a tensor (no key: no caching).
bool feed_shape_key(const RunState& rs, const std::vector<InputSpec>& inputs, std::vector<int64_t>* key) {
  key->clear();
  for (const auto& spec : inputs) {
    const Value& v = rs.values[spec.slot];
    if (v.kind != Value::kTensor) return false;
    key->push_back(v.shape.ndim());
    key->insert(key->end(), v.shape.data(), v.shape.data() + v.shape.ndim());
  }
  return true;
}

// Copies a frontier value a shape step just produced; false when it cannot
// be cached (not a tensor, or the signature's values pass `max_bytes`).
bool capture_value(const Value& v, size_t max_bytes, size_t* total, CapturedValue* out) {
  if (v.kind != Value::kTensor || !numpy_dtype_known(v.dtype)) return false;
  *total += v.nbytes;
  if (*total > max_bytes) return false;
  out->dtype = v.dtype;
  out->dims.assign(v.shape.data(), v.shape.data() + v.shape.ndim());
  const auto* p = static_cast<const uint8_t*>(v.data);
  out->bytes.assign(p, p + v.nbytes);
  return true;
}

void Plan::remember_shape_plan(std::vector<int64_t> key, bool usable, const std::vector<CapturedValue>& captured) {
  ShapePlanEntry entry;
  entry.usable = usable;
  if (usable) {
    for (const auto& c : captured) {
      std::vector<py::ssize_t> shape(c.dims.begin(), c.dims.end());
      py::array arr(py::reinterpret_borrow<py::dtype>(numpy_dtype(c.dtype)), std::move(shape));
      if (!c.bytes.empty()) std::memcpy(arr.mutable_data(), c.bytes.data(), c.bytes.size());
      arr.attr("setflags")(py::arg("write") = false);
      entry.values.push_back(std::move(arr));
    }
  }
  std::lock_guard<std::mutex> lock(shape_mutex_);
  if (shape_cache_.count(key)) return;  // a concurrent run stored it first
  if (shape_cache_.size() >= shape_capacity_ && !shape_order_.empty()) {
    shape_cache_.erase(shape_order_.front());
    shape_order_.pop_front();
  }
  shape_order_.push_back(key);
  shape_cache_.emplace(std::move(key), std::move(entry));
}

py::list Plan::run(py::object output_names, py::object feeds) {
  if (!PyDict_Check(feeds.ptr())) {
    // Accept any mapping, as onnxruntime does.
    feeds = py::dict(feeds);
  }
  // Which graph outputs to return.
  std::vector<int32_t> wanted;
  if (output_names.is_none()) {
    wanted.resize(output_slots_.size());
    for (size_t i = 0; i < wanted.size(); ++i) wanted[i] = static_cast<int32_t>(i);
  } else {
    for (auto n : output_names) {
      auto name = n.cast<std::string>();
      auto it = output_index_.find(name);
      if (it == output_index_.end()) raise_olc_error("unknown output name '" + name + "'");
      wanted.push_back(it->second);
    }
  }

  RunState rs(this);
  for (const auto& c : constants_) {
    if (c.value.kind == Value::kTensor) rs.values[c.slot] = c.value;
    else value_from_python(rs, rs.values[c.slot], c.object, true);
  }

  // Feeds: presence, dtype and shape are checked before any node runs.
  PyObject* feed_dict = feeds.ptr();
  Py_ssize_t matched = 0;
  for (const auto& spec : inputs_) {
    PyObject* item = PyDict_GetItemWithError(feed_dict, spec.key.ptr());
    if (!item) {
      if (PyErr_Occurred()) throw py::error_already_set();
      if (spec.has_default) continue;
      raise_olc_error("missing feed for graph input '" + spec.name + "' (consumed by " +
                      spec.consumer + ")");
    }
    ++matched;
    py::handle obj(item);
    if (spec.is_tensor && !py::isinstance<py::array>(obj)) {
      py::object arr = py::module_::import("numpy").attr("asarray")(obj);
      value_from_python(rs, rs.values[spec.slot], arr, true);
    } else {
      value_from_python(rs, rs.values[spec.slot], obj, true);
    }
    Value& v = rs.values[spec.slot];
    if (spec.is_tensor && spec.dtype != 0) {
      const bool native_expected = olc_dtype_size(spec.dtype) != 0;
      if (native_expected && (v.kind != Value::kTensor || v.dtype != spec.dtype)) {
        std::string got = v.kind == Value::kTensor ? olc_dtype_name(v.dtype)
                                                   : py::str(obj.attr("dtype")).cast<std::string>();
        raise_olc_error("feed '" + spec.name + "' (consumed by " + spec.consumer + ") has dtype " +
                        got + ", the model declares " + olc_dtype_name(spec.dtype));
      }
      if (spec.has_shape && v.kind == Value::kTensor) {
        bool ok = static_cast<size_t>(v.shape.ndim()) == spec.dims.size();
        for (size_t d = 0; ok && d < spec.dims.size(); ++d)
          ok = spec.dims[d] < 0 || spec.dims[d] == v.shape.data()[d];
        if (!ok)
          raise_olc_error("feed '" + spec.name + "' (consumed by " + spec.consumer +
                          ") has shape " + shape_str(v.shape.data(), v.shape.ndim()) +
                          ", the model declares " + shape_str(spec.dims.data(), spec.dims.size()));
      }
    }
  }
  if (matched != PyDict_Size(feed_dict)) {
    for (auto kv : py::reinterpret_borrow<py::dict>(feeds)) {
      auto name = py::str(kv.first).cast<std::string>();
      bool known = std::any_of(inputs_.begin(), inputs_.end(),
                               [&](const InputSpec& s) { return s.name == name; });
      if (!known) raise_olc_error("feed '" + name + "' is not an input of the model");
    }
  }

  // Shape plan: on a signature seen before, its frontier values come from
  // the cache and its steps are skipped; on a new one they are captured.
  const bool has_shape_plan = !shape_step_.empty();
  bool shape_hit = false;
  bool capture = false;
  bool new_signature = false;
  std::vector<int64_t> key;
  if (has_shape_plan && feed_shape_key(rs, inputs_, &key)) {
    std::lock_guard<std::mutex> lock(shape_mutex_);
    auto it = shape_cache_.find(key);
    if (it == shape_cache_.end()) {
      capture = new_signature = true;
      ++shape_misses_;
    } else if (it->second.usable) {
      shape_hit = true;
      ++shape_hits_;
      for (size_t j = 0; j < shape_frontier_.size(); ++j)
        value_from_python(rs, rs.values[shape_frontier_[j]], it->second.values[j], true);
    } else {
      ++shape_misses_;
    }
  }
  std::vector<CapturedValue> captured(capture ? shape_frontier_.size() : 0);
  size_t captured_bytes = 0;

  bool ok = true;
  std::vector<StepTiming> timings;
  using Clock = std::chrono::steady_clock;
  const auto run_start = profile_ ? Clock::now() : Clock::time_point{};
  {
    py::gil_scoped_release nogil;
    rs.gil_held = false;
    if (profile_) timings.reserve(steps_.size());
    for (size_t i = 0; i < steps_.size(); ++i) {
      const Step& step = steps_[i];
      const auto t0 = profile_ ? Clock::now() : Clock::time_point{};
      if (shape_hit && shape_step_[i]) {
        if (profile_) {
          record_timing(rs, step, static_cast<int32_t>(i), run_start, t0, &timings);
          timings.back().duration_ns = 0;
          timings.back().cached = true;
        }
        for (int32_t slot : step.release) rs.clear(rs.values[slot]);
        continue;
      }
      ok = step.native ? run_native_step(rs, step) : run_python_step(rs, step);
      if (!ok) break;
      if (profile_) record_timing(rs, step, static_cast<int32_t>(i), run_start, t0, &timings);
      if (rs.record) rs.usage.push_back(step.kernel_name.c_str());
      if (capture && shape_step_[i]) {
        for (int32_t slot : step.outputs) {
          const int32_t j = frontier_of_slot_[slot];
          if (j >= 0 && capture &&
              !capture_value(rs.values[slot], shape_max_bytes_, &captured_bytes, &captured[j])) {
            capture = false;  // remembered as unusable: later runs skip nothing
            captured.clear();
          }
        }
      }
      for (int32_t slot : step.release) rs.clear(rs.values[slot]);
    }
  }
  if (profile_ && ok) {
    const int64_t total = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - run_start).count();
    std::lock_guard<std::mutex> lock(usage_mutex_);
    last_profile_ = std::move(timings);
    last_run_ns_ = total;
  }
  rs.gil_held = true;
  rs.flush_deferred();
  if (!ok) raise_olc_error(rs.error);
  if (new_signature) remember_shape_plan(std::move(key), capture, captured);

  if (rs.record) {
    std::vector<std::string> names(rs.usage.begin(), rs.usage.end());
    std::lock_guard<std::mutex> lock(usage_mutex_);
    last_usage_ = std::move(names);
    last_details_ = std::move(rs.details);
  }

  py::list result(wanted.size());
  for (size_t i = 0; i < wanted.size(); ++i) {
    const Value& v = rs.values[output_slots_[wanted[i]]];
    py::object out;
    if (v.kind == Value::kEmpty) {
      out = py::none();
    } else if (v.borrowed) {
      // A view of a feed, an initializer or a Python step's array: a copy,
      // so that no two outputs (and no output and feed) share memory.
      out = wrap_borrowed(v).attr("copy")();
    } else if (!v.obj) {
      // Storage another live value shares (a view and its source, both
      // outputs): each gets its own copy.
      out = v.buffer.use_count() > 1 ? wrap_buffer(v).attr("copy")() : wrap_buffer(v);
    } else if (v.external && py::isinstance<py::array>(v.obj)) {
      // Never hand out the caller's feed or the session's initializer.
      out = py::reinterpret_borrow<py::array>(v.obj).attr("copy")();
    } else {
      out = py::reinterpret_borrow<py::object>(v.obj);
    }
    result[i] = std::move(out);
  }
  return result;
}

// --------------------------------------------------------- core API slots

int32_t api_simd_level() { return simd_level(); }
uint64_t api_cpu_features() { return cpu_features(); }

void api_parallel_for(olc_context* ctx, int64_t n, int64_t grain, int32_t max_participants,
                      olc_range_fn fn, void* user) {
  if (!ctx || !ctx->run) {
    run_serial(n, fn, user);
    return;
  }
  ctx->run->plan->executor().parallel_for(n, grain, max_participants, fn, user);
}

int32_t api_concurrency(olc_context* ctx) {
  if (!ctx || !ctx->run || Executor::in_parallel_region()) return 1;
  return ctx->run->plan->executor().admitted(0);
}

int32_t api_set_error(olc_context* ctx, const char* message) {
  if (ctx) ctx->error = message ? message : "unknown error";
  return OLC_ERROR;
}

char g_empty_tensor_storage[64] alignas(64);

void* api_allocate_output(olc_context* ctx, int32_t index, int32_t dtype, int32_t ndim,
                          const int64_t* shape) {
  if (!ctx || !ctx->run || !ctx->step) return nullptr;
  RunState& rs = *ctx->run;
  const Step& step = *ctx->step;
  if (index < 0 || static_cast<size_t>(index) >= step.outputs.size()) {
    api_set_error(ctx, ("allocate_output: output index " + std::to_string(index) +
                        " out of range").c_str());
    return nullptr;
  }
  const size_t elem = olc_dtype_size(dtype);
  if (elem == 0) {
    api_set_error(ctx, (std::string("allocate_output: dtype ") + std::to_string(dtype) +
                        " cannot be a native tensor").c_str());
    return nullptr;
  }
  if (ndim < 0 || (ndim > 0 && !shape)) {
    api_set_error(ctx, "allocate_output: invalid rank");
    return nullptr;
  }
  uint64_t count = 1;
  for (int32_t d = 0; d < ndim; ++d) {
    if (shape[d] < 0 ||
        __builtin_mul_overflow(count, static_cast<uint64_t>(shape[d]), &count)) {
      api_set_error(ctx, "allocate_output: invalid or overflowing shape");
      return nullptr;
    }
  }
  uint64_t nbytes64;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(elem), &nbytes64) ||
      nbytes64 > (uint64_t(1) << 62)) {
    api_set_error(ctx, "allocate_output: tensor too large");
    return nullptr;
  }
  const size_t nbytes = static_cast<size_t>(nbytes64);
  Value& out = rs.values[step.outputs[index]];
  if (out.kind != Value::kEmpty) {
    api_set_error(ctx, ("allocate_output: output " + std::to_string(index) +
                        " allocated twice").c_str());
    return nullptr;
  }
  out.kind = Value::kTensor;
  out.runtime_owned = true;
  out.dtype = dtype;
  out.nbytes = nbytes;
  out.shape.assign(ndim, shape);
  if (index == 0 && step.inplace_input0) {
    Value& in = rs.values[step.inputs[0]];
    if (in.runtime_owned && in.dtype == dtype && in.nbytes == nbytes && nbytes > 0 &&
        in.buffer.use_count() == 1) {
      out.buffer = in.buffer;
      out.data = in.data;
      return out.data;
    }
  }
  if (nbytes == 0) {
    out.data = g_empty_tensor_storage;
    out.buffer = std::shared_ptr<void>(static_cast<void*>(g_empty_tensor_storage), [](void*) {});
    return out.data;
  }
  out.buffer = allocate_buffer(nbytes);
  if (!out.buffer) {
    out.kind = Value::kEmpty;
    api_set_error(ctx, "allocate_output: out of memory");
    return nullptr;
  }
  out.data = out.buffer.get();
  return out.data;
}

int32_t api_view_output(olc_context* ctx, int32_t index, int32_t input, int32_t ndim, const int64_t* shape) {
  if (!ctx || !ctx->run || !ctx->step) return OLC_ERROR;
  RunState& rs = *ctx->run;
  const Step& step = *ctx->step;
  if (index < 0 || static_cast<size_t>(index) >= step.outputs.size())
    return api_set_error(ctx, ("view_output: output index " + std::to_string(index) + " out of range").c_str());
  if (input < 0 || static_cast<size_t>(input) >= step.inputs.size() || step.inputs[input] < 0)
    return api_set_error(ctx, ("view_output: input " + std::to_string(input) + " is absent").c_str());
  const Value& in = rs.values[step.inputs[input]];
  if (in.kind != Value::kTensor)
    return api_set_error(ctx, ("view_output: input " + std::to_string(input) + " is not a tensor").c_str());
  if (ndim < 0 || (ndim > 0 && !shape)) return api_set_error(ctx, "view_output: invalid rank");
  uint64_t count = 1;
  for (int32_t d = 0; d < ndim; ++d) {
    if (shape[d] < 0 || __builtin_mul_overflow(count, static_cast<uint64_t>(shape[d]), &count))
      return api_set_error(ctx, "view_output: invalid or overflowing shape");
  }
  uint64_t in_count = 1;
  for (int32_t d = 0; d < in.shape.ndim(); ++d) in_count *= static_cast<uint64_t>(in.shape.data()[d]);
  if (count != in_count)
    return api_set_error(ctx, ("view_output: shape " + shape_str(shape, static_cast<size_t>(ndim)) + " holds " +
                               std::to_string(count) + " elements, input " + std::to_string(input) + " has " +
                               std::to_string(in_count)).c_str());
  Value& out = rs.values[step.outputs[index]];
  if (out.kind != Value::kEmpty)
    return api_set_error(ctx, ("view_output: output " + std::to_string(index) + " produced twice").c_str());
  out.kind = Value::kTensor;
  out.dtype = in.dtype;
  out.nbytes = in.nbytes;
  out.shape.assign(ndim, shape);
  out.data = in.data;
  out.external = in.external;
  if (in.obj) {
    // The reference stays with the value that owns it, kept past its
    // release until the run ends: no reference counting without the GIL.
    out.obj = in.obj;
    out.borrowed = true;
    if (!in.borrowed) rs.values[step.inputs[input]].pinned = true;
  } else {
    // Shared storage: its use count keeps in-place kernels off it while
    // both live.
    out.buffer = in.buffer;
    out.runtime_owned = in.runtime_owned;
  }
  return OLC_OK;
}

void api_record_usage_detail(olc_context* ctx, const char* detail) {
  if (!ctx || !ctx->run || !ctx->run->record || !detail) return;
  ctx->run->details.push_back(ctx->step->kernel_name + "[" + detail + "]");
}

// The kernel whose create() is running on this thread, and its node info:
// report_prepacked is only accepted for that node.
struct Creating {
  const olc_node_info* node = nullptr;
  std::vector<std::pair<uintptr_t, int64_t>>* prepacked = nullptr;
};
thread_local Creating t_creating;

void api_report_prepacked(const olc_node_info* node, const void* key, int64_t bytes) {
  if (!node || node != t_creating.node || !t_creating.prepacked || bytes < 0) return;
  t_creating.prepacked->emplace_back(reinterpret_cast<uintptr_t>(key), bytes);
}

}  // namespace

const olc_core_api* core_api() {
  static const olc_core_api api = [] {
    olc_core_api a;
    std::memset(&a, 0, sizeof(a));
    a.abi_version = OLC_ABI_VERSION;
    a.api_size = sizeof(olc_core_api);
    a.simd_level = api_simd_level;
    a.cpu_features = api_cpu_features;
    a.parallel_for = api_parallel_for;
    a.concurrency = api_concurrency;
    a.allocate_output = api_allocate_output;
    a.set_error = api_set_error;
    a.tuning_declare_int = tuning_declare_int;
    a.tuning_read_int = tuning_read_int;
    a.tuning_declare_float = tuning_declare_float;
    a.tuning_read_float = tuning_read_float;
    a.record_usage_detail = api_record_usage_detail;
    a.report_prepacked = api_report_prepacked;
    a.view_output = api_view_output;
    a.data_cache_bytes = data_cache_bytes;
    return a;
  }();
  return &api;
}

std::shared_ptr<NativeKernel> create_native_kernel(py::capsule capsule, py::dict node) {
  if (std::strcmp(capsule.name() ? capsule.name() : "", OLC_KERNEL_VTABLE_CAPSULE) != 0)
    throw std::invalid_argument(std::string("expected a capsule named '") +
                                OLC_KERNEL_VTABLE_CAPSULE + "'");
  auto* vt = capsule.get_pointer<const olc_kernel_vtable>();
  const std::string name = node["name"].cast<std::string>();
  const std::string op_type = node["op_type"].cast<std::string>();
  const std::string label = "node '" + name + "' (" + op_type + ")";
  if (!vt || vt->abi_version != OLC_ABI_VERSION)
    raise_olc_error(label + ": kernel " + (vt && vt->name ? vt->name : "?") +
                    " was built for kernel ABI " + std::to_string(vt ? vt->abi_version : 0) +
                    ", olc-core provides " + std::to_string(OLC_ABI_VERSION));
  const std::string domain = node["domain"].cast<std::string>();
  auto in_dtypes = node["input_dtypes"].cast<std::vector<int32_t>>();
  auto in_ranks = node["input_ranks"].cast<std::vector<int32_t>>();
  auto out_dtypes = node["output_dtypes"].cast<std::vector<int32_t>>();
  if (in_ranks.size() != in_dtypes.size()) throw std::invalid_argument("input_ranks size");

  // Attribute storage outlives create() only. INTS and FLOATS arrive as
  // int64 / float64 numpy arrays (session.py reads the repeated fields into
  // them) and are read in place: a tree ensemble's millions of values never
  // become Python objects. A list is converted once.
  struct AttrStore {
    std::string name, s;
    py::array array;
  };
  py::list attrs = node["attributes"];
  std::vector<AttrStore> store(attrs.size());
  std::vector<olc_attribute> cattrs(attrs.size());
  for (size_t i = 0; i < attrs.size(); ++i) {
    py::tuple a = attrs[i];
    store[i].name = a[0].cast<std::string>();
    olc_attribute& c = cattrs[i];
    std::memset(&c, 0, sizeof(c));
    c.type = a[1].cast<int32_t>();
    switch (c.type) {
      case OLC_ATTR_INT: c.i = a[2].cast<int64_t>(); break;
      case OLC_ATTR_FLOAT: c.f = a[2].cast<double>(); break;
      case OLC_ATTR_STRING: store[i].s = a[2].cast<std::string>(); break;
      case OLC_ATTR_INTS:
        store[i].array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a[2]);
        if (!store[i].array) throw py::error_already_set();
        break;
      case OLC_ATTR_FLOATS:
        store[i].array = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a[2]);
        if (!store[i].array) throw py::error_already_set();
        break;
      default: break;
    }
  }
  for (size_t i = 0; i < attrs.size(); ++i) {
    cattrs[i].name = store[i].name.c_str();
    cattrs[i].s = store[i].s.c_str();
    const bool list = cattrs[i].type == OLC_ATTR_INTS || cattrs[i].type == OLC_ATTR_FLOATS;
    const void* data = list ? store[i].array.data() : nullptr;
    cattrs[i].count = list ? static_cast<int64_t>(store[i].array.size()) : 0;
    cattrs[i].ints = cattrs[i].type == OLC_ATTR_INTS ? static_cast<const int64_t*>(data) : nullptr;
    cattrs[i].floats = cattrs[i].type == OLC_ATTR_FLOATS ? static_cast<const double*>(data) : nullptr;
  }
  // Constant inputs: views into arrays the session keeps for its lifetime.
  std::vector<olc_tensor> constants(in_dtypes.size(), olc_tensor{OLC_DTYPE_UNDEFINED, 0, nullptr, nullptr});
  std::vector<std::vector<int64_t>> constant_shapes(in_dtypes.size());
  py::list constant_values = node["input_constants"];
  for (size_t i = 0; i < in_dtypes.size() && i < constant_values.size(); ++i) {
    py::handle obj = constant_values[i];
    if (obj.is_none() || !py::isinstance<py::array>(obj)) continue;
    auto arr = py::reinterpret_borrow<py::array>(obj);
    const int32_t code = onnx_code_of(arr.dtype());
    if (code == OLC_DTYPE_UNDEFINED || (arr.flags() & kCAligned) != kCAligned) continue;
    constant_shapes[i].assign(arr.shape(), arr.shape() + arr.ndim());
    constants[i] = olc_tensor{code, static_cast<int32_t>(arr.ndim()), constant_shapes[i].data(),
                              const_cast<void*>(arr.data())};
  }
  olc_node_info info;
  info.input_constants = constants.data();
  info.name = name.c_str();
  info.domain = domain.c_str();
  info.op_type = op_type.c_str();
  info.opset = node["opset"].cast<int64_t>();
  info.n_inputs = static_cast<int32_t>(in_dtypes.size());
  info.input_dtypes = in_dtypes.data();
  info.input_ranks = in_ranks.data();
  info.n_outputs = static_cast<int32_t>(out_dtypes.size());
  info.output_dtypes = out_dtypes.data();
  info.n_attributes = static_cast<int32_t>(cattrs.size());
  info.attributes = cattrs.data();

  char error[1024] = {0};
  std::vector<std::pair<uintptr_t, int64_t>> prepacked;
  const Creating outer = t_creating;  // create() may, in principle, build a kernel itself
  t_creating = Creating{&info, &prepacked};
  void* state = vt->create(core_api(), &info, error, sizeof(error));
  t_creating = outer;
  if (!state) {
    error[sizeof(error) - 1] = 0;
    raise_olc_error(label + ": " + (error[0] ? error : "kernel creation failed without a message"));
  }
  auto kernel = std::make_shared<NativeKernel>(vt, state);
  kernel->prepacked = std::move(prepacked);
  return kernel;
}

void bind_runtime(py::module_& m) {
  g_dtypes = new DtypeTable();
  auto np = py::module_::import("numpy");
  const std::pair<int32_t, const char*> builtin[] = {
      {OLC_DTYPE_FLOAT, "float32"}, {OLC_DTYPE_UINT8, "uint8"},   {OLC_DTYPE_INT8, "int8"},
      {OLC_DTYPE_UINT16, "uint16"}, {OLC_DTYPE_INT16, "int16"},   {OLC_DTYPE_INT32, "int32"},
      {OLC_DTYPE_INT64, "int64"},   {OLC_DTYPE_BOOL, "bool"},     {OLC_DTYPE_FLOAT16, "float16"},
      {OLC_DTYPE_DOUBLE, "float64"}, {OLC_DTYPE_UINT32, "uint32"}, {OLC_DTYPE_UINT64, "uint64"}};
  for (auto& [code, name] : builtin) g_dtypes->numpy[code] = np.attr("dtype")(name);
  auto ml = py::module_::import("ml_dtypes");
  const std::pair<int32_t, const char*> extra[] = {{OLC_DTYPE_BFLOAT16, "bfloat16"},
                                                   {OLC_DTYPE_FLOAT8E4M3FN, "float8_e4m3fn"},
                                                   {OLC_DTYPE_FLOAT8E4M3FNUZ, "float8_e4m3fnuz"},
                                                   {OLC_DTYPE_FLOAT8E5M2, "float8_e5m2"},
                                                   {OLC_DTYPE_FLOAT8E5M2FNUZ, "float8_e5m2fnuz"},
                                                   {OLC_DTYPE_UINT4, "uint4"},
                                                   {OLC_DTYPE_INT4, "int4"}};
  for (auto& [code, name] : extra) {
    py::object dt = np.attr("dtype")(ml.attr(name));
    g_dtypes->numpy[code] = dt;
    g_dtypes->extra[g_dtypes->n_extra++] = {dt.attr("num").cast<int>(), code};
  }

  m.def("_set_error_type", [](py::object t) {
    Py_XINCREF(t.ptr());
    g_error_type = t.ptr();
  });

  py::class_<NativeKernel, std::shared_ptr<NativeKernel>>(m, "NativeKernel")
      .def_property_readonly("name",
                             [](const NativeKernel& k) { return std::string(k.vtable()->name); })
      .def_property_readonly("flags", [](const NativeKernel& k) { return k.vtable()->flags; })
      .def_property_readonly("prepacked", [](const NativeKernel& k) { return k.prepacked; },
                             "(buffer key, bytes) pairs the kernel reported from create()");
  m.def("create_kernel", &create_native_kernel, py::arg("vtable"), py::arg("node"),
        "Create a native kernel for one node from a vtable capsule.");
  m.def("vtable_name", [](py::capsule c) {
    if (std::strcmp(c.name() ? c.name() : "", OLC_KERNEL_VTABLE_CAPSULE) != 0)
      throw std::invalid_argument("not a kernel vtable capsule");
    auto* vt = c.get_pointer<const olc_kernel_vtable>();
    return std::string(vt->name ? vt->name : "");
  });

  py::class_<Executor, std::shared_ptr<Executor>>(m, "Executor")
      .def(py::init<int, int>(), py::arg("threads"), py::arg("participant_limit"))
      .def_property_readonly("threads", &Executor::threads);

  py::class_<Plan>(m, "Plan")
      .def(py::init<int32_t, int, int, bool, std::shared_ptr<Executor>>(), py::arg("n_values"), py::arg("threads"),
           py::arg("participant_limit"), py::arg("record_usage"), py::arg("executor") = nullptr)
      .def_property_readonly("executor", &Plan::shared_executor)
      .def("add_constant", &Plan::add_constant)
      .def("add_input", &Plan::add_input)
      .def("add_output", &Plan::add_output)
      .def("add_native_step", &Plan::add_native_step)
      .def("add_python_step", &Plan::add_python_step)
      .def("run", &Plan::run, py::arg("output_names"), py::arg("feeds"))
      .def("last_usage", &Plan::last_usage)
      .def("last_usage_details", &Plan::last_usage_details)
      .def("set_profiling", &Plan::set_profiling, py::arg("on"))
      .def("last_profile", &Plan::last_profile)
      .def("set_shape_plan", &Plan::set_shape_plan, py::arg("steps"), py::arg("frontier"),
           py::arg("capacity"), py::arg("max_bytes"))
      .def("shape_plan_stats", &Plan::shape_plan_stats)
      .def_property_readonly("threads", &Plan::threads);
}

}  // namespace olc
