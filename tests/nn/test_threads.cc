// mona/nn/threads.h: a thread mona starts (an evaluation worker, a training shard) runs its
// operators on itself alone, whatever thread count the process was given; OpenBLAS runs the
// kernel family of the CPU's vector units.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <strings.h>

#include <cmath>
#include <cstdlib>
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

// OpenBLAS's kernel family (mona/nn/threads.h): only a fall-back to Prescott is replaced, by
// the family Debian's OpenBLAS 0.3.21 gives a CPU it knows with the same vector units.
TEST(BlasKernels, OnlyAPrescottFallBackIsReplacedByTheCpusFamily) {
  using mona::nn::detail::better_blas_kernels;
  using Units = mona::nn::detail::CpuVectorUnits;
  const Units sse{false, false}, avx2{true, false}, avx512{true, true};
  EXPECT_STREQ(better_blas_kernels("Prescott", avx512), "SkylakeX");
  EXPECT_STREQ(better_blas_kernels("PRESCOTT", avx512), "SkylakeX");  // OpenBLAS's names ignore case
  EXPECT_STREQ(better_blas_kernels("Prescott", avx2), "Haswell");
  EXPECT_EQ(better_blas_kernels("Prescott", sse), nullptr);  // Prescott is this CPU's family
  for (const char* picked : {"SkylakeX", "Cooperlake", "Haswell", "Zen", "Sandybridge", "Nehalem", "Prescot", ""}) {
    for (const Units& u : {sse, avx2, avx512}) {
      EXPECT_EQ(better_blas_kernels(picked, u), nullptr) << picked;  // a family OpenBLAS chose on purpose
    }
  }
}

// After set_threads, LibTorch's matrix products run on a family that is not a Prescott
// fall-back on this CPU (or on the family OPENBLAS_CORETYPE names: `make test` forces another
// one for its second run), the environment is as it was, and a product is still right:
// against a long-double sum, within K float ulps of the sum of magnitudes.
TEST(BlasKernels, SetThreadsLeavesOpenBlasOnTheCpusFamilyAndProductsRight) {
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  const std::string forced = env ? env : "";
  const bool was_set = env != nullptr;
  mona::nn::set_threads(1);
  const std::string family = mona::nn::use_best_blas_kernels();
  ASSERT_FALSE(family.empty()) << "libblas.so.3 is not OpenBLAS (scripts/install-deps.sh installs it)";
  if (forced.empty()) {
    EXPECT_EQ(mona::nn::detail::better_blas_kernels(family, mona::nn::detail::cpu_vector_units()), nullptr)
        << "OpenBLAS still runs its Prescott fall-back: " << family;
  } else {
    EXPECT_TRUE(strcasecmp(family.c_str(), forced.c_str()) == 0) << family << " against OPENBLAS_CORETYPE=" << forced;
  }
  const char* after = std::getenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(after != nullptr, was_set);
  if (after) {
    EXPECT_EQ(std::string(after), forced);
  }

  const int64_t M = 64, K = 192, N = 512;  // a decoder cell's product in the G2P recipe
  at::manual_seed(7);
  const at::Tensor a = at::randn({M, K}), b = at::randn({K, N});
  const at::Tensor c = at::mm(a, b);
  const auto A = a.accessor<float, 2>(), Bm = b.accessor<float, 2>(), C = c.accessor<float, 2>();
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      long double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < K; ++k) {
        sum += static_cast<long double>(A[i][k]) * Bm[k][j];
        magnitude += std::fabs(static_cast<long double>(A[i][k]) * Bm[k][j]);
      }
      ASSERT_LE(std::fabs(static_cast<long double>(C[i][j]) - sum), K * 0x1p-24L * magnitude) << i << ", " << j;
    }
  }
}
