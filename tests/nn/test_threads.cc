// mona/nn/threads.h: a thread mona starts (an evaluation worker, a training shard) runs its
// operators on itself alone, whatever thread count the process was given.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

#include "mona/nn/threads.h"
#include "util/temp_dir.h"

namespace {

// The OpenMP threads that one parallel ATen loop ran on, in a new std::thread, with or
// without run_operators_on_this_thread() at its start.
std::set<int> threads_of_a_parallel_loop(bool on_this_thread_alone) {
  std::set<int> seen;
  std::mutex m;
  std::thread worker([&] {
    if (on_this_thread_alone) mona::nn::run_operators_on_this_thread();
    // Several loops: the first one is where ATen initialises the thread's team size.
    for (int k = 0; k < 3; ++k) {
      at::parallel_for(0, 1024, 1, [&](int64_t, int64_t) {
        std::lock_guard<std::mutex> lock(m);
        seen.insert(at::get_thread_num());
      });
    }
  });
  worker.join();
  return seen;
}

}  // namespace

TEST(Threads, AThreadMonaStartsRunsItsOperatorsAloneWhateverTheProcessCount) {
  const int before = at::get_num_threads();
  mona::nn::set_threads(2);
  // Without it, ATen gives a new thread the process's count at its first parallel loop
  // (two threads each running two-thread teams on two cores; the reason for this function).
  EXPECT_EQ(threads_of_a_parallel_loop(false), (std::set<int>{0, 1}));
  EXPECT_EQ(threads_of_a_parallel_loop(true), (std::set<int>{0}));
  mona::nn::set_threads(before);
}

TEST(Threads, SetThreadsRefusesFewerThanOne) {
  EXPECT_ERROR_CONTAINS(mona::nn::set_threads(0), "threads", "got 0");
}
