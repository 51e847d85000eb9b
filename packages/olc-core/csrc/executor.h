// The session executor: a fixed pool of worker threads that kernels reach
// through olc_core_api::parallel_for. The calling thread always takes part,
// so a pool for N threads owns N - 1 workers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "olc/kernel_abi.h"

namespace olc {

class Executor {
 public:
  // threads >= 1; participant_limit <= 0 means "all threads".
  Executor(int threads, int participant_limit);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  int threads() const { return threads_; }
  int participant_limit() const { return participant_limit_; }
  // Participants a kernel asking for `requested` (<= 0: any) may get.
  int admitted(int requested) const;

  void parallel_for(int64_t n, int64_t grain, int max_participants,
                    olc_range_fn fn, void* user);

  // True on a thread that is running a range of some parallel_for: nested
  // parallel regions run inline there.
  static bool in_parallel_region();

 private:
  struct Job;
  void worker_loop(int index);
  static void work_on(Job& job, int slot);

  const int threads_;
  const int participant_limit_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;  // one entry per helper wanted
  std::atomic<int> queued_{0};
  bool stopping_ = false;
};

// Serial execution used outside a session (ctx == NULL) and for one thread.
inline void run_serial(int64_t n, olc_range_fn fn, void* user) {
  if (n > 0) fn(user, 0, n);
}

}  // namespace olc
