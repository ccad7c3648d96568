// src/train/worker_team.h, the threads of a training step: every part runs once per run, part
// 0 on the caller and part k on worker k - 1 (the thread that ran on_start), its writes seen
// by the caller when run() returns; both ways of waiting (polling, then sleeping) over many
// runs; the lowest part's exception rethrown after every part has ended; errors naming the
// argument.
#include "../src/train/worker_team.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mona/core/error.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

using train::WorkerTeam;
using std::chrono::microseconds;

// Runs `rounds` runs of every size 1 .. workers + 1 and checks each part's thread and that
// the caller sees each part's write (plain ints: a missing happens-before would be a data race
// that ThreadSanitizer, and on weaker machines the values, would show).
void check_runs(int64_t workers, microseconds spin, int rounds) {
  std::mutex m;
  std::vector<std::thread::id> started;
  WorkerTeam team(workers, spin, [&] {
    std::lock_guard<std::mutex> lock(m);
    started.push_back(std::this_thread::get_id());
  });
  ASSERT_EQ(team.workers(), workers);
  const auto caller = std::this_thread::get_id();
  for (int r = 0; r < rounds; ++r) {
    for (size_t n = 1; n <= static_cast<size_t>(workers) + 1; ++n) {
      std::vector<int> value(n, -1);
      std::vector<std::thread::id> thread(n);
      team.run(n, [&](size_t k) {
        value[k] = static_cast<int>(k) + r;
        thread[k] = std::this_thread::get_id();
      });
      for (size_t k = 0; k < n; ++k) ASSERT_EQ(value[k], static_cast<int>(k) + r) << "part " << k << " of " << n;
      ASSERT_EQ(thread[0], caller);
      std::set<std::thread::id> distinct(thread.begin(), thread.end());
      ASSERT_EQ(distinct.size(), n) << "run " << r << " of " << n << " parts";
    }
  }
  std::lock_guard<std::mutex> lock(m);
  ASSERT_EQ(started.size(), static_cast<size_t>(workers));
  const std::set<std::thread::id> workers_seen(started.begin(), started.end());
  // Part k >= 1 ran on a thread that ran on_start, and not on the caller.
  std::vector<std::thread::id> last(static_cast<size_t>(workers) + 1);
  team.run(last.size(), [&](size_t k) { last[k] = std::this_thread::get_id(); });
  for (size_t k = 1; k < last.size(); ++k) EXPECT_EQ(workers_seen.count(last[k]), 1u) << "part " << k;
}

TEST(WorkerTeam, EveryPartOncePolling) { check_runs(3, microseconds(2000), 2000); }

// spin 0: every wait sleeps on the condition variables (the path a run takes after a long gap).
TEST(WorkerTeam, EveryPartOnceSleeping) { check_runs(3, microseconds(0), 2000); }

// A gap longer than the poll between runs: the workers have gone to sleep and are woken.
TEST(WorkerTeam, WakesSleepingWorkers) {
  WorkerTeam team(2, microseconds(100));
  for (int r = 0; r < 5; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    std::atomic<int> ran{0};
    team.run(3, [&](size_t) { ++ran; });
    EXPECT_EQ(ran.load(), 3);
  }
}

TEST(WorkerTeam, RethrowsTheLowestPartsErrorAfterAllEnded) {
  WorkerTeam team(3, microseconds(500));
  std::atomic<int> ended{0};
  try {
    team.run(4, [&](size_t k) {
      if (k == 3) {
        ++ended;
        throw std::runtime_error("part 3");
      }
      if (k == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ++ended;
        throw std::runtime_error("part 1");
      }
      ++ended;
    });
    ADD_FAILURE() << "expected part 1's error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "part 1");
  }
  EXPECT_EQ(ended.load(), 4);
  // The caller's own part throwing, and the team usable after errors.
  EXPECT_THROW(team.run(2, [](size_t k) {
    if (k == 0) throw std::invalid_argument("part 0");
  }),
               std::invalid_argument);
  std::atomic<int> ran{0};
  team.run(4, [&](size_t) { ++ran; });
  EXPECT_EQ(ran.load(), 4);
}

TEST(WorkerTeam, ErrorsNameTheArgument) {
  expect_error([] { WorkerTeam team(0, microseconds(10)); }, "WorkerTeam: workers: expected >= 1, got 0");
  expect_error([] { WorkerTeam team(1, microseconds(-1)); }, "WorkerTeam: spin: expected >= 0 us, got -1");
  WorkerTeam team(2, microseconds(10));
  expect_error([&] { team.run(0, [](size_t) {}); }, "WorkerTeam::run: n: expected 1 to 3 parts");
  expect_error([&] { team.run(4, [](size_t) {}); }, "got 4");
}

}  // namespace
}  // namespace mona::test
