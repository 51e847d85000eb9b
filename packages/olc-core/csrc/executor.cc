#include "executor.h"

#include <algorithm>
#include <chrono>

#if defined(__linux__)
#include <sched.h>
#endif

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define OLC_CPU_RELAX() _mm_pause()
#else
#define OLC_CPU_RELAX() \
  do {                  \
  } while (0)
#endif

namespace olc {

namespace {
thread_local int tls_parallel_depth = 0;

struct DepthGuard {
  DepthGuard() { ++tls_parallel_depth; }
  ~DepthGuard() { --tls_parallel_depth; }
};

// Workers spin this long for new work before sleeping: consecutive nodes of
// one run submit work microseconds apart, and a futex wake-up costs more.
// Long enough to span the gap between two runs of a Python inference loop
// too (a model's serial tail, Session.run's return and the next call: 50-100
// us), or the first parallel node of every run waits for a worker to wake.
// ResNet-style stack on two threads against onnxruntime, 2-vCPU VM, four
// runs each alternating: 50 us 0.69-1.04 (median 0.95), 200 us 0.99-1.04
// (1.02); MobileNet-style 1.36-1.44 -> 1.39-1.62.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(200);
// A spinning worker joins a job within this long.
constexpr auto kArrivalExpected = std::chrono::microseconds(3);
}  // namespace

// A job's range is cut into one equal contiguous span per participant
// slot, each span into a few chunks. The submitter is slot 0 and worker i
// prefers slot i, so a kernel run again over the same buffers gives each
// thread the same part of them, which is still in that thread's caches. A
// participant that finishes its span takes chunks from the far end of the
// others' (balance when one is preempted), and until a span's worker has
// arrived, the others take one chunk of it after each of their own (balance
// when a worker wakes late). Measured on a
// 2-core Zen 4, float32 Mul by a scalar over 4M elements on two threads,
// repeated: one chunk queue shared by both threads 240-400 us per run, a
// span per thread 215-300 us.
//
// Sixteen chunks per span: on a shared host one vCPU often runs slower than
// the other for a while, and what the faster thread can take over from the
// slower one is whole chunks from the far end. With four, float32 binary
// ops over 4M elements on two threads (16 MiB read, 16 MiB written; same
// windows, alternating, µs): Mul outer 475/607 -> 442/538, Add row 503 ->
// 454, Sub left scalar 658 -> 429, Div outer 459 -> 432; a right scalar
// 436 -> 439 (both threads even). At 1M elements, where a span has at most
// 24 items, 16 was even with 4 (58 us) and 32 or 64 slower (65-67 us).
struct Executor::Job {
  static constexpr int64_t kChunksPerSpan = 16;

  struct Span {
    int64_t begin = 0, size = 0, chunks = 0;
    // The unclaimed chunks [front, back), packed as front << 32 | back.
    std::atomic<uint64_t> left{0};
    std::atomic<bool> taken{false};  // owned by a participant
  };

  olc_range_fn fn;
  void* user;
  int64_t chunks = 0;  // over all spans
  int slots = 0;
  int submitter_cpu = -1;
  std::chrono::steady_clock::time_point submitted;
  bool yielded = false;  // the submitter gave up its CPU once (work_on)
  std::unique_ptr<Span[]> spans;
  std::atomic<int64_t> finished{0};
  std::mutex mutex;
  std::condition_variable done;

  // [0, n) in `participants` spans of equal size (to one item), each in up
  // to kChunksPerSpan chunks of at least `grain` items (a span shorter than
  // `grain`, when n is not a multiple of it, is one chunk).
  void deal(int64_t n, int64_t grain, int participants) {
    slots = participants;
    spans.reset(new Span[participants]);
    const int64_t base = n / participants, extra = n % participants;
    int64_t at = 0;
    for (int s = 0; s < participants; ++s) {
      Span& sp = spans[s];
      sp.begin = at;
      sp.size = base + (s < extra ? 1 : 0);
      sp.chunks = std::min(kChunksPerSpan, std::max<int64_t>(1, sp.size / grain));
      sp.left.store(static_cast<uint64_t>(sp.chunks), std::memory_order_relaxed);
      sp.taken.store(s == 0, std::memory_order_relaxed);
      at += sp.size;
      chunks += sp.chunks;
    }
  }

  // One chunk of span s, from the front for its owner, else from the back;
  // false when none is left.
  bool claim(int s, bool front, int64_t* begin, int64_t* end) {
    Span& sp = spans[s];
    uint64_t v = sp.left.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t f = v >> 32, b = v & 0xffffffffu;
      if (f >= b) return false;
      const uint64_t next = front ? ((f + 1) << 32) | b : (f << 32) | (b - 1);
      if (sp.left.compare_exchange_weak(v, next, std::memory_order_relaxed)) {
        const int64_t c = static_cast<int64_t>(front ? f : b - 1);
        *begin = sp.begin + sp.size / sp.chunks * c + std::min(c, sp.size % sp.chunks);
        *end = *begin + sp.size / sp.chunks + (c < sp.size % sp.chunks ? 1 : 0);
        return true;
      }
    }
  }

  // The submitter gives up its CPU once per job when no worker has joined
  // in the time a spinning one takes (see work_on).
  void yield_if_alone() {
    if (yielded || std::chrono::steady_clock::now() - submitted <= kArrivalExpected) return;
    for (int s = 1; s < slots; ++s)
      if (spans[s].taken.load(std::memory_order_relaxed)) return;
    yielded = true;
    sched_yield();
  }

