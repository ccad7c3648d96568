// The threads of a training step; see worker_team.h.
#include "worker_team.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "mona/core/error.h"

namespace mona::train {
namespace {

// Polls ready() until it holds or `budget` has passed; says whether it holds. The pause
// instruction tells the core this is a wait loop (it yields the pipeline to a sibling
// hyperthread and avoids the memory-order flush when the value changes). After the first
// kPauseOnly of polling, each poll also offers the CPU to any other thread that is ready to
// run on it (sched_yield), so that a team with more threads than free CPUs does not keep
// the thread that is to end the wait off its CPU.
constexpr std::chrono::microseconds kPauseOnly{50};

template <class Ready>
bool poll(const Ready& ready, std::chrono::microseconds budget) {
  if (ready()) return true;
  if (budget.count() == 0) return false;
  const auto start = std::chrono::steady_clock::now();
  bool yield = false;
  for (unsigned i = 1;; ++i) {
    if (yield) {
      std::this_thread::yield();
    } else {
#if defined(__x86_64__) || defined(__i386__)
      _mm_pause();
#endif
    }
    if (ready()) return true;
    if (yield || i % 64 == 0) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited >= budget) return ready();
      yield = waited >= kPauseOnly;
    }
  }
}

}  // namespace

WorkerTeam::WorkerTeam(int64_t workers, std::chrono::microseconds spin, std::function<void()> on_start)
    : spin_(spin) {
  MONA_CHECK(workers >= 1, "WorkerTeam: workers: expected >= 1, got ", workers);
  MONA_CHECK(spin.count() >= 0, "WorkerTeam: spin: expected >= 0 us, got ", spin.count());
  threads_.reserve(static_cast<size_t>(workers));
  try {
    for (int64_t i = 0; i < workers; ++i) {
      threads_.emplace_back([this, i, on_start] { work(static_cast<size_t>(i), on_start); });
    }
  } catch (...) {  // a thread that could not start (std::system_error): end those that did
    stop();
    throw;
  }
}

WorkerTeam::~WorkerTeam() { stop(); }

void WorkerTeam::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    round_.fetch_add(1, std::memory_order_release);
  }
  posted_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerTeam::work(size_t index, const std::function<void()>& on_start) {
  if (on_start) on_start();
  uint64_t seen = 0;
  for (;;) {
    const auto is_posted = [&] { return round_.load(std::memory_order_acquire) != seen; };
    if (!poll(is_posted, spin_)) {
      std::unique_lock<std::mutex> lock(mutex_);
      posted_.wait(lock, is_posted);
    }
    seen = round_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    const size_t k = index + 1;
    if (k < parts_) {
      try {
        (*part_)(k);
      } catch (...) {
        errors_[k] = std::current_exception();
      }
    }
    // Every worker reports, taking part or not, so that none can still be reading this run's
    // fields when the caller posts the next one.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.notify_one();
    }
  }
}

void WorkerTeam::run(size_t n, const std::function<void(size_t)>& part) {
  MONA_CHECK(n >= 1 && n <= threads_.size() + 1, "WorkerTeam::run: n: expected 1 to ", threads_.size() + 1,
             " parts (the caller and ", threads_.size(), " workers), got ", n);
  if (n == 1) {
    part(0);
    return;
  }
  part_ = &part;
  parts_ = n;
  errors_.assign(n, nullptr);
  pending_.store(static_cast<int64_t>(threads_.size()), std::memory_order_relaxed);
  {
    // Raised under the lock: a worker that found no new run under it is then already asleep
    // when the notification comes.
    std::lock_guard<std::mutex> lock(mutex_);
    round_.fetch_add(1, std::memory_order_release);
  }
  posted_.notify_all();
  try {
    part(0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  const auto all_ended = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!poll(all_ended, spin_)) {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, all_ended);
  }
  for (const std::exception_ptr& e : errors_) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace mona::train
