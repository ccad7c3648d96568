// label: gmm
// GMM / SAGMM / SAGMM-tr modules and autograd functions (mona/nn/gmm_attention.h):
// finite-difference gradients through the autograd functions, step() unrolled against
// forward(), streaming hard steps against the offline weights, the length penalty, the EOS
// frame and argument errors.
#include "mona/nn/gmm_attention.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include <vector>

#include "util/nn_test_util.h"

namespace mona::test {
namespace {

using core::GmmWindow;
using nn::AttentionOptions;
using mona::core::ScanStatus;

AttentionOptions gmm_small_options() {
  AttentionOptions o;
  o.query_dim = 3;
  o.memory_dim = 4;
  o.seed = 5;
  return o;
}

core::GmmOptions window(GmmWindow w, int64_t width = 3) {
  core::GmmOptions o;
  o.window = w;
  o.width = width;
  return o;
}

std::shared_ptr<nn::GmmAttention> make(bool source_aware, GmmWindow w, int64_t heads) {
  nn::AttentionOptions o = gmm_small_options();
  o.gmm.num_heads = heads;
  o.gmm.window_width = window(w).width;
  o.gmm.window_radius = window(w).radius;
  auto a = std::make_shared<nn::GmmAttention>(o, source_aware, w);
  a->to(torch::kDouble);
  a->eval();
  return a;
}

const GmmWindow kWindows[] = {GmmWindow::kNone, GmmWindow::kAdaptive, GmmWindow::kFixed};

TEST(GmmFunctional, GradientsMatchFiniteDifferences) {
  torch::manual_seed(1);
  const int64_t B = 2, U = 3, T = 7, H = 2;
  auto in_lens = torch::tensor({7, 5}, torch::kLong);
  auto out_lens = torch::tensor({3, 2}, torch::kLong);
  for (GmmWindow w : kWindows) {
    auto mu = (torch::rand({B, U, H}, torch::kDouble) * 6).requires_grad_();
    auto var = (torch::rand({B, U, H}, torch::kDouble) * 2 + 0.3).requires_grad_();
    auto mix = torch::softmax(torch::randn({B, U, H}, torch::kDouble), -1).requires_grad_();
    auto delta = (torch::rand({B, T}, torch::kDouble) * 0.8 + 0.2);
    auto nu = torch::cumsum(delta, 1).requires_grad_();
    delta.requires_grad_();
    auto W = torch::randn({B, U, T}, torch::kDouble);
    auto loss = [&] {
      return (nn::gmm_attention_weights(mu, var, mix, nu, delta, window(w), in_lens, out_lens) * W)
          .sum();
    };
    loss().backward();
    auto f = [&] { return loss().item<double>(); };
    expect_grad_close(mu.grad(), numeric_grad(f, mu.detach()), 1e-6, "mu");
    expect_grad_close(var.grad(), numeric_grad(f, var.detach()), 1e-6, "variance");
    expect_grad_close(mix.grad(), numeric_grad(f, mix.detach()), 1e-6, "weights");
    expect_grad_close(nu.grad(), numeric_grad(f, nu.detach()), 1e-6, "nu");
    expect_grad_close(delta.grad(), numeric_grad(f, delta.detach()), 1e-6, "delta");
  }
}

TEST(GmmFunctional, LengthPenalty) {
  torch::manual_seed(2);
  auto mu = torch::rand({2, 3, 1}, torch::kDouble).mul(4).requires_grad_();
  auto nu = torch::rand({2, 5}, torch::kDouble).cumsum(1).requires_grad_();
  auto in_lens = torch::tensor({5, 2}, torch::kLong);
  auto out_lens = torch::tensor({3, 3}, torch::kLong);
  const double lambda = 5e-4;
  auto loss = nn::gmm_length_penalty(mu, nu, lambda, in_lens, out_lens);
  // b = 0: I = 3, J = 5, m = 3; b = 1: I = 3, J = 2, m = 2.
  // float64 values ~1e-3: rounding ~1e-19, so 1e-15 is loose and still sees any wrong index.
  const double e0 = lambda * (std::pow(mu[0][2][0].item<double>() - 3, 2) +
                              std::pow(nu[0][4].item<double>() - 3, 2));
  const double e1 = lambda * (std::pow(mu[1][2][0].item<double>() - 2, 2) +
                              std::pow(nu[1][1].item<double>() - 2, 2));
  EXPECT_NEAR(loss[0].item<double>(), e0, 1e-15);
  EXPECT_NEAR(loss[1].item<double>(), e1, 1e-15);
  loss.sum().backward();
  auto f = [&] { return nn::gmm_length_penalty(mu, nu, lambda, in_lens, out_lens).sum().item<double>(); };
  expect_grad_close(mu.grad(), numeric_grad(f, mu.detach()), 1e-7, "mu");
  expect_grad_close(nu.grad(), numeric_grad(f, nu.detach()), 1e-7, "nu");
  // Switched off after until_step.
  auto off = nn::gmm_length_penalty(mu, nu, lambda, in_lens, out_lens, 200000, 200000);
  EXPECT_EQ(off.abs().sum().item<double>(), 0.0);
}

TEST(GmmFunctional, InLensAreCheckedBeforeTheyFixT) {
  // With nu and delta left out, T = max(in_lens): in_lens is checked before its maximum is
  // read (a negative one used to reach at::arange, whose error names no argument).
  auto mu = torch::ones({1, 2, 1}, torch::kDouble), var = torch::ones({1, 2, 1}, torch::kDouble);
  expect_error([&] { nn::gmm_attention_weights(mu, var, {}, {}, {}, {}, torch::tensor({-3})); },
               "mona::nn::gmm_attention_weights: in_lens[0] must lie in [0, "
               "9223372036854775807], got -3");
  expect_error([&] { nn::gmm_length_penalty(mu, {}, 0.5, torch::tensor({-3})); },
               "mona::nn::gmm_length_penalty: in_lens[0] must lie in [0, "
               "9223372036854775807], got -3");
  const auto float_lens = torch::tensor({2.5}, torch::kDouble);
  expect_error([&] { nn::gmm_attention_weights(mu, var, {}, {}, {}, {}, float_lens); },
               "mona::nn::gmm_attention_weights: in_lens: expected dtype int64 (or int32), "
               "got Double");
  expect_error([&] { nn::gmm_length_penalty(mu, {}, 0.5, torch::tensor({3, 4})); },
               "mona::nn::gmm_length_penalty: in_lens: expected shape [B] = [1], got [2]");
  // A T = max(in_lens) too large for its tensors is refused naming in_lens and T: 2^60
  // frames make more bytes of [1, 2, T] doubles than an int64 counts; 2^57 frames count
  // (2^61 bytes) but lie beyond any process's address space, so the allocation fails on every
  // machine, whatever its memory or overcommit policy, and the allocator's error is reported
  // as in_lens's.
  const int64_t too_many = int64_t{1} << 60, unallocatable = int64_t{1} << 57;
  expect_error([&] { nn::gmm_attention_weights(mu, var, {}, {}, {}, {}, torch::tensor({too_many})); },
               "mona::nn::gmm_attention_weights: in_lens: its largest value, T = 1152921504606846976 frames, "
               "makes [B, U, T] = [1, 2, 1152921504606846976] Double values, more bytes than an int64 counts");
  expect_error([&] { nn::gmm_length_penalty(mu, {}, 0.5, torch::tensor({too_many})); },
               "mona::nn::gmm_length_penalty: in_lens: its largest value, T = 1152921504606846976 frames, makes");
  expect_error([&] { nn::gmm_attention_weights(mu, var, {}, {}, {}, {}, torch::tensor({unallocatable})); },
               "mona::nn::gmm_attention_weights: in_lens: its largest value, T = 144115188075855872 frames, "
               "asks for [B, U, T] = [1, 2, 144115188075855872] Double values (2305843009213693952 bytes): ");
  expect_error([&] { nn::gmm_length_penalty(mu, {}, 0.5, torch::tensor({unallocatable})); },
               "mona::nn::gmm_length_penalty: in_lens: its largest value, T = 144115188075855872 frames, asks");
  // nu and delta are checked before their size fixes T too.
  expect_error([&] { nn::gmm_attention_weights(mu, var, {}, torch::tensor(1.0), {}); },
               "mona::nn::gmm_attention_weights: nu: expected 2 dims [B, T], got []");
  expect_error([&] { nn::gmm_attention_weights(mu, var, {}, {}, torch::tensor(1.0)); },
               "mona::nn::gmm_attention_weights: delta: expected 2 dims [B, T], got []");
  // An empty batch has T = 0 rather than an error from the maximum of no lengths.
  const auto empty_lens = torch::zeros({0}, torch::kLong);
  EXPECT_EQ(nn::gmm_attention_weights(torch::ones({0, 2, 1}, torch::kDouble),
                                      torch::ones({0, 2, 1}, torch::kDouble), {}, {}, {}, {},
                                      empty_lens)
                .sizes()
                .vec(),
            (std::vector<int64_t>{0, 2, 0}));
  EXPECT_EQ(nn::gmm_length_penalty(torch::ones({0, 2, 1}, torch::kDouble), {}, 0.5, empty_lens)
                .sizes()
                .vec(),
            (std::vector<int64_t>{0}));
}

TEST(GmmFunctional, DefaultPositionsAreJPlusOne) {
  // nu left out means nu_j = j + 1 (and delta_j = 1), T = max(in_lens).
  torch::manual_seed(4);
  auto mu = torch::rand({2, 3, 2}, torch::kDouble) * 5;
  auto var = torch::rand({2, 3, 2}, torch::kDouble) + 0.5;
  const auto in_lens = torch::tensor({4, 6}, torch::kLong);
  const auto nu = torch::arange(1, 7, torch::kDouble).unsqueeze(0).expand({2, 6}).contiguous();
  const auto delta = torch::ones({2, 6}, torch::kDouble);
  EXPECT_TRUE(torch::equal(nn::gmm_attention_weights(mu, var, {}, {}, {}, {}, in_lens),
                           nn::gmm_attention_weights(mu, var, {}, nu, delta, {}, in_lens)));
  EXPECT_TRUE(torch::equal(nn::gmm_length_penalty(mu, {}, 0.5, in_lens),
                           nn::gmm_length_penalty(mu, nu, 0.5, in_lens)));
}

TEST(GmmAttentionModule, StepUnrolledEqualsForwardAndGradientsReachParameters) {
  torch::manual_seed(3);
  const int64_t B = 2, U = 4, T = 9;
  for (bool sa : {false, true}) {
    for (GmmWindow w : kWindows) {
      auto att = make(sa, w, 2);
      auto h = torch::randn({B, T, 4}, torch::kDouble);
      auto lens = torch::tensor({9, 6}, torch::kLong);
      auto q = torch::randn({B, U, 3}, torch::kDouble);
      auto mem = att->prepare(h, lens);
      auto seq = att->forward(q, mem);
      auto state = att->initial_state(mem);
      // Other arithmetic than forward() (one step's tensors instead of [B, U, ...]), float64:
      // agreement to rounding, far inside 1e-12 (measured: identical).
      for (int64_t i = 0; i < U; ++i) {
        auto s = att->step(q.select(1, i), mem, state);
        EXPECT_TRUE(torch::allclose(s.weights, seq.weights.select(1, i), 1e-12, 1e-12))
            << "source_aware " << sa << " window " << static_cast<int>(w) << " step " << i;
        EXPECT_TRUE(torch::allclose(s.context, seq.contexts.select(1, i), 1e-12, 1e-12));
        state = s.state;
      }
      // Padding: entries past a memory length get no weight.
      EXPECT_EQ(seq.weights[1].narrow(1, 6, 3).abs().sum().item<double>(), 0.0);
      seq.contexts.sum().backward();
      auto gq = att->query_proj->weight.grad();
      ASSERT_TRUE(gq.defined());
      EXPECT_TRUE(torch::isfinite(gq).all().item<bool>());
      if (sa) {
        auto params = att->position_energy->parameters();
        ASSERT_FALSE(params.empty());
        ASSERT_TRUE(params[0].grad().defined());
        EXPECT_GT(params[0].grad().abs().sum().item<double>(), 0.0);
      }
    }
  }
}

TEST(GmmAttentionModule, MultiHeadWeightsAreTheMixture) {
  torch::manual_seed(4);
  auto att = make(true, GmmWindow::kNone, 3);
  auto h = torch::randn({1, 6, 4}, torch::kDouble);
  auto q = torch::randn({1, 2, 3}, torch::kDouble);
  auto mem = att->prepare(h);
  auto seq = att->forward(q, mem);
  auto p = att->params(q);
  auto mu = torch::cumsum(p.step, 1);
  auto [nu, delta] = att->positions(mem);  // [1, H, T]
  // Direct formula: sum_h w_h delta_{h,j} N(nu_{h,j}; mu_h, v_h), v a variance.
  auto x = nu.unsqueeze(2);                          // [1, H, 1, T]
  auto m = mu.permute({0, 2, 1}).unsqueeze(-1);      // [1, H, U, 1]
  auto v = p.variance.permute({0, 2, 1}).unsqueeze(-1);
  auto n = torch::exp(-(x - m).pow(2) / (2 * v)) / torch::sqrt(2 * M_PI * v);
  auto expect = (p.weights.permute({0, 2, 1}).unsqueeze(-1) * delta.unsqueeze(2) * n).sum(1);
  // float64, the density evaluated another way (exp of a quotient vs the module's log
  // space): relative rounding of ~|exponent| * 1.1e-16 (measured 3e-16 relative).
  EXPECT_TRUE(torch::allclose(seq.weights, expect, 1e-12, 1e-14));
}

// Streams frames one at a time through hard_step and compares with forward().
void check_streaming(bool sa, GmmWindow w, int64_t heads, uint64_t seed) {
  torch::manual_seed(seed);
  auto att = make(sa, w, heads);
  const int64_t T = 30, U = 8;
  auto h = torch::randn({1, T, 4}, torch::kDouble);
  auto q = torch::randn({1, U, 3}, torch::kDouble);
  auto seq = att->forward(q, att->prepare(h));
  nn::OnlineMemory om;
  nn::GmmHardState st;
  int64_t fed = 0, early = 0;
  for (int64_t i = 0; i < U; ++i) {
    for (;;) {
      auto r = att->hard_step(q[0][i], om, st);
      if (r.status == core::ScanStatus::kNeedMoreInput) {
        ASSERT_LT(fed, T);
        att->extend(om, h[0][fed]);
        if (++fed == T) om.finish();
        continue;
      }
      ASSERT_NE(r.status, core::ScanStatus::kNeedMoreInput);
      if (r.status == core::ScanStatus::kExhausted) {  // window past the end: nothing attended
        EXPECT_TRUE(om.finished());
        EXPECT_EQ(r.index, -1);
      }
      early += !om.finished();
      // Other arithmetic than forward(): the online step sums the window's weights in double
      // scalar code, forward() with tensor ops; float64, T = 30 frames: rounding ~1e-16
      // (measured <= 4.4e-16), well inside 1e-10 |x| + 1e-12.
      EXPECT_TRUE(torch::allclose(r.context, seq.contexts[0][i], 1e-10, 1e-12))
          << "step " << i << " window " << static_cast<int>(w);
      auto row = seq.weights[0][i];
      if (r.index >= r.begin && r.weights.numel() > 0) {
        EXPECT_TRUE(torch::allclose(r.weights, row.narrow(0, r.begin, r.index - r.begin + 1),
                                    1e-10, 1e-12));
        // Nothing outside the emitted span.
        EXPECT_NEAR(row.sum().item<double>(), r.weights.sum().item<double>(), 1e-10);
      } else {
        EXPECT_EQ(row.abs().sum().item<double>(), 0.0);
      }
      break;
    }
  }
  // Windowed attention streams (emits before the input ends); plain GMM cannot.
  if (w == GmmWindow::kNone) {
    EXPECT_EQ(early, 0);
  } else {
    EXPECT_GT(early, 0) << "window " << static_cast<int>(w);
  }
  // Linear time: frames read stay within a small multiple of the frames seen.
  EXPECT_LE(st.touched(), heads * (4 * T + 8 * U) + 4 * heads * T);
}

TEST(GmmAttentionModule, StreamingEqualsOffline) {
  for (bool sa : {false, true}) {
    for (GmmWindow w : kWindows) {
      for (int64_t heads : {1, 2}) check_streaming(sa, w, heads, 10 + heads);
    }
  }
}

// A mean that has moved past the last position of a finished input (SAGMM-tr's window
// beyond the end) is reported as kExhausted (zero context, index -1), so that 003's
// long-form rule lets </s> through; an empty window while the input may still grow, or with
// a mean inside the memory, is not. Steps of one fixed query move mu by the same amount each
// time, so the mean passes the end after a bounded number of steps.
TEST(GmmAttentionModule, WindowPastTheEndOfAFinishedInputIsExhausted) {
  for (int64_t heads : {1, 2}) {
    SCOPED_TRACE(heads);
    torch::manual_seed(4);
    auto att = make(/*source_aware=*/true, GmmWindow::kAdaptive, heads);
    const int64_t T = 6;
    const auto h = torch::randn({T, 4}, torch::kDouble);
    const auto q = torch::randn({3}, torch::kDouble);
    nn::OnlineMemory om;
    for (int64_t j = 0; j < T; ++j) att->extend(om, h[j]);
    om.finish();
    nn::GmmHardState st;
    int64_t chose = 0, exhausted = 0;
    for (int step = 0; step < 2000 && exhausted < 3; ++step) {
      const auto r = att->hard_step(q, om, st);
      ASSERT_NE(r.status, ScanStatus::kNeedMoreInput);
      bool past = r.weights.numel() == 0;
      for (int64_t k = 0; k < heads; ++k) past = past && st.mu[k] > st.positions->nu[k][T - 1];
      EXPECT_EQ(r.status == ScanStatus::kExhausted, past) << "step " << step;
      if (r.status == ScanStatus::kExhausted) {
        ++exhausted;
        EXPECT_EQ(r.index, -1);
        EXPECT_EQ(r.context.abs().sum().item<double>(), 0.0);
      } else {
        EXPECT_EQ(exhausted, 0) << "once past the end, every later step is";
        ++chose;
      }
    }
    EXPECT_GT(chose, 0);
    EXPECT_EQ(exhausted, 3) << "the mean never passed the end";
  }
}

// An empty finished memory: every step is past its end (kExhausted, zero context, no
// weights), as for the monotonic family, not a choice of entry -1.
TEST(GmmAttentionModule, AnEmptyFinishedMemoryIsExhausted) {
  for (const bool source_aware : {true, false}) {
    for (const GmmWindow w : kWindows) {
      auto att = make(source_aware, w, 2);
      nn::OnlineMemory om;
      om.finish();
      nn::HardState st;
      for (int step = 0; step < 3; ++step) {
        const auto r = att->hard_step(torch::randn({3}, torch::kDouble), om, st);
        EXPECT_EQ(r.status, ScanStatus::kExhausted) << source_aware << " step " << step;
        EXPECT_EQ(r.weights.numel(), 0);
        ASSERT_EQ(r.context.numel(), 4);
        EXPECT_EQ(r.context.abs().sum().item<double>(), 0.0);
      }
    }
  }
}

TEST(GmmAttentionModule, EosFrame) {
  auto h = torch::randn({3, 4, 2}, torch::kDouble);
  auto lens = torch::tensor({4, 2, 3}, torch::kLong);
  auto all = nn::append_eos_frame(h, lens, 1.0);
  EXPECT_EQ(all.memory.sizes(), (std::vector<int64_t>{3, 5, 2}));
  EXPECT_TRUE(torch::equal(all.lengths, torch::tensor({5, 3, 4}, torch::kLong)));
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t L = lens[b].item<int64_t>();
    EXPECT_TRUE(torch::equal(all.memory[b][L], torch::ones({2}, torch::kDouble)));
    EXPECT_TRUE(torch::equal(all.memory[b].narrow(0, 0, L), h[b].narrow(0, 0, L)));
  }
  auto none = nn::append_eos_frame(h, lens, 0.0);
  EXPECT_TRUE(torch::equal(none.lengths, lens));
  EXPECT_FALSE(none.appended.any().item<bool>());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  auto some = nn::append_eos_frame(torch::zeros({400, 1, 1}), {}, 0.25, gen);
  const double frac = some.appended.to(torch::kDouble).mean().item<double>();
  // A fixed draw (seed 7); 0.07 is 3.2 standard errors of the mean of 400 Bernoulli(0.25)
  // draws (0.0217), and far from what p_eos read as 1 - p_eos (0.75) or ignored (0, 1) gives.
  EXPECT_NEAR(frac, 0.25, 0.07);
  expect_error([&] { nn::append_eos_frame(h, lens, 1.5); }, "p_eos must lie in [0, 1], got 1.5");
}

TEST(GmmAttentionModule, Errors) {
  auto att = make(true, GmmWindow::kAdaptive, 2);
  auto mem = att->prepare(torch::randn({2, 5, 4}, torch::kDouble));
  expect_error([&] { att->step(torch::randn({2, 3}, torch::kDouble), mem, torch::zeros({2, 5}, torch::kDouble)); },
                     "state: expected mu of the previous step [B, H] = [2, 2], got [2, 5]");
  expect_error([&] { att->forward(torch::randn({2, 3, 7}, torch::kDouble), mem); },
                     "queries: expected [B, U, Dq] = [2, U, 3], got [2, 3, 7]");
  nn::OnlineMemory om;
  nn::HardState hs;
  struct OtherExtension : nn::HardStateExtension {};
  hs.extension = std::make_shared<OtherExtension>();
  expect_error([&] { att->hard_step(torch::randn({3}, torch::kDouble), om, hs); },
                     "HardState::extension holds another mechanism's state");
  // A state that has seen more frames than the memory holds (memory reset, other stream).
  nn::GmmHardState gs;
  att->extend(om, torch::randn({3, 4}, torch::kDouble));
  att->hard_step(torch::randn({3}, torch::kDouble), om, gs);
  om.reset();
  expect_error([&] { att->hard_step(torch::randn({3}, torch::kDouble), om, gs); },
                     "start from a fresh state");
  // A query of another dtype than the module's (float64 here), named here rather than by a
  // LibTorch kernel, on an empty memory too.
  for (const auto dtype : {torch::kFloat, torch::kLong}) {
    nn::OnlineMemory empty;
    empty.finish();
    nn::HardState fresh;
    expect_error([&] { att->hard_step(torch::ones({3}, dtype), empty, fresh); },
                 std::string("GmmAttention::hard_step: query: expected dtype Double (that of the module's parameters), got ") +
                     (dtype == torch::kFloat ? "Float" : "Long"));
  }
  expect_error([&] { att->step(torch::ones({2, 3}, torch::kFloat), mem, att->initial_state(mem)); },
               "GmmAttention::step: query: expected dtype Double (that of the memory), got Float");
  // Entries released before the state reached them: SAGMM's positions are a running sum over
  // every key, and a window may not read a released entry (each named, not an IndexError).
  for (const bool source_aware : {true, false}) {
    auto a = make(source_aware, GmmWindow::kAdaptive, 1);
    nn::OnlineMemory released;
    a->extend(released, torch::randn({8, 4}, torch::kDouble));
    released.release_before(5);
    released.finish();
    nn::HardState fresh;
    expect_error([&] { a->hard_step(torch::randn({3}, torch::kDouble), released, fresh); },
                 source_aware ? "the memory released entries before 5 whose positions this state has not computed (it has 0)"
                              : "the window reads memory entry 0, released already (the memory holds entries from 5 on)");
  }
  auto mu = torch::zeros({1, 2, 1}, torch::kDouble);
  auto bad_var = torch::tensor({1.0, -1.0}, torch::kDouble).view({1, 2, 1});
  expect_error(
      [&] { nn::gmm_attention_weights(mu, bad_var, {}, torch::ones({1, 3}, torch::kDouble), {}); },
      "variance: expected finite values > 0, got -1 at [0, 1, 0]");
  expect_error(
      [&] { nn::gmm_attention_weights(mu, torch::ones({1, 3, 1}, torch::kDouble), {}, {}, {}, {}, torch::tensor({3})); },
      "variance: expected sizes [1, 2, 1]");
  nn::AttentionOptions bad = gmm_small_options();
  bad.gmm.num_heads = 0;
  expect_error([&] { nn::GmmAttention(bad, true, GmmWindow::kAdaptive); },
                     "gmm.num_heads must lie in [1, 1048576], got 0");
}

}  // namespace
}  // namespace mona::test