  // The slot a participant works from: `preferred` if free, else the first
  // free one; -1 when every slot is owned (it only steals then).
  int take_slot(int preferred) {
    if (preferred >= 0 && preferred < slots && !spans[preferred].taken.exchange(true)) return preferred;
    for (int s = 0; s < slots; ++s)
      if (!spans[s].taken.exchange(true)) return s;
    return -1;
  }
};

bool Executor::in_parallel_region() { return tls_parallel_depth > 0; }

namespace {
int current_cpu() {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

// A worker woken by the caller is often placed on the caller's own CPU
// (wake-affine placement) and then shares it for milliseconds until the load
// balancer moves one of them: a two-thread run is then as slow as a serial
// one. A worker that finds itself there steps off that CPU for the job.
class AvoidCpu {
 public:
  explicit AvoidCpu(int cpu) {
#if defined(__linux__)
    if (cpu < 0 || current_cpu() != cpu) return;
    cpu_set_t others;
    if (sched_getaffinity(0, sizeof(saved_), &saved_) != 0) return;
    others = saved_;
    CPU_CLR(cpu, &others);
    if (CPU_COUNT(&others) == 0) return;
    moved_ = sched_setaffinity(0, sizeof(others), &others) == 0;
#else
    (void)cpu;
#endif
  }
  ~AvoidCpu() {
#if defined(__linux__)
    if (moved_) sched_setaffinity(0, sizeof(saved_), &saved_);
#endif
  }
  AvoidCpu(const AvoidCpu&) = delete;
  AvoidCpu& operator=(const AvoidCpu&) = delete;

 private:
#if defined(__linux__)
  cpu_set_t saved_;
#endif
  bool moved_ = false;
};
}  // namespace

Executor::Executor(int threads, int participant_limit)
    : threads_(std::max(1, threads)), participant_limit_(participant_limit) {
  workers_.reserve(threads_ - 1);
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

int Executor::admitted(int requested) const {
  int n = threads_;
  if (participant_limit_ > 0) n = std::min(n, participant_limit_);
  if (requested > 0) n = std::min(n, requested);
  return std::max(1, n);
}

void Executor::work_on(Job& job, int slot) {
  DepthGuard guard;
  auto run = [&job](int64_t begin, int64_t end) {
    job.fn(job.user, begin, end);
    if (job.finished.fetch_add(1, std::memory_order_acq_rel) + 1 == job.chunks) {
      std::lock_guard<std::mutex> lock(job.mutex);
      job.done.notify_all();
    }
  };
  int64_t begin, end;
  if (slot >= 0) {
    while (job.claim(slot, true, &begin, &end)) {
      run(begin, end);
      // The submitter, when no worker has joined in the time a spinning one
      // takes: a worker woken onto this CPU (wake-affine placement, common
      // in VMs whose idle vCPUs look busy to the scheduler) waits behind
      // this thread, which does not block, for milliseconds while the other
      // CPU idles. Giving up the CPU once lets it run, step off (AvoidCpu)
      // and take its span. Measured on a 2-vCPU VM, one row through 500
      // trees on two threads: without, some blocks of runs took 9 us (the
      // worker queued here 7 ms of every 10), the others 5.4 us; with it,
      // every block 5.4 us.
      if (slot == 0) job.yield_if_alone();
      // Spans whose worker has not arrived yet (asleep, or waiting for a
      // CPU) get a chunk from their far end after each chunk of our own, so
      // a late worker delays a short job by half its lateness, not all of it.
      for (int k = 1; k < job.slots; ++k) {
        const int s = (slot + k) % job.slots;
        if (!job.spans[s].taken.load(std::memory_order_relaxed) && job.claim(s, false, &begin, &end)) run(begin, end);
      }
    }
  }
  for (int k = 1; k <= job.slots; ++k) {
    const int s = ((slot < 0 ? 0 : slot) + k) % job.slots;
    while (job.claim(s, false, &begin, &end)) run(begin, end);
  }
}

void Executor::parallel_for(int64_t n, int64_t grain, int max_participants,
                            olc_range_fn fn, void* user) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_useful = (n + grain - 1) / grain;
  const int participants =
      static_cast<int>(std::min<int64_t>(admitted(max_participants), max_useful));
  if (participants <= 1 || in_parallel_region()) {
    DepthGuard guard;
    fn(user, 0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = fn;
  job->user = user;
  // A few chunks per participant balance uneven progress without making
  // the per-chunk bookkeeping visible.
  job->deal(n, grain, participants);
  job->submitter_cpu = current_cpu();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int i = 1; i < participants; ++i) queue_.push_back(job);
    queued_.fetch_add(participants - 1, std::memory_order_release);
  }
  job->submitted = std::chrono::steady_clock::now();
  wake_.notify_all();
  work_on(*job, 0);
  job->yield_if_alone();  // a job done alone: for the next one (see work_on)
  // Wait for ranges still running on workers; spin briefly first.
  for (int spin = 0; spin < 4096; ++spin) {
    if (job->finished.load(std::memory_order_acquire) == job->chunks) return;
    OLC_CPU_RELAX();
  }
  std::unique_lock<std::mutex> lock(job->mutex);
  job->done.wait(lock, [&] { return job->finished.load(std::memory_order_acquire) == job->chunks; });
}

void Executor::worker_loop(int index) {
  for (;;) {
    // Spin a little for the next submission before blocking.
    const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    while (queued_.load(std::memory_order_acquire) == 0 &&
           std::chrono::steady_clock::now() < spin_until) {
      for (int i = 0; i < 64; ++i) OLC_CPU_RELAX();
    }
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      job = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    AvoidCpu avoid(job->submitter_cpu);
    work_on(*job, job->take_slot(index));
  }
}

}  // namespace olc
