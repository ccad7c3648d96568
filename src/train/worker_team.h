// Internal (mona::train): the threads that run the parts of a training step together.
//
// A training step with train.threads = n forks n parts three times (the shards' forward and
// backward passes, the gradients' sums, the Adam update; trainer.cc, train_step) and joins
// them each time. Between the forks each thread has a short gap (the caller's serial work,
// or the slower shard). A thread that sleeps in such a gap (a condition variable) leaves its
// CPU idle, and under a hypervisor an idle virtual CPU halts (on the KVM guest of
// bench/notes.md at once: cpuidle driver haltpoll, guest_halt_poll_ns 0); the wake-up then
// waits for the host to run that CPU again. Measured on the 2-vCPU KVM machine of bench/notes.md
// ("G2P training on two threads: the team's wait"), `mona train` of the G2P recipe: with
// c10::ThreadPool the worker began its part 46-91 us after the fork on average (up to
// 2.7 ms), three forks a step of about 13 ms; with this team 0.9-17 us.
// So a waiting thread here first polls, as OpenMP runtimes do (GOMP_SPINCOUNT,
// KMP_BLOCKTIME), for up to `spin`, and only then sleeps. Past its first 50 us a poll also
// yields the CPU to any thread ready to run there, so a team larger than the free CPUs
// does not keep the thread it waits for off its CPU (tests/train/test_worker_team.cc runs
// four threads on two CPUs).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mona::train {

class WorkerTeam {
 public:
  /// Starts `workers` threads (>= 1), each of which first runs `on_start` (when given).
  /// `spin`: how long a waiting thread (a worker between runs, the caller waiting for the
  /// workers) polls before it sleeps. Throws mona::ArgumentError when workers < 1 or spin < 0,
  /// and std::system_error when a thread cannot be started (those started are ended first).
  WorkerTeam(int64_t workers, std::chrono::microseconds spin, std::function<void()> on_start = {});
  /// Stops and joins the workers (each ends after the run it is in).
  ~WorkerTeam();
  WorkerTeam(const WorkerTeam&) = delete;
  WorkerTeam& operator=(const WorkerTeam&) = delete;

  int64_t workers() const { return static_cast<int64_t>(threads_.size()); }

  /// Runs part(k) for k = 0 .. n - 1: part(0) on the calling thread, part(k) on worker k - 1,
  /// and returns when every part has ended. Rethrows the exception of the lowest k that threw,
  /// after all parts have ended. Throws mona::ArgumentError when n is 0 or more than
  /// workers() + 1. One run at a time (the caller's thread is part of it).
  void run(size_t n, const std::function<void(size_t)>& part);

 private:
  void work(size_t index, const std::function<void()>& on_start);
  void stop();  // ends and joins the workers

  const std::chrono::microseconds spin_;
  std::mutex mutex_;
  std::condition_variable posted_;    // workers sleep on it between runs
  std::condition_variable finished_;  // the caller sleeps on it until `pending_` is 0
  std::atomic<uint64_t> round_{0};    // run() counts its runs; a worker waits for a new one
  std::atomic<int64_t> pending_{0};   // workers that have not yet ended their part of the run
  std::atomic<bool> stop_{false};
  // The run's: written before round_ is raised (release), read after a worker sees it (acquire).
  const std::function<void(size_t)>* part_ = nullptr;
  size_t parts_ = 0;
  std::vector<std::exception_ptr> errors_;  // by k
  std::vector<std::thread> threads_;
};

}  // namespace mona::train
