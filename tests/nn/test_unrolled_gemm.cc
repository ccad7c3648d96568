// The matrix products of mona's LSTMs and unrolled layers (src/nn/unrolled.h) under signals.
//
// Debian's oneDNN (2.6) runs its float32 GEMM in JIT kernels that point the stack pointer
// into a heap buffer while they run (oneDNN issue #4845, fixed in 3.11). A signal delivered
// to the thread then has its frame written by the kernel over that heap memory: `mona train`
// stopped with SIGINT aborted in 4 of 12 runs ("corrupted size vs. prev_size"), and a
// Python user's Ctrl-C or a sampling profiler hits the same. gemm_into holds asynchronous
// signals back for the length of the call, so they arrive between products.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/time.h>
#include <torch/torch.h>

#include <atomic>
#include <cmath>

#include "../src/nn/unrolled.h"

namespace mona::test {
namespace {

std::atomic<int64_t> g_gemm_test_signals{0};
extern "C" void count_gemm_test_signal(int) { g_gemm_test_signals.fetch_add(1, std::memory_order_relaxed); }

// Every entry of out [M, N] against the float64 product within the standard bound of a
// float32 dot product of K terms: |error| <= K u sum_k |a_ik b_kj| (u = 2^-24; 2u for the
// accumulation and rounding order oneDNN may use).
void expect_sgemm_product(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ref = at::mm(a.to(at::kDouble), b.to(at::kDouble));
  const at::Tensor bound = at::mm(a.abs().to(at::kDouble), b.abs().to(at::kDouble)) * (a.size(1) * std::ldexp(2.0, -24));
  const at::Tensor excess = (out.to(at::kDouble) - ref).abs() - bound;
  EXPECT_LE(excess.max().item<double>(), 0.0) << "[" << a.size(0) << ", " << a.size(1) << "] x [" << b.size(1) << "]";
}

TEST(UnrolledGemm, SignalsDuringProductsLeaveTheHeapIntact) {
  torch::manual_seed(3);
  // The G2P recipe's shapes: B = 32 and B T = 288 rows, K = 128 and 320, N = 512; the
  // weights as the forward pass reads them (w.t(), a transposed view) and as stored.
  struct Case {
    at::Tensor a, b;
  };
  std::vector<Case> cases;
  for (int64_t M : {32, 288}) {
    for (int64_t K : {128, 320}) {
      cases.push_back({torch::randn({M, K}), torch::randn({512, K}).t()});
      cases.push_back({torch::randn({M, K}), torch::randn({K, 512})});
    }
  }
  struct sigaction sa {}, old_sa{};
  sa.sa_handler = count_gemm_test_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ASSERT_EQ(sigaction(SIGPROF, &sa, &old_sa), 0);
  // SIGPROF as often as the profiling timer fires (asked for every 20 us of CPU time, it
  // comes at the kernel's tick), most of them while a product runs: without the guard the
  // process aborted in malloc in 4 of 4 runs of these 400 rounds (2026-11-28).
  itimerval every{}, off{};
  every.it_interval.tv_usec = 20;
  every.it_value.tv_usec = 20;
  ASSERT_EQ(setitimer(ITIMER_PROF, &every, nullptr), 0);
  g_gemm_test_signals = 0;
  std::vector<at::Tensor> outs(cases.size());
  for (int round = 0; round < 400; ++round) {
    for (size_t c = 0; c < cases.size(); ++c) {
      outs[c] = nn::detail::gemm(cases[c].a, cases[c].b);
      std::vector<char> churn(static_cast<size_t>(1000 + 37 * round));  // malloc and free between products
      churn[0] = 1;
    }
  }
  ASSERT_EQ(setitimer(ITIMER_PROF, &off, nullptr), 0);
  ASSERT_EQ(sigaction(SIGPROF, &old_sa, nullptr), 0);
  // The profiling timer fires on the kernel's tick (100-1000 Hz): over about a second, 100 or more.
  EXPECT_GE(g_gemm_test_signals.load(), 50) << "too few signals arrived to test anything";
  for (size_t c = 0; c < cases.size(); ++c) expect_sgemm_product(outs[c], cases[c].a, cases[c].b);
}

}  // namespace
}  // namespace mona::test
