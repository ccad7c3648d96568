// label: nn
// Attention modules (mona/nn/attention.h) and autograd functions (mona/nn/functional.h):
// finite-difference gradients, hard online steps against the expected computation,
// streaming against offline, linear cost, padding, and argument errors.
#include "mona/nn/attention.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include "mona/nn/functional.h"
#include "util/nn_test_util.h"

namespace mona::test {
namespace {

using nn::AttentionOptions;
using mona::core::ScanStatus;

const std::vector<std::string> kMechanisms = {"soft", "monotonic", "mocha", "matcha"};

AttentionOptions small_options(const std::string& energy = "additive") {
  AttentionOptions o;
  o.query_dim = 3;
  o.memory_dim = 4;
  o.attention_dim = 3;
  o.energy = energy;
  o.monotonic_energy = energy;
  o.init_r = -1.0;
  o.chunk_size = 2;
  o.seed = 5;
  return o;
}

std::shared_ptr<nn::Attention> make(const std::string& mech, const AttentionOptions& o) {
  auto a = nn::make_attention(mech, o);
  a->to(torch::kDouble);
  a->eval();
  return a;
}

// ---------------------------------------------------------------------------------------
// Functional layer

TEST(Functional, GradientsMatchFiniteDifferences) {
  torch::manual_seed(1);
  const int64_t B = 2, U = 3, T = 5;
  auto lens = torch::tensor({5, 3}, torch::kLong);
  auto olens = torch::tensor({3, 2}, torch::kLong);
  auto p = torch::sigmoid(torch::randn({B, U, T}, torch::kDouble)).requires_grad_();
  auto u = torch::randn({B, U, T}, torch::kDouble).requires_grad_();
  auto a0 = torch::softmax(torch::randn({B, T}, torch::kDouble), 1).requires_grad_();
  auto W = torch::randn({B, U, T}, torch::kDouble);

  auto check = [&](const std::function<torch::Tensor()>& fwd,
                   const std::vector<std::pair<torch::Tensor, std::string>>& inputs) {
    for (auto& in : inputs) {
      if (in.first.grad().defined()) in.first.mutable_grad().zero_();
    }
    (fwd() * W).sum().backward();
    for (auto& in : inputs) {
      auto num = numeric_grad([&] { return (fwd() * W).sum().item<double>(); },
                              in.first.detach());
      expect_grad_close(in.first.grad(), num, 1e-7, in.second);
    }
  };
  check([&] { return nn::monotonic_alignment(p, lens, olens, a0); },
        {{p, "monotonic p"}, {a0, "monotonic alpha0"}});
  check([&] { return nn::mocha_chunkwise(nn::monotonic_alignment(p, lens, olens), u, 3, lens, olens); },
        {{p, "mocha p"}, {u, "mocha u"}});
  // alpha_prev an input of its own, so that each of the three gradients is checked alone (a
  // swap of two would pass a check of their sum).
  auto alpha_prev = torch::softmax(torch::randn({B, U, T}, torch::kDouble), 2).requires_grad_();
  check([&] { return nn::matcha_chunkwise(alpha_prev, p, u, lens, olens); },
        {{alpha_prev, "matcha alpha_prev"}, {p, "matcha p"}, {u, "matcha u"}});
  check([&] { return nn::masked_softmax(u, lens, olens); }, {{u, "softmax u"}});
  auto p2 = torch::sigmoid(torch::randn({B, T}, torch::kDouble)).requires_grad_();
  auto W2 = torch::randn({B, T}, torch::kDouble);
  auto loss2 = [&] { return (nn::monotonic_alignment_step(p2, a0, lens) * W2).sum(); };
  loss2().backward();
  expect_grad_close(p2.grad(), numeric_grad([&] { return loss2().item<double>(); }, p2.detach()),
                    1e-7, "step p");
}

// The backward passes as functions of their own (nn::*_backward, what torch.ops.mona's
// backward operators run): given an output gradient G, the gradients of sum(f(x) * G) by
// central differences, to the same 1e-7 as the test above; strided arguments, lengths, the
// default alpha0, and output masks that leave the gradients not asked for undefined.
TEST(Functional, BackwardPassesMatchFiniteDifferences) {
  torch::manual_seed(2);
  const int64_t B = 2, U = 3, T = 5, d = 4;
  const auto lens = torch::tensor({5, 3}, torch::kLong), olens = torch::tensor({3, 2}, torch::kLong);
  const auto p = torch::sigmoid(torch::randn({B, T, U}, torch::kDouble)).transpose(1, 2);  // strided
  const auto u = torch::randn({B, U, T}, torch::kDouble);
  const auto a0 = torch::softmax(torch::randn({B, T}, torch::kDouble), 1);
  const auto G = torch::randn({B, U, T}, torch::kDouble);
  auto fd = [&](const std::function<torch::Tensor()>& f, const torch::Tensor& x, const torch::Tensor& g) {
    return numeric_grad([&] { return (f() * g).sum().item<double>(); }, x);
  };
  torch::NoGradGuard no_grad;
  {
    torch::Tensor pc = p.contiguous(), a0c = a0.clone();
    const auto alpha = nn::monotonic_alignment(pc, lens, olens, a0c);
    auto [gp, ga0] = nn::monotonic_alignment_backward(G, p, alpha, lens, olens, a0);
    auto f = [&] { return nn::monotonic_alignment(pc, lens, olens, a0c); };
    expect_grad_close(gp, fd(f, pc, G), 1e-7, "monotonic grad_p");
    expect_grad_close(ga0, fd(f, a0c, G), 1e-7, "monotonic grad_alpha0");
    // alpha0 left out: the default (all mass on entry 0; the kernel's own path), whose
    // gradient is still returned: that of the one-hot alpha0 given explicitly (alpha0 on the
    // boundary of its domain, so no central differences there; the gradient is linear in
    // alpha0, checked above inside the domain).
    torch::Tensor one_hot = torch::zeros({B, T}, torch::kDouble);
    one_hot.select(1, 0).fill_(1.0);
    auto [gp_d, ga0_d] = nn::monotonic_alignment_backward(G, p, nn::monotonic_alignment(pc, lens, olens), lens, olens);
    expect_grad_close(gp_d, fd([&] { return nn::monotonic_alignment(pc, lens, olens); }, pc, G), 1e-7,
                      "monotonic grad_p, default alpha0");
    auto [gp_1, ga0_1] = nn::monotonic_alignment_backward(G, p, nn::monotonic_alignment(pc, lens, olens, one_hot),
                                                          lens, olens, one_hot);
    expect_grad_close(ga0_d, ga0_1, 1e-14, "monotonic grad_alpha0, default alpha0");
  }
  {
    torch::Tensor p1 = p.select(1, 0).contiguous(), prev = a0.clone();
    const auto G1 = G.select(1, 0);
    auto [gp, gprev] = nn::monotonic_alignment_step_backward(G1, p1, prev, lens);
    auto f = [&] { return nn::monotonic_alignment_step(p1, prev, lens); };
    expect_grad_close(gp, fd(f, p1, G1), 1e-7, "step grad_p");
    expect_grad_close(gprev, fd(f, prev, G1), 1e-7, "step grad_alpha_prev");
  }
  {
    torch::Tensor alpha = nn::monotonic_alignment(p, lens, olens), uc = u.clone();
    auto [ga, gu] = nn::mocha_chunkwise_backward(G, alpha, u, 3, lens, olens);
    auto f = [&] { return nn::mocha_chunkwise(alpha, uc, 3, lens, olens); };
    expect_grad_close(ga, fd(f, alpha, G), 1e-7, "mocha grad_alpha");
    expect_grad_close(gu, fd(f, uc, G), 1e-7, "mocha grad_u");
  }
  {
    torch::Tensor prev = nn::monotonic_alignment(p, lens, olens), pc = p.contiguous(), uc = u.clone();
    const auto beta = nn::matcha_chunkwise(prev, pc, uc, lens, olens);
    auto [ga, gp, gu] = nn::matcha_chunkwise_backward(G, prev, p, u, beta, lens, olens);
    auto f = [&] { return nn::matcha_chunkwise(prev, pc, uc, lens, olens); };
    expect_grad_close(ga, fd(f, prev, G), 1e-7, "matcha grad_alpha_prev");
    expect_grad_close(gp, fd(f, pc, G), 1e-7, "matcha grad_p");
    expect_grad_close(gu, fd(f, uc, G), 1e-7, "matcha grad_u");
  }
  {
    torch::Tensor uc = u.clone();
    const auto ge = nn::masked_softmax_backward(G, nn::masked_softmax(uc, lens, olens), lens, olens);
    expect_grad_close(ge, fd([&] { return nn::masked_softmax(uc, lens, olens); }, uc, G), 1e-7, "softmax grad_e");
  }
  {
    torch::Tensor q = torch::randn({B, U, d}, torch::kDouble), keys = torch::randn({B, T, d}, torch::kDouble),
                  w = torch::randn({d}, torch::kDouble);
    auto f = [&] { return nn::additive_energy(q, keys, w); };
    auto [gq, gk, gw] = nn::additive_energy_backward(G, q, keys, w);
    expect_grad_close(gq, fd(f, q, G), 1e-7, "energy grad_query");
    expect_grad_close(gk, fd(f, keys, G), 1e-7, "energy grad_keys");
    expect_grad_close(gw, fd(f, w, G), 1e-7, "energy grad_w");
    auto [gq_m, gk_m, gw_m] = nn::additive_energy_backward(G, q, keys, w, {false, true, false});
    EXPECT_FALSE(gq_m.defined());
    EXPECT_FALSE(gw_m.defined());
    EXPECT_TRUE(torch::equal(gk_m, gk)) << "the same pass, one output fewer";
  }
  {
    torch::Tensor weights = torch::rand({B, T}, torch::kDouble), values = torch::randn({B, T, d}, torch::kDouble);
    const auto Gc = torch::randn({B, d}, torch::kDouble);
    auto f = [&] { return nn::attention_context(weights, values); };
    auto [gw, gv] = nn::attention_context_backward(Gc, weights, values);
    expect_grad_close(gw, fd(f, weights, Gc), 1e-7, "context grad_weights");
    expect_grad_close(gv, fd(f, values, Gc), 1e-7, "context grad_values");
    auto [gw_m, gv_m] = nn::attention_context_backward(Gc, weights, values, {true, false});
    EXPECT_FALSE(gv_m.defined());
    EXPECT_TRUE(torch::equal(gw_m, gw));
  }
}

TEST(Functional, BackwardPassesCheckTheirArguments) {
  const auto p = torch::rand({2, 3, 4});
  expect_error([&] { nn::monotonic_alignment_backward(torch::rand({2, 3, 5}), p, p); },
               "mona::nn::monotonic_alignment_backward: grad_alpha: expected sizes [2, 3, 4] (those of p), got "
               "[2, 3, 5]");
  expect_error([&] { nn::monotonic_alignment_backward(p, p, p, {}, {}, torch::rand({2, 5})); },
               "alpha0: expected sizes [B, T] = [2, 4], got [2, 5]");
  expect_error([&] { nn::monotonic_alignment_step_backward(torch::rand({2, 4}), torch::rand({2, 4}), p); },
               "mona::nn::monotonic_alignment_step_backward: alpha_prev: expected 2 dims [B, T], got [2, 3, 4]");
  expect_error([&] { nn::mocha_chunkwise_backward(p, p, p, 0); }, "w: chunk size must be >= 1, got 0");
  expect_error([&] { nn::mocha_chunkwise_backward(p, p, p, 2, torch::tensor({4, 5}, torch::kLong)); },
               "mona::nn::mocha_chunkwise_backward: in_lens[1] must lie in [0, 4], got 5");
  expect_error([&] { nn::matcha_chunkwise_backward(p, p, p, p, p.to(torch::kDouble)); },
               "mona::nn::matcha_chunkwise_backward: beta: expected dtype Float (that of p), got Double");
  expect_error([&] { nn::masked_softmax_backward(p, p, {}, torch::tensor({4, 0}, torch::kLong)); },
               "mona::nn::masked_softmax_backward: out_lens[0] must lie in [0, 3], got 4");
  expect_error([&] {
    nn::additive_energy_backward(torch::rand({2, 5, 3}), torch::rand({2, 3, 4}), torch::rand({2, 5, 4}),
                                 torch::rand({4}));
  },
               "mona::nn::additive_energy_backward: grad_e: expected sizes [B, U, T] = [2, 3, 5], got [2, 5, 3]");
  expect_error([&] {
    nn::attention_context_backward(torch::rand({2, 4}, torch::kDouble), torch::rand({2, 5}), torch::rand({2, 5, 4}));
  },
               "mona::nn::attention_context_backward: grad_c: expected dtype Float (that of values), got Double");
}

// The fused additive energy against the same formula in ATen's operators (ATen's tanh,
// autograd's gradients), double: the kernel's tanh is within a few ulp of 1 (absolute) of
// ATen's, the sums over d = 19 and T = 6 terms of size <= 3 round alike, so 1e-13.
TEST(Functional, AdditiveEnergyMatchesTheATenFormula) {
  torch::manual_seed(4);
  const int64_t B = 3, U = 2, T = 6, d = 19;
  auto q = (2 * torch::randn({B, U, d}, torch::kDouble)).requires_grad_();
  auto keys = (2 * torch::randn({B, T, d}, torch::kDouble)).requires_grad_();
  auto w = torch::randn({d}, torch::kDouble).requires_grad_();
  const auto G = torch::randn({B, U, T}, torch::kDouble);
  const auto fused = nn::additive_energy(q, keys, w);
  const auto aten = torch::matmul(torch::tanh(q.unsqueeze(2) + keys.unsqueeze(1)), w);
  EXPECT_LT((fused - aten).abs().max().item<double>(), 1e-13);
  const auto gf = torch::autograd::grad({(fused * G).sum()}, {q, keys, w});
  const auto ga = torch::autograd::grad({(aten * G).sum()}, {q, keys, w});
  const char* names[] = {"query", "keys", "w"};
  for (int n = 0; n < 3; ++n) EXPECT_LT((gf[n] - ga[n]).abs().max().item<double>(), 1e-13) << names[n];
  // float32 inputs give the float kernel. Against the double result: rounding q and keys
  // to float moves each tanh argument (|q + k| < 16) by up to 1e-6 and tanh by as much, the
  // kernel adds a few float ulp of 1, both times sum_k |w_k| (about 15 here): 2e-5.
  const auto f32 = nn::additive_energy(q.detach().to(torch::kFloat), keys.detach().to(torch::kFloat),
                                       w.detach().to(torch::kFloat));
  EXPECT_EQ(f32.scalar_type(), torch::kFloat);
  EXPECT_LT((f32.to(torch::kDouble) - aten.detach()).abs().max().item<double>(), 2e-5);

  // One decoder step: a query [B, d] and the offset r of 002 eq. 16 against the same ATen
  // formula with the view and the sum spelled out; the same 1e-13 (one more rounding, the
  // offset's addition, which ATen makes too).
  auto q1 = (2 * torch::randn({B, d}, torch::kDouble)).requires_grad_();
  auto r = torch::full({}, -1.25, torch::kDouble).requires_grad_();
  const auto G1 = torch::randn({B, 1, T}, torch::kDouble);
  const auto step = nn::additive_energy(q1, keys, w, r);
  ASSERT_EQ(step.sizes(), (std::vector<int64_t>{B, 1, T}));
  const auto step_aten = torch::matmul(torch::tanh(q1.unsqueeze(1).unsqueeze(2) + keys.unsqueeze(1)), w) + r;
  EXPECT_LT((step - step_aten).abs().max().item<double>(), 1e-13);
  const auto gs = torch::autograd::grad({(step * G1).sum()}, {q1, keys, w, r});
  const auto gs_aten = torch::autograd::grad({(step_aten * G1).sum()}, {q1, keys, w, r});
  const char* step_names[] = {"step query", "step keys", "step w", "offset"};
  for (int n = 0; n < 4; ++n) {
    ASSERT_EQ(gs[n].sizes(), gs_aten[n].sizes()) << step_names[n];
    EXPECT_LT((gs[n] - gs_aten[n]).abs().max().item<double>(), 1e-13) << step_names[n];
  }
  // The public backward takes the one-step query as the forward does (what the Python
  // operator's autograd calls): the same gradients as ATen's.
  const auto [bq, bk, bw] = nn::additive_energy_backward(G1, q1.detach(), keys.detach(), w.detach());
  ASSERT_EQ(bq.sizes(), q1.sizes());
  EXPECT_LT((bq - gs_aten[0]).abs().max().item<double>(), 1e-13);
  EXPECT_LT((bk - gs_aten[1]).abs().max().item<double>(), 1e-13);
  EXPECT_LT((bw - gs_aten[2]).abs().max().item<double>(), 1e-13);
  expect_error([&] { nn::additive_energy_backward(torch::zeros({B, 2, T}, torch::kDouble), q1, keys, w); },
               "mona::nn::additive_energy_backward: grad_e: expected sizes [B, U, T]");
  expect_error([&] { nn::additive_energy(q1, keys, w, torch::ones({1}, torch::kDouble)); },
               "mona::nn::additive_energy: offset: expected 0 dims [] (a scalar), got [1]");
  expect_error([&] { nn::additive_energy(q1, keys, w, torch::ones({}, torch::kFloat)); },
               "mona::nn::additive_energy: offset: expected dtype Double (that of query), got Float");
}

TEST(Functional, AttentionContextMatchesBmm) {
  torch::manual_seed(5);
  const int64_t B = 4, T = 7, d = 19;
  auto w = torch::rand({B, T}, torch::kDouble);
  w.index_put_({torch::indexing::Slice(), torch::indexing::Slice(5)}, 0.0);  // padding
  w.requires_grad_();
  auto h = torch::randn({B, T, d}, torch::kDouble).transpose(1, 2).contiguous().transpose(1, 2);  // strided
  h.requires_grad_();
  const auto G = torch::randn({B, d}, torch::kDouble);
  const auto fused = nn::attention_context(w, h);
  const auto aten = torch::bmm(w.unsqueeze(1), h).squeeze(1);
  // Sums of T = 7 products of values below 4 in magnitude: a few ulp of 30.
  EXPECT_LT((fused - aten).abs().max().item<double>(), 1e-13);
  const auto gf = torch::autograd::grad({(fused * G).sum()}, {w, h});
  const auto ga = torch::autograd::grad({(aten * G).sum()}, {w, h});
  EXPECT_LT((gf[0] - ga[0]).abs().max().item<double>(), 1e-13) << "weights";
  EXPECT_LT((gf[1] - ga[1]).abs().max().item<double>(), 1e-13) << "values";
  // float32 gives the float kernel: against the double result, float rounding of the inputs
  // and of T products (relative 6e-8 each) times sums below 30: 1e-5.
  const auto f32 = nn::attention_context(w.detach().to(torch::kFloat), h.detach().to(torch::kFloat));
  EXPECT_EQ(f32.scalar_type(), torch::kFloat);
  EXPECT_LT((f32.to(torch::kDouble) - aten.detach()).abs().max().item<double>(), 1e-5);
  expect_error([&] { nn::attention_context(torch::rand({2, 3}), torch::rand({2, 4, 5})); },
               "mona::nn::attention_context: values: expected sizes [B, T, d] with [B, T] = [2, 3] (those of"
               " weights), got [2, 4, 5]");
  expect_error([&] { nn::attention_context(torch::rand({2, 3}), torch::rand({2, 3, 5}, torch::kDouble)); },
               "values: expected dtype Float (that of weights), got Double");
  expect_error([&] { nn::attention_context(torch::rand({2, 3, 1}), torch::rand({2, 3, 5})); },
               "mona::nn::attention_context: weights: expected 2 dims [B, T], got [2, 3, 1]");
}

TEST(Functional, ArgumentErrorsNameTheArgument) {
  auto p = torch::rand({2, 3, 4});
  expect_error([&] { nn::monotonic_alignment(torch::rand({2, 3})); },
                     "mona::nn::monotonic_alignment: p: expected 3 dims [B, U, T], got [2, 3]");
  expect_error([&] { nn::monotonic_alignment(p.to(torch::kInt)); },
                     "p: expected dtype float32 or float64, got Int");
  expect_error([&] { nn::monotonic_alignment(p, torch::tensor({4, 5}, torch::kLong)); },
                     "in_lens[1] must lie in [0, 4], got 5");
  expect_error([&] { nn::monotonic_alignment(p, torch::tensor({4}, torch::kLong)); },
                     "in_lens: expected shape [B] = [2], got [1]");
  expect_error([&] { nn::monotonic_alignment(p, {}, torch::tensor({-1, 0}, torch::kLong)); },
                     "out_lens[0] must lie in [0, 3], got -1");
  expect_error([&] { nn::monotonic_alignment(torch::empty({2, 3, 4}, torch::Device(torch::kMeta))); },
                     "p: expected a CPU tensor, got device meta");
  expect_error([&] { nn::mocha_chunkwise(p, p, 0); }, "w: chunk size must be >= 1, got 0");
  expect_error([&] { nn::mocha_chunkwise(p, torch::rand({2, 3, 5}), 2); },
                     "u: expected sizes [2, 3, 4] (those of alpha), got [2, 3, 5]");
  expect_error([&] { nn::monotonic_alignment_step(torch::rand({2, 4}), torch::rand({2, 4}, torch::kDouble)); },
                     "alpha_prev: expected dtype Float (that of p), got Double");
  expect_error([&] { nn::additive_energy(torch::rand({2, 3, 4}), torch::rand({2, 5, 3}), torch::rand({4})); },
               "mona::nn::additive_energy: keys: expected sizes [B, T, d] with B = 2 and d = 4 (those of query),"
               " got [2, 5, 3]");
  expect_error([&] { nn::additive_energy(torch::rand({2, 3, 4}), torch::rand({2, 5, 4}), torch::rand({3})); },
               "w: expected sizes [d] = [4], got [3]");
  expect_error([&] { nn::additive_energy(p, torch::rand({2, 5, 4}, torch::kDouble), torch::rand({4})); },
               "keys: expected dtype Float (that of query), got Double");
  expect_error([&] { nn::monotonic_alignment(p * 2 + 1); },  // values, from the kernel
                     "p: expected values in [0, 1]");
}

// monotonic_attention_step is the composition of the functions above (each tested against
// finite differences and brute force): its outputs and the gradients of every input must be
// theirs, for each chunk rule, both energy shapes, with noise and lengths, and with a
// gradient reaching only some outputs. float64; the two differ by the order of a few
// roundings (ATen's sigmoid against std::exp, sums formed in another order), so 1e-13
// relative to the largest magnitude is a few hundred ulp, far below any error in a formula.
TEST(Functional, MonotonicAttentionStepEqualsItsComposition) {
  torch::manual_seed(3);
  const int64_t B = 3, T = 7, D = 4;
  const auto lens = torch::tensor({7, 4, 1}, torch::kLong);
  const auto noise = torch::randn({B, T}, torch::kDouble);
  const double noise_std = 1.5;
  struct Case {
    nn::ChunkRule rule;
    bool three_dims, with_noise;
    std::array<bool, 3> graded;  // which outputs the loss reads: alpha, weights, context
  };
  const std::vector<Case> cases = {
      {nn::ChunkRule::kNone, false, true, {true, false, true}},
      {nn::ChunkRule::kNone, true, false, {false, true, false}},
      {nn::ChunkRule::kFixed, true, true, {true, true, true}},
      {nn::ChunkRule::kFixed, false, false, {false, false, true}},
      {nn::ChunkRule::kAdaptive, true, true, {true, true, true}},
      {nn::ChunkRule::kAdaptive, false, true, {true, false, false}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("rule " + std::to_string(static_cast<int>(c.rule)) + (c.three_dims ? ", [B, 1, T]" : ", [B, T]") +
                 (c.with_noise ? ", noise" : ""));
    const std::vector<int64_t> shape = c.three_dims ? std::vector<int64_t>{B, 1, T} : std::vector<int64_t>{B, T};
    const auto e = (torch::randn(shape, torch::kDouble) * 2).requires_grad_();
    const auto u = torch::randn(shape, torch::kDouble).requires_grad_();
    const auto prev = torch::softmax(torch::randn({B, T}, torch::kDouble), 1).requires_grad_();
    const auto values = torch::randn({B, T, D}, torch::kDouble).requires_grad_();
    const auto Ga = torch::randn({B, T}, torch::kDouble), Gw = torch::randn({B, T}, torch::kDouble);
    const auto Gc = torch::randn({B, D}, torch::kDouble);
    const bool chunked = c.rule != nn::ChunkRule::kNone;
    const int64_t w = 3;

    const auto fused = nn::monotonic_attention_step(e, c.with_noise ? noise : torch::Tensor(), noise_std, prev,
                                                    chunked ? u : torch::Tensor(), values, c.rule, w, lens);
    // The composition, from the public functions.
    const auto e2 = e.reshape({B, T});
    const auto p = torch::sigmoid(c.with_noise ? e2 + noise_std * noise : e2);
    const auto alpha = nn::monotonic_alignment_step(p, prev, lens);
    torch::Tensor weights = alpha;
    if (c.rule == nn::ChunkRule::kFixed) {
      weights = nn::mocha_chunkwise(alpha.unsqueeze(1), u.reshape({B, 1, T}), w, lens).squeeze(1);
    } else if (c.rule == nn::ChunkRule::kAdaptive) {
      weights = nn::matcha_chunkwise(prev.unsqueeze(1), p.unsqueeze(1), u.reshape({B, 1, T}), lens).squeeze(1);
    }
    const auto context = nn::attention_context(weights, values);

    const auto loss = [&](const torch::Tensor& a, const torch::Tensor& wt, const torch::Tensor& ctx) {
      torch::Tensor l = torch::zeros({}, torch::kDouble);
      if (c.graded[0]) l = l + (a * Ga).sum();
      if (c.graded[1]) l = l + (wt * Gw).sum();
      if (c.graded[2]) l = l + (ctx * Gc).sum();
      return l;
    };
    std::vector<torch::Tensor> inputs = {e, prev, values};
    if (chunked) inputs.push_back(u);
    const auto g_fused = torch::autograd::grad({loss(fused.alpha, fused.weights, fused.context)}, inputs, {},
                                               /*retain_graph=*/false, /*create_graph=*/false, /*allow_unused=*/true);
    const auto g_ref = torch::autograd::grad({loss(alpha, weights, context)}, inputs, {}, false, false, true);

    const auto expect_close = [](const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
      ASSERT_EQ(got.defined(), want.defined()) << what;
      if (!want.defined()) return;
      ASSERT_EQ(got.sizes(), want.sizes()) << what;
      const double scale = std::max(1.0, want.abs().max().item<double>());
      EXPECT_LE((got - want).abs().max().item<double>(), 1e-13 * scale) << what;
    };
    expect_close(fused.alpha, alpha, "alpha");
    expect_close(fused.weights, weights, "weights");
    expect_close(fused.context, context, "context");
    const std::vector<std::string> names = {"grad energy", "grad alpha_prev", "grad values", "grad chunk_energy"};
    for (size_t k = 0; k < inputs.size(); ++k) {
      // An input the read outputs do not depend on gets no gradient from either; the
      // composition may return zeros where the node returns none.
      const torch::Tensor want = g_ref[k].defined() ? g_ref[k] : torch::zeros_like(inputs[k]);
      const torch::Tensor got = g_fused[k].defined() ? g_fused[k] : torch::zeros_like(inputs[k]);
      expect_close(got, want, names[k]);
    }
  }
}

// The step's gradients by central differences as well (the composition test above could
// share a mistake with the functions it composes only if they all had it).
TEST(Functional, MonotonicAttentionStepMatchesFiniteDifferences) {
  torch::manual_seed(4);
  const int64_t B = 2, T = 5, D = 3;
  const auto lens = torch::tensor({5, 3}, torch::kLong);
  const auto noise = torch::randn({B, T}, torch::kDouble);
  for (const auto rule : {nn::ChunkRule::kNone, nn::ChunkRule::kFixed, nn::ChunkRule::kAdaptive}) {
    const bool chunked = rule != nn::ChunkRule::kNone;
    auto e = torch::randn({B, 1, T}, torch::kDouble).requires_grad_();
    auto u = torch::randn({B, 1, T}, torch::kDouble).requires_grad_();
    auto prev = torch::softmax(torch::randn({B, T}, torch::kDouble), 1).requires_grad_();
    auto values = torch::randn({B, T, D}, torch::kDouble).requires_grad_();
    const auto Ga = torch::randn({B, T}, torch::kDouble), Gw = torch::randn({B, T}, torch::kDouble);
    const auto Gc = torch::randn({B, D}, torch::kDouble);
    const auto f = [&] {
      const auto s = nn::monotonic_attention_step(e, noise, 0.5, prev, chunked ? u : torch::Tensor(), values, rule, 2,
                                                  lens);
      return (s.alpha * Ga).sum() + (s.weights * Gw).sum() + (s.context * Gc).sum();
    };
    f().backward();
    std::vector<std::pair<torch::Tensor, std::string>> inputs = {{e, "energy"}, {prev, "alpha_prev"},
                                                                 {values, "values"}};
    if (chunked) inputs.push_back({u, "chunk_energy"});
    for (auto& [x, name] : inputs) {
      const auto num = numeric_grad([&] { return f().item<double>(); }, x.detach());
      expect_grad_close(x.grad(), num, 1e-7, "rule " + std::to_string(static_cast<int>(rule)) + " " + name);
    }
  }
}

TEST(Functional, MonotonicAttentionStepNamesBadArguments) {
  const auto e = torch::rand({2, 4}), prev = torch::rand({2, 4}), values = torch::rand({2, 4, 3});
  const char* fn = "mona::nn::monotonic_attention_step: ";
  expect_error([&] { nn::monotonic_attention_step(e, {}, 0, prev, {}, values, nn::ChunkRule::kFixed, 2); },
               std::string(fn) + "chunk_energy: expected [B, T] = [2, 4] under a chunk rule (MoChA, MAtChA), got an"
               " undefined tensor");
  expect_error([&] { nn::monotonic_attention_step(e, {}, 0, prev, e, values, nn::ChunkRule::kNone); },
               std::string(fn) + "chunk_energy: expected none (undefined) under ChunkRule::kNone, got [2, 4]");
  expect_error([&] { nn::monotonic_attention_step(torch::rand({2, 2, 4}), {}, 0, prev, {}, values, nn::ChunkRule::kNone); },
               std::string(fn) + "energy: expected sizes [B, T] = [2, 4] or [B, 1, T], got [2, 2, 4]");
  expect_error([&] { nn::monotonic_attention_step(e, {}, 0, prev, e, values, nn::ChunkRule::kFixed, 0); },
               std::string(fn) + "w: chunk size must be >= 1, got 0");
  expect_error([&] { nn::monotonic_attention_step(e, {}, 0, prev, {}, torch::rand({2, 5, 3}), nn::ChunkRule::kNone); },
               std::string(fn) + "values: expected sizes [B, T, D] with [B, T] = [2, 4] (those of alpha_prev), got"
               " [2, 5, 3]");
  expect_error([&] { nn::monotonic_attention_step(e, torch::rand({3}), 1, prev, {}, values, nn::ChunkRule::kNone); },
               std::string(fn) + "noise: expected 2 dims [B, T] or [B, 1, T], got [3]");
  // Noise of B * T values in another layout ([T, B]) is not read as [B, T].
  expect_error([&] { nn::monotonic_attention_step(e, torch::rand({4, 2}), 1, prev, {}, values, nn::ChunkRule::kNone); },
               std::string(fn) + "noise: expected sizes [B, T] = [2, 4] or [B, 1, T], got [4, 2]");
  expect_error([&] { nn::monotonic_attention_step(e, torch::rand({2, 4}, torch::kDouble), 1, prev, {}, values,
                                                  nn::ChunkRule::kNone); },
               std::string(fn) + "noise: expected dtype Float (that of alpha_prev), got Double");
  expect_error([&] { nn::monotonic_attention_step(e, {}, 0, prev.to(torch::kDouble), {}, values, nn::ChunkRule::kNone); },
               std::string(fn) + "energy: expected dtype Double (that of alpha_prev), got Float");
  // A NaN is named where the caller put it, at a valid entry; one in the padding is not read.
  auto e_nan = e.clone();
  e_nan[1][2] = NAN;
  expect_error([&] { nn::monotonic_attention_step(e_nan, {}, 0, prev, {}, values, nn::ChunkRule::kNone); },
               std::string(fn) + "energy: expected values that are not NaN, got nan at [1, 2]");
  auto noise_nan = torch::zeros({2, 1, 4});
  noise_nan[0][0][3] = NAN;
  expect_error([&] { nn::monotonic_attention_step(e, noise_nan, 1, prev, {}, values, nn::ChunkRule::kNone); },
               std::string(fn) + "noise: expected values that are not NaN, got nan at [0, 3]");
  const auto lens = torch::tensor({4, 2}, torch::kLong);
  const auto padded = nn::monotonic_attention_step(e_nan.masked_fill(torch::arange(4).ge(2).expand({2, 4}) &
                                                                         torch::tensor({false, true}).unsqueeze(1),
                                                                     NAN),
                                                   {}, 0, prev, {}, values, nn::ChunkRule::kNone, 1, lens);
  EXPECT_TRUE(torch::isfinite(padded.context).all().item<bool>());
}

// ---------------------------------------------------------------------------------------
// Modules

struct Batch {
  torch::Tensor memory, lengths, queries, out_lengths;
};

Batch random_batch(int64_t B, int64_t U, int64_t T, const AttentionOptions& o) {
  Batch b;
  b.memory = torch::randn({B, T, o.memory_dim}, torch::kDouble);
  b.queries = torch::randn({B, U, o.query_dim}, torch::kDouble);
  std::vector<int64_t> lens(B, T), olens(B, U);
  if (B > 1) {
    lens[1] = std::max<int64_t>(1, T - 2);
    olens[1] = std::max<int64_t>(1, U - 1);
  }
  b.lengths = torch::tensor(lens, torch::kLong);
  b.out_lengths = torch::tensor(olens, torch::kLong);
  return b;
}

TEST(Attention, ModuleGradientsMatchFiniteDifferences) {
  for (const std::string energy : {"additive", "dot"}) {
    for (const auto& mech : kMechanisms) {
      torch::manual_seed(2);
      auto o = small_options(energy);
      auto att = make(mech, o);
      Batch b = random_batch(2, 3, 5, o);
      b.memory.requires_grad_();
      b.queries.requires_grad_();
      auto W = torch::randn({2, 3, o.memory_dim}, torch::kDouble);
      auto loss = [&] {
        auto m = att->prepare(b.memory, b.lengths);
        return (att->forward(b.queries, m, b.out_lengths).contexts * W).sum();
      };
      att->zero_grad();
      loss().backward();
      const std::string what = mech + "/" + energy;
      expect_grad_close(b.queries.grad(), numeric_grad([&] { return loss().item<double>(); }, b.queries.detach()),
                        1e-6, what + " queries");
      expect_grad_close(b.memory.grad(), numeric_grad([&] { return loss().item<double>(); }, b.memory.detach()),
                        1e-6, what + " memory");
      for (auto& kv : att->named_parameters()) {
        expect_grad_close(kv.value().grad(),
                          numeric_grad([&] { return loss().item<double>(); }, kv.value().detach()),
                          1e-6, what + " parameter " + kv.key());
      }
      // Memory past a length receives no gradient.
      EXPECT_EQ(b.memory.grad()[1].narrow(0, 3, 2).abs().max().item<double>(), 0.0) << what;
    }
  }
}

TEST(Attention, StepUnrolledEqualsForward) {
  for (const auto& mech : kMechanisms) {
    torch::manual_seed(3);
    auto o = small_options();
    auto att = make(mech, o);
    Batch b = random_batch(2, 4, 6, o);
    auto m = att->prepare(b.memory, b.lengths);
    auto full = att->forward(b.queries, m);
    auto state = att->initial_state(m);
    // Other arithmetic ([B, U, T] energies in one product vs [B, T] per step), float64: a
    // few roundings of 1.1e-16 per entry over T = 6, far inside 1e-12 |x| + 1e-14
    // (measured: identical on every OpenBLAS kernel family tried).
    for (int64_t i = 0; i < 4; ++i) {
      auto out = att->step(b.queries.select(1, i), m, state);
      EXPECT_TRUE(torch::allclose(out.weights, full.weights.select(1, i), 1e-12, 1e-14)) << mech << " i=" << i;
      EXPECT_TRUE(torch::allclose(out.context, full.contexts.select(1, i), 1e-12, 1e-14)) << mech;
      state = out.state;
    }
  }
}

TEST(Attention, PaddedBatchEqualsExamplesAlone) {
  for (const auto& mech : kMechanisms) {
    torch::manual_seed(4);
    auto o = small_options();
    auto att = make(mech, o);
    Batch b = random_batch(2, 4, 7, o);
    auto full = att->forward(b.queries, att->prepare(b.memory, b.lengths), b.out_lengths);
    // A batch of 2 and a batch of 1 may take other matrix-product kernels: float64
    // rounding (tolerance as in StepUnrolledEqualsForward).
    for (int64_t k = 0; k < 2; ++k) {
      const int64_t T = b.lengths[k].item<int64_t>(), U = b.out_lengths[k].item<int64_t>();
      auto alone = att->forward(b.queries[k].narrow(0, 0, U).unsqueeze(0),
                                att->prepare(b.memory[k].narrow(0, 0, T).unsqueeze(0)));
      EXPECT_TRUE(torch::allclose(full.contexts[k].narrow(0, 0, U), alone.contexts[0], 1e-12, 1e-14)) << mech;
      EXPECT_TRUE(torch::allclose(full.weights[k].narrow(0, 0, U).narrow(1, 0, T), alone.weights[0], 1e-12, 1e-14)) << mech;
      // padding: weights past the length are exactly zero, rows past out_len too
      EXPECT_EQ(full.weights[k].narrow(1, T, 7 - T).abs().sum().item<double>(), 0.0) << mech;
      EXPECT_EQ(full.weights[k].narrow(0, U, 4 - U).abs().sum().item<double>(), 0.0) << mech;
    }
  }
}

// Runs the hard online step over the whole memory, feeding it `chunk` frames at a time,
// with teacher-forced queries. Returns contexts [U, Dh] and chosen indices.
struct HardRun {
  torch::Tensor contexts;
  std::vector<int64_t> index;
  int64_t monotonic_energies = 0, chunk_energies = 0;
};

HardRun run_hard(nn::Attention& att, const torch::Tensor& memory /*[T, Dh]*/,
                 const torch::Tensor& queries /*[U, Dq]*/, int64_t chunk) {
  HardRun run;
  nn::OnlineMemory mem;
  nn::HardState state;
  const int64_t T = memory.size(0), U = queries.size(0);
  std::vector<torch::Tensor> ctx;
  int64_t fed = 0;
  for (int64_t i = 0; i < U;) {
    auto out = att.hard_step(queries[i], mem, state);
    run.monotonic_energies += out.monotonic_energies;
    run.chunk_energies += out.chunk_energies;
    if (out.status == core::ScanStatus::kNeedMoreInput) {
      const int64_t n = std::min(chunk, T - fed);
      if (n > 0) att.extend(mem, memory.narrow(0, fed, n));
      fed += n;
      if (fed == T) mem.finish();
      continue;
    }
    ctx.push_back(out.context);
    run.index.push_back(out.status == core::ScanStatus::kChose ? out.index : -1);
    ++i;
  }
  run.contexts = torch::stack(ctx);
  return run;
}

TEST(Attention, HardStepEqualsExpectationWhenEnergiesSaturate) {
  for (const auto& mech : std::vector<std::string>{"monotonic", "mocha", "matcha"}) {
    int64_t emitted = 0, exhausted = 0;
    for (int trial = 0; trial < 5; ++trial) {
      torch::manual_seed(10 + trial);
      auto o = small_options("dot");
      o.init_r = 0.0;
      auto att = make(mech, o);
      {  // saturate the monotonic energy: |e| huge so that every p is 0 or 1
        torch::NoGradGuard ng;
        auto& g = dynamic_cast<nn::ScaledDotEnergy&>(*std::dynamic_pointer_cast<nn::MonotonicAttention>(att)->monotonic).g;
        g.fill_(1e6);
      }
      const int64_t T = 9, U = 5;
      auto memory = torch::randn({1, T, o.memory_dim}, torch::kDouble);
      auto queries = torch::randn({1, U, o.query_dim}, torch::kDouble);
      auto expected = att->forward(queries, att->prepare(memory));
      auto p = expected.alignment;
      ASSERT_TRUE(((p == 0) | (p == 1)).all().item<bool>()) << "alignment not one-hot";
      auto hard = run_hard(*att, memory[0], queries[0], T);
      emitted += std::count_if(hard.index.begin(), hard.index.end(), [](int64_t t) { return t >= 0; });
      exhausted += std::count(hard.index.begin(), hard.index.end(), -1);
      // float64, one-hot alignments: the contexts are one memory row (or a chunk softmax of
      // <= 2 entries) computed two ways, so they agree to a few roundings (measured 1.7e-16);
      // 1e-12 is ample on any CPU and still sees any error in the chunk or the weights.
      EXPECT_TRUE(torch::allclose(hard.contexts, expected.contexts[0], 1e-12, 1e-12))
          << mech << " trial " << trial << "\nhard\n" << hard.contexts << "\nexpected\n" << expected.contexts[0];
    }
    EXPECT_GT(emitted, 5) << mech << ": the comparison must cover emitted steps";
    EXPECT_GT(exhausted, 0) << mech << ": and steps that ran off the end";
  }
}

TEST(Attention, OnlineEqualsOfflineAndCostIsLinear) {
  for (const auto& mech : kMechanisms) {
    int64_t emitted = 0, moved = 0;
    for (int trial = 0; trial < 8; ++trial) {
      torch::manual_seed(20 + trial);
      auto o = small_options(trial % 2 ? "dot" : "additive");
      o.monotonic_energy = "dot";
      o.init_r = 0.0;
      auto att = make(mech, o);
      if (auto mono = std::dynamic_pointer_cast<nn::MonotonicAttention>(att)) {
        torch::NoGradGuard ng;  // sharpen p so that decisions depend on the entry
        dynamic_cast<nn::ScaledDotEnergy&>(*mono->monotonic).g.fill_(3.0);
      }
      const int64_t T = 12, U = 6;
      auto memory = torch::randn({T, o.memory_dim}, torch::kDouble);
      auto queries = torch::randn({U, o.query_dim}, torch::kDouble);
      auto offline = run_hard(*att, memory, queries, T);
      auto online = run_hard(*att, memory, queries, 1);
      for (size_t i = 0; i < online.index.size(); ++i) {
        emitted += online.index[i] >= 0;
        moved += i > 0 && online.index[i] > online.index[i - 1];
      }
      // Exact: extend() computes each entry's keys from that entry alone and the scan
      // scores one key at a time, so feeding 1 or T entries per call is the same arithmetic.
      EXPECT_EQ(online.index, offline.index) << mech;
      EXPECT_TRUE(torch::equal(online.contexts, offline.contexts)) << mech;
      if (mech != "soft") {
        EXPECT_LE(online.monotonic_energies, T + U) << mech;
        if (mech == "mocha") {
          EXPECT_LE(online.chunk_energies, o.chunk_size * U);
        }
        if (mech == "matcha") {
          EXPECT_LE(online.chunk_energies, T + U);
        }
        for (size_t i = 1; i < online.index.size(); ++i) {
          if (online.index[i] >= 0) {
            EXPECT_GE(online.index[i], online.index[i - 1]) << "moved left";
          }
        }
      }
    }
    // The comparison must bite: steps emitted, and the attention moved right.
    EXPECT_GT(emitted, 8) << mech;
    if (mech != "soft") {
      EXPECT_GT(moved, 2) << mech;
    }
  }
}

// The online step reads a dot-product energy's query in place when it is one contiguous
// vector (Energy::dot_form) and through a prepared scorer otherwise ([1, Dq], a strided
// view): the same energies, so the same choices and contexts, bit for bit.
TEST(Attention, HardStepTakesAnyQueryLayoutAlike) {
  for (const auto& mech : kMechanisms) {
    torch::manual_seed(43);
    auto o = small_options("dot");
    o.monotonic_energy = "dot";
    o.init_r = 0.0;
    auto att = make(mech, o);
    const int64_t T = 12, U = 6;
    const auto memory = torch::randn({T, o.memory_dim}, torch::kDouble);
    const auto queries = torch::randn({U, o.query_dim}, torch::kDouble);
    const auto columns = queries.t().contiguous();  // queries.select(0, i) == columns.select(1, i), strided
    const auto in_place = run_hard(*att, memory, queries, 3);
    nn::OnlineMemory mem;
    att->extend(mem, memory);
    mem.finish();
    nn::HardState as_row, strided;
    int64_t emitted = 0;
    for (int64_t i = 0; i < U; ++i) {
      const auto a = att->hard_step(queries[i].unsqueeze(0), mem, as_row);
      const auto b = att->hard_step(columns.select(1, i), mem, strided);
      ASSERT_FALSE(columns.select(1, i).is_contiguous());
      const int64_t index = in_place.index[static_cast<size_t>(i)];
      EXPECT_EQ(a.status == core::ScanStatus::kChose ? a.index : -1, index) << mech << " step " << i;
      EXPECT_EQ(b.status == core::ScanStatus::kChose ? b.index : -1, index) << mech << " step " << i;
      EXPECT_TRUE(torch::equal(a.context, in_place.contexts[i])) << mech << " step " << i;
      EXPECT_TRUE(torch::equal(b.context, in_place.contexts[i])) << mech << " step " << i;
      emitted += index >= 0;
    }
    EXPECT_GT(emitted, 0) << mech;
  }
}

// hard_step_into (the out= form) gives what hard_step gives, reuses the output tensors only
// when the caller has let go of them, and never overwrites a context the caller kept.
TEST(Attention, HardStepIntoReusesOnlyUnsharedOutputs) {
  for (const auto& mech : kMechanisms) {
    torch::manual_seed(41);
    auto o = small_options("dot");
    o.init_r = 0.0;
    auto att = make(mech, o);
    const int64_t T = 10, U = 8;
    const auto memory = torch::randn({T, o.memory_dim}, torch::kDouble);
    const auto queries = torch::randn({U, o.query_dim}, torch::kDouble);
    nn::OnlineMemory mem_a, mem_b;
    att->extend(mem_a, memory);
    mem_a.finish();
    att->extend(mem_b, memory);
    mem_b.finish();
    nn::HardState sa, sb;
    nn::HardStepOutput out;
    int64_t reused = 0, compared = 0;
    for (int64_t i = 0; i < U; ++i) {
      const auto q = queries[i];
      const nn::HardStepOutput fresh = att->hard_step(q, mem_a, sa);
      const void* before = out.context.defined() ? out.context.data_ptr() : nullptr;
      // Keep a handle to the previous context on odd steps, a view of it on steps 2 mod 4.
      at::Tensor kept, kept_copy;
      if (out.context.defined() && i % 2 == 1) kept = out.context;
      if (out.context.defined() && i % 4 == 2) kept = out.context.view({1, -1});
      if (kept.defined()) kept_copy = kept.clone();
      att->hard_step_into(q, mem_b, sb, out);
      ASSERT_EQ(out.status, fresh.status) << mech << " step " << i;
      EXPECT_EQ(out.index, fresh.index);
      EXPECT_EQ(out.begin, fresh.begin);
      EXPECT_EQ(out.monotonic_energies, fresh.monotonic_energies);
      EXPECT_EQ(out.chunk_energies, fresh.chunk_energies);
      if (fresh.status != core::ScanStatus::kNeedMoreInput) {
        EXPECT_TRUE(torch::equal(out.context, fresh.context)) << mech << " step " << i;
        ++compared;
      }
      if (fresh.weights.defined()) {
        EXPECT_TRUE(torch::equal(out.weights, fresh.weights)) << mech << " step " << i;
      }
      if (kept.defined()) {
        EXPECT_TRUE(torch::equal(kept, kept_copy)) << mech << ": a kept context was overwritten";
        EXPECT_NE(out.context.data_ptr(), kept.data_ptr()) << mech;
      } else if (before != nullptr && out.context.data_ptr() == before) {
        ++reused;
      }
    }
    EXPECT_EQ(sa.t, sb.t);
    EXPECT_GE(compared, U / 2) << mech;
    EXPECT_GT(reused, 0) << mech << ": the unshared output was never reused";
  }
}

// Sampling (options.sample) draws from each stream's own generator (HardState::sample_rng,
// started from options.seed): a stream decoded alone, the same stream decoded interleaved
// step by step with another, and a second decoding of the same input all take the same
// decisions; a different seed takes others. An exhausted step has no weights ([0]).
TEST(Attention, SamplingDrawsFromEachStreamsOwnGenerator) {
  for (const auto& mech : kMechanisms) {
    if (mech == "soft") continue;  // no scan, no draws
    torch::manual_seed(43);
    auto o = small_options("dot");
    o.init_r = 0.0;
    o.sample = true;
    auto att = make(mech, o);
    const int64_t T = 40, U = 30;
    const auto memory = torch::randn({T, o.memory_dim}, torch::kDouble);
    const auto other_memory = torch::randn({T, o.memory_dim}, torch::kDouble);
    const auto queries = torch::randn({U, o.query_dim}, torch::kDouble);
    const auto decode = [&](nn::Attention& a, const at::Tensor& mem_values, nn::OnlineMemory& mem, nn::HardState& st,
                            int64_t i) {
      if (mem.size() == 0) {
        a.extend(mem, mem_values);
        mem.finish();
      }
      return a.hard_step(queries[i], mem, st);
    };
    std::vector<int64_t> alone, interleaved, again;
    std::vector<core::ScanStatus> statuses;
    {
      nn::OnlineMemory m;
      nn::HardState st;
      for (int64_t i = 0; i < U; ++i) {
        const auto out = decode(*att, memory, m, st, i);
        alone.push_back(out.index);
        statuses.push_back(out.status);
        if (out.status == core::ScanStatus::kExhausted) {
          EXPECT_EQ(out.weights.numel(), 0) << mech;
          EXPECT_EQ(out.context.abs().sum().item<double>(), 0.0) << mech;
        }
      }
    }
    {
      nn::OnlineMemory m, m_other;
      nn::HardState st, st_other;
      for (int64_t i = 0; i < U; ++i) {
        decode(*att, other_memory, m_other, st_other, i);
        interleaved.push_back(decode(*att, memory, m, st, i).index);
      }
    }
    {
      nn::OnlineMemory m;
      nn::HardState st;
      for (int64_t i = 0; i < U; ++i) again.push_back(decode(*att, memory, m, st, i).index);
    }
    EXPECT_EQ(interleaved, alone) << mech << ": another stream's draws changed this one's";
    EXPECT_EQ(again, alone) << mech << ": a second decoding drew differently";
    EXPECT_NE(std::count(statuses.begin(), statuses.end(), core::ScanStatus::kChose), 0) << mech;
    // With p near 1/2 (r = 0, small energies) another seed gives other decisions.
    auto o2 = o;
    o2.seed = o.seed + 1;
    auto att2 = make(mech, o2);
    {
      torch::NoGradGuard no_grad;
      auto theirs = att2->named_parameters();
      for (const auto& p : att->named_parameters()) theirs[p.key()].copy_(p.value());
    }
    std::vector<int64_t> reseeded;
    nn::OnlineMemory m;
    nn::HardState st;
    for (int64_t i = 0; i < U; ++i) reseeded.push_back(decode(*att2, memory, m, st, i).index);
    EXPECT_NE(reseeded, alone) << mech << ": the seed did not reach the draws";
  }
}

// The online scan decides clear-cut energies against logit(tau) without evaluating the
// sigmoid; every decision must still be the one p = 1 / (1 + exp(-e)) >= tau makes, also for
// energies within rounding of the threshold. With d = 1, W = 1, g = 1, r = 0 and query 1,
// the energy of entry j is exactly h_j.
TEST(Attention, HardDecisionsEqualTheSigmoidRuleAtTheThreshold) {
  for (double tau : {0.5, 0.3, 0.9, 0.01}) {
    AttentionOptions o;
    o.query_dim = 1;
    o.memory_dim = 1;
    o.energy = "dot";
    o.monotonic_energy = "dot";
    o.tau = tau;
    o.noise_std = 0;
    auto att = make("monotonic", o);
    {
      torch::NoGradGuard ng;
      auto& e = dynamic_cast<nn::ScaledDotEnergy&>(
          *std::dynamic_pointer_cast<nn::MonotonicAttention>(att)->monotonic);
      e.memory_proj->weight.fill_(1.0);
      e.g.fill_(1.0);
      e.r.fill_(0.0);
    }
    const double logit = std::log(tau / (1 - tau));
    for (double delta : {-3e-6, -1e-6, -2e-7, -1e-12, -1e-15, 0.0, 1e-15, 1e-12, 2e-7, 1e-6,
                         3e-6}) {
      // Entry 0 far below the threshold, entry 1 at logit + delta, entry 2 far above.
      const std::vector<double> energies = {logit - 5, logit + delta, logit + 5};
      const auto h = torch::tensor(energies, torch::kDouble).reshape({3, 1});
      nn::OnlineMemory mem;
      att->extend(mem, h);
      mem.finish();
      nn::HardState st;
      const auto out = att->hard_step(torch::ones({1}, torch::kDouble), mem, st);
      int64_t expected = -1;
      for (int64_t j = 0; j < 3 && expected < 0; ++j) {
        if (1.0 / (1.0 + std::exp(-energies[j])) >= tau) expected = j;
      }
      ASSERT_EQ(out.status, core::ScanStatus::kChose);
      EXPECT_EQ(out.index, expected) << "tau " << tau << " delta " << delta;
    }
  }
}

// Attention::unroll's steps against step() (the mechanism's own energies, forward() per
// step) with a decoder's feedback (query i from context i - 1), in eval and in training
// mode (the same noise: the generator reseeded before each run): the contexts, weights and
// states, and the gradients of the first query, the feedback weights, the memory and every
// parameter. The unrolled query projection sums its weight gradient in one product over all
// steps where step() adds one per step, and adds its bias in the product: a few roundings
// apart. float64: 1e-12 relative (to max(1, |reference|)); float32 (2^-24 = 6e-8, through
// the four steps' cumulative products and softmaxes): 2e-5.
void expect_unrolled_steps_equal_steps(const std::string& mech, const std::string& energy, at::ScalarType dtype,
                                       bool training) {
  SCOPED_TRACE(::testing::Message() << mech << "/" << energy << " " << dtype << (training ? " training" : " eval"));
  torch::manual_seed(4);
  const auto o = small_options(energy);
  auto att = make(mech, o);
  att->to(dtype);
  if (training) att->train();
  const int64_t B = 2, U = 4, T = 6;
  const auto opt = torch::TensorOptions().dtype(dtype);
  Batch b = random_batch(B, U, T, o);
  at::Tensor memory = b.memory.to(dtype).requires_grad_();
  at::Tensor q0 = b.queries.select(1, 0).to(dtype).requires_grad_();
  at::Tensor feed = torch::randn({o.memory_dim, o.query_dim}, opt).requires_grad_();
  const at::Tensor wc = torch::randn({U, B, o.memory_dim}, opt), ww = torch::randn({U, B, T}, opt);
  auto run = [&](bool unrolled, std::vector<at::Tensor>& outputs) {
    att->reseed_noise(11);
    const nn::Memory m = att->prepare(memory, b.lengths);
    std::unique_ptr<nn::UnrolledAttention> steps;
    if (unrolled) steps = std::make_unique<nn::UnrolledAttention>(att->unroll(m, U + 1));
    at::Tensor q = q0, state = att->initial_state(m), loss = torch::zeros({}, opt);
    for (int64_t i = 0; i < U; ++i) {
      const nn::StepOutput out = unrolled ? steps->step(q, state) : att->step(q, m, state);
      loss = loss + (out.context * wc[i]).sum() + (out.weights * ww[i]).sum();
      outputs.push_back(out.context);
      outputs.push_back(out.weights);
      if (out.state.defined()) outputs.push_back(out.state);
      state = out.state;
      q = torch::tanh(q + torch::mm(out.context, feed));
    }
    att->zero_grad();
    for (at::Tensor* t : {&memory, &q0, &feed}) t->mutable_grad() = at::Tensor();
    loss.backward();
    outputs.push_back(loss);
    for (at::Tensor* t : {&memory, &q0, &feed}) outputs.push_back(t->grad().clone());
    for (auto& p : att->parameters()) outputs.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  };
  std::vector<at::Tensor> mona, ref;
  run(true, mona);
  run(false, ref);
  ASSERT_EQ(mona.size(), ref.size());
  const double tol = dtype == at::kDouble ? 1e-12 : 2e-5;
  for (size_t k = 0; k < ref.size(); ++k) {
    const double scale = std::max(1.0, ref[k].abs().max().item<double>());
    const double err = (mona[k] - ref[k]).abs().max().item<double>();
    EXPECT_LE(err, tol * scale) << "output " << k << " of " << ref.size() << ": max error " << err;
  }
}

TEST(Attention, UnrolledStepsEqualSteps) {
  for (const std::string energy : {"additive", "dot"}) {
    for (const std::string mech : {"soft", "monotonic", "mocha", "matcha", "gmm", "sagmm", "sagmm-tr"}) {
      for (const bool training : {false, true}) {
        expect_unrolled_steps_equal_steps(mech, energy, at::kDouble, training);
      }
    }
  }
  for (const std::string mech : {"monotonic", "mocha", "matcha"}) expect_unrolled_steps_equal_steps(mech, "additive", at::kFloat, true);
}

// The unrolled steps end where unroll() said, and a bad query is named as step() names it.
TEST(Attention, UnrolledStepsCheckTheirArguments) {
  auto o = small_options();
  for (const std::string mech : {"mocha", "gmm"}) {
    auto att = make(mech, o);
    Batch b = random_batch(2, 2, 5, o);
    const nn::Memory m = att->prepare(b.memory, b.lengths);
    nn::UnrolledAttention steps = att->unroll(m, 1);
    expect_error([&] { steps.step(torch::zeros({2, 5}, torch::kDouble), att->initial_state(m)); },
                 mech == "gmm" ? "GmmAttention::step: query: expected [B, Dq] = [2, 3], got [2, 5]"
                               : "MoChA::step: query");
    steps.step(b.queries.select(1, 0), att->initial_state(m));
    expect_error([&] { steps.step(b.queries.select(1, 1), att->initial_state(m)); },
                 "UnrolledAttention::step: all 1 steps of Attention::unroll are taken");
    expect_error([&] { att->unroll(m, -1); }, "Attention::unroll: steps: expected >= 0, got -1");
    expect_error([&] { att->unroll(nn::Memory{}, 1); },
                 "Attention::unroll: memory: expected a prepared memory (Attention::prepare)");
  }
}

TEST(Attention, TrainingNoiseIsSeededAndOffInEval) {
  auto o = small_options();
  auto att = make("monotonic", o);
  Batch b = random_batch(1, 3, 5, o);
  auto m = att->prepare(b.memory);
  auto clean = att->forward(b.queries, m).weights;
  att->train();
  att->reseed_noise(9);
  auto n1 = att->forward(b.queries, m).weights;
  att->reseed_noise(9);
  auto n2 = att->forward(b.queries, m).weights;
  EXPECT_TRUE(torch::equal(n1, n2));
  EXPECT_FALSE(torch::allclose(n1, clean));
  att->eval();
  EXPECT_TRUE(torch::equal(att->forward(b.queries, m).weights, clean));
}

TEST(Attention, ModuleArgumentErrors) {
  auto o = small_options();
  auto att = make("mocha", o);
  auto mem = torch::randn({2, 5, 4}, torch::kDouble);
  expect_error([&] { att->prepare(torch::randn({2, 5, 3}, torch::kDouble)); },
                     "memory: expected Dh = 4 (AttentionOptions.memory_dim), got [2, 5, 3]");
  expect_error([&] { att->prepare(mem, torch::tensor({5, 6}, torch::kLong)); },
                     "lengths[1] must lie in [0, 5], got 6");
  auto m = att->prepare(mem);
  expect_error([&] { att->step(torch::randn({3, 3}, torch::kDouble), m, att->initial_state(m)); },
                     "query: expected [B, Dq] = [2, 3], got [3, 3]");
  expect_error([&] { att->step(torch::randn({2, 3}, torch::kDouble), m, torch::zeros({2, 4}, torch::kDouble)); },
                     "state: expected the previous alignment [B, T] = [2, 5], got [2, 4]");
  expect_error([&] { att->forward(torch::randn({2, 3, 7}, torch::kDouble), m); },
                     "queries: expected [B, U, Dq] = [2, U, 3], got [2, 3, 7]");
  AttentionOptions bad = o;
  bad.chunk_size = 0;
  expect_error([&] { nn::make_attention("mocha", bad); }, "chunk_size w must be >= 1, got 0");
  bad = o;
  bad.tau = 1.5;
  expect_error([&] { nn::make_attention("monotonic", bad); }, ": tau must lie in (0, 1), got 1.5");
  expect_error([&] { nn::make_attention("bahdanau", o); }, "got \"bahdanau\"");
  nn::OnlineMemory om;
  att->extend(om, torch::randn({3, 4}, torch::kDouble));
  om.finish();
  expect_error([&] { att->extend(om, torch::randn({1, 4}, torch::kDouble)); },
                     "the stream's input is already finished");
  // Tensors of another dtype than the module's parameters (float64) or its memory's: named
  // by mona, for every mechanism, not by a LibTorch kernel.
  for (const auto& mech : nn::mechanisms()) {
    SCOPED_TRACE(mech.name);
    AttentionOptions mo = small_options();
    auto a = nn::make_attention(mech.name, mo);
    a->to(torch::kDouble);
    expect_error([&] { a->prepare(torch::randn({2, 5, 4})); },
                 "memory: expected dtype Double (that of the module's parameters), got Float");
    const auto pm = a->prepare(mem);
    expect_error([&] { a->forward(torch::randn({2, 3, 3}), pm); }, "queries: expected dtype Double (that of the memory), got Float");
    expect_error([&] { a->step(torch::randn({2, 3}), pm, a->initial_state(pm)); },
                 "query: expected dtype Double (that of the memory), got Float");
    nn::OnlineMemory fm;
    expect_error([&] { a->extend(fm, torch::randn({2, 4})); },
                 "Attention::extend: frames: expected dtype Double (that of the module's parameters), got Float");
    a->extend(fm, torch::randn({2, 4}, torch::kDouble));
    expect_error([&] { a->extend(fm, torch::randn({2, 4})); },
                 "Attention::extend: frames: expected dtype Double (that of the memory so far), got Float");
  }
  expect_error([&] { att->step(torch::randn({2, 3}, torch::kDouble), m, torch::zeros({2, 5})); },
               "state: expected dtype Double (that of the memory), got Float");
  // A state that resumes past the entries of its memory (a memory since reset): named.
  nn::HardState st;
  nn::OnlineMemory six;
  att->eval();
  att->extend(six, torch::randn({6, 4}, torch::kDouble));
  st.resume = 6;
  six.reset();
  att->extend(six, torch::randn({2, 4}, torch::kDouble));
  expect_error([&] { att->hard_step(torch::randn({3}, torch::kDouble), six, st); },
               "Attention::hard_step: state: the scan resumes at memory entry 6, past the 2 entries the memory has received");
}

// What a stream may release (Attention::first_needed): hard monotonic attention nothing
// before its scan's position, MoChA nothing before the w - 1 entries ahead of it, MAtChA
// nothing after t_{i-1}. With p ~ 0 the scan never chooses: the first two then hold a
// bounded number of entries however long the input, each step's decision unchanged by the
// release (against the same steps on a memory that keeps everything).
TEST(Attention, ReleasedEntriesFollowTheScan) {
  for (const std::string mech : {"monotonic", "mocha", "matcha"}) {
    SCOPED_TRACE(mech);
    AttentionOptions o = small_options();
    o.init_r = -30;  // p_choose ~ 0: the scan never stops
    torch::manual_seed(9);
    auto a = nn::make_attention(mech, o);
    a->to(torch::kDouble);
    a->eval();
    nn::OnlineMemory released, kept;
    nn::HardState s_released, s_kept;
    const auto q = torch::randn({3}, torch::kDouble);
    int64_t most = 0, most_readable = 0;
    for (int64_t j = 0; j < 300; ++j) {
      const auto f = torch::randn({1, 4}, torch::kDouble);
      a->extend(released, f);
      a->extend(kept, f);
      const auto r1 = a->hard_step(q, released, s_released);
      const auto r2 = a->hard_step(q, kept, s_kept);
      ASSERT_EQ(r1.status, r2.status) << j;
      ASSERT_EQ(r1.status, core::ScanStatus::kNeedMoreInput) << j;
      EXPECT_EQ(a->first_needed(s_released),
                mech == "monotonic" ? s_released.resume
                : mech == "mocha"   ? std::max<int64_t>(0, s_released.resume - o.chunk_size + 1)
                                    : s_released.t);
      released.release_before(a->first_needed(s_released));
      most = std::max(most, released.held());
      most_readable = std::max(most_readable, released.size() - released.first());
    }
    if (mech == "matcha") {
      EXPECT_EQ(most_readable, 300) << "its chunk starts at t_{i-1}: every entry since is kept";
    } else {
      EXPECT_LE(most_readable, o.chunk_size - 1) << "readable: at most the w - 1 entries a chunk reaches back";
      // Held: those and the released entries not yet moved out (OnlineMemory moves them
      // once 16, or as many as it keeps, have been dropped).
      EXPECT_LE(most, 16 + o.chunk_size) << "bounded however long the input";
    }
  }
}

// ---------------------------------------------------------------------------------------
// PreparedHardStep: hard_step_into's decisions on raw arrays

// A hard monotonic module with dot energies e = g <s, W h> + r, in eval mode and dtype T.
std::shared_ptr<nn::Attention> prepared_step_module(at::ScalarType dtype, double g, double r) {
  AttentionOptions o;
  o.query_dim = 5;
  o.memory_dim = 6;
  o.energy = "dot";
  o.monotonic_energy = "dot";
  o.tau = 0.4;
  o.seed = 3;
  auto att = nn::make_attention("monotonic", o);
  att->to(dtype);
  att->eval();
  torch::NoGradGuard ng;
  auto& e = dynamic_cast<nn::ScaledDotEnergy&>(*std::dynamic_pointer_cast<nn::MonotonicAttention>(att)->monotonic);
  e.g.fill_(g);
  e.r.fill_(r);
  return att;
}

// Streams a memory of T frames into two OnlineMemory objects `chunk` frames at a time and
// decodes U teacher-forced queries with PreparedHardStep on one and hard_step_into on the
// other, releasing what the mechanism no longer needs after every step. Every step must
// agree exactly (the same kernel on the same keys; hard_step_into's context is a copy of the
// row PreparedHardStep points at), and the chosen entries must be the brute-force ones:
// sigmoid(e_ij) >= tau over all energies computed at once in float64 (float64 runs only:
// float32's dot products round differently from a float64 product, so a decision within
// rounding of the threshold may legitimately differ; float32 is compared with hard_step_into).
template <class Scalar>
void expect_prepared_step_decides_as_hard_step(uint64_t seed, int64_t chunk, std::array<int64_t, 3>& counts) {
  constexpr auto dtype = std::is_same_v<Scalar, float> ? torch::kFloat : torch::kDouble;
  torch::manual_seed(seed);
  auto att = prepared_step_module(dtype, 2.0, -0.5);
  const int64_t T = 20, U = 24, Dh = att->options().memory_dim;
  const auto memory = torch::randn({T, Dh}, dtype);
  const auto queries = torch::randn({U, att->options().query_dim}, dtype);
  nn::OnlineMemory mem_a, mem_b;
  const nn::PreparedHardStep<Scalar> prepared(*att, mem_a);
  nn::HardState sa, sb;
  nn::HardStepOutput out;
  // The brute force: energies of every (i, j) at once, float64.
  at::Tensor energies;
  {
    torch::NoGradGuard ng;
    auto mono = std::dynamic_pointer_cast<nn::MonotonicAttention>(att);
    auto& e = dynamic_cast<nn::ScaledDotEnergy&>(*mono->monotonic);
    const auto keys = torch::matmul(memory.to(torch::kDouble), e.memory_proj->weight.to(torch::kDouble).t());
    energies = e.g.to(torch::kDouble) * torch::matmul(queries.to(torch::kDouble), keys.t()) + e.r.to(torch::kDouble);
  }
  const double logit = std::log(0.4 / 0.6);
  int64_t fed = 0, t_ref = 0;
  bool ran_off = false;
  for (int64_t i = 0; i < U;) {
    const auto a = prepared.step(queries[i].template data_ptr<Scalar>(), sa);
    att->hard_step_into(queries[i], mem_b, sb, out);
    ASSERT_EQ(a.status, out.status) << "step " << i;
    EXPECT_EQ(a.monotonic_energies, out.monotonic_energies) << "step " << i;
    EXPECT_EQ(sa.t, sb.t);
    EXPECT_EQ(sa.resume, sb.resume);
    EXPECT_EQ(sa.exhausted, sb.exhausted);
    ++counts[static_cast<int>(a.status)];
    if (a.status == ScanStatus::kNeedMoreInput) {
      EXPECT_EQ(a.context, nullptr);
      EXPECT_EQ(a.index, -1);
      const int64_t n = std::min(chunk, T - fed);
      if (n > 0) {
        att->extend(mem_a, memory.narrow(0, fed, n));
        att->extend(mem_b, memory.narrow(0, fed, n));
      }
      fed += n;
      if (fed == T) {
        mem_a.finish();
        mem_b.finish();
      }
      continue;
    }
    ASSERT_NE(a.context, nullptr);
    const auto context = torch::from_blob(const_cast<Scalar*>(a.context), {Dh}, dtype);
    EXPECT_TRUE(torch::equal(context, out.context)) << "step " << i;
    if (a.status == ScanStatus::kChose) {
      EXPECT_EQ(a.index, out.index);
      EXPECT_TRUE(torch::equal(context, memory[a.index])) << "the context is h[t_i]";
    } else {
      EXPECT_TRUE(torch::equal(context, torch::zeros({Dh}, dtype))) << "exhausted: zero context";
    }
    if (std::is_same_v<Scalar, double>) {
      // The first entry from t_{i-1} on whose sigmoid reaches tau, or none.
      int64_t expected = -1;
      for (int64_t j = ran_off ? T : t_ref; j < T && expected < 0; ++j) {
        const double e = energies[i][j].template item<double>();
        ASSERT_GT(std::abs(e - logit), 1e-9) << "an energy at the threshold: pick another seed";
        if (1.0 / (1.0 + std::exp(-e)) >= 0.4) expected = j;
      }
      EXPECT_EQ(a.status == ScanStatus::kChose ? a.index : -1, expected) << "step " << i;
      if (expected >= 0) t_ref = expected; else ran_off = true;
    }
    // Release what neither decoder can read any more (both states are equal).
    mem_a.release_before(att->first_needed(sa));
    mem_b.release_before(att->first_needed(sb));
    ++i;
  }
}

TEST(PreparedHardStep, DecidesAsHardStepIntoAndTheSigmoidRuleWhileStreaming) {
  std::array<int64_t, 3> counts{};  // kChose, kNeedMoreInput, kExhausted
  for (uint64_t seed = 60; seed < 72; ++seed) {
    for (int64_t chunk : {1, 3, 20}) {
      expect_prepared_step_decides_as_hard_step<double>(seed, chunk, counts);
      expect_prepared_step_decides_as_hard_step<float>(seed, chunk, counts);
    }
  }
  // The comparison must cover every outcome.
  EXPECT_GT(counts[static_cast<int>(ScanStatus::kChose)], 100);
  EXPECT_GT(counts[static_cast<int>(ScanStatus::kNeedMoreInput)], 100);
  EXPECT_GT(counts[static_cast<int>(ScanStatus::kExhausted)], 10);
}

TEST(PreparedHardStep, RefusesWhatItCannotStepAndNamesIt) {
  nn::OnlineMemory mem;
  AttentionOptions o = small_options("dot");
  for (const std::string mech : {"mocha", "matcha", "soft"}) {
    auto att = make(mech, o);
    expect_error([&] { nn::PreparedHardStep<double> s(*att, mem); },
                 "PreparedHardStep: attention: expected hard monotonic attention (\"monotonic\")");
  }
  o.monotonic_energy = "additive";
  auto additive = make("monotonic", o);
  expect_error([&] { nn::PreparedHardStep<double> s(*additive, mem); },
               "expected a dot-product monotonic energy (monotonic_energy \"dot\", 002 eq. 17), got \"additive\"");
  o.monotonic_energy = "dot";
  o.sample = true;
  auto sampling = make("monotonic", o);
  expect_error([&] { nn::PreparedHardStep<double> s(*sampling, mem); },
               "expected the threshold rule (options.sample = false)");
  o.sample = false;
  auto att = make("monotonic", o);  // float64
  const nn::PreparedHardStep<float> wrong(*att, mem);  // an empty memory has no dtype yet
  att->extend(mem, torch::randn({4, o.memory_dim}, torch::kDouble));
  expect_error([&] { nn::PreparedHardStep<float> s(*att, mem); },
               "PreparedHardStep: memory: expected dtype Float (the step's), got Double");
  nn::HardState state;
  const std::vector<float> query(static_cast<size_t>(o.query_dim), 1.0f);
  expect_error([&] { wrong.step(query.data(), state); },
               "PreparedHardStep::step: memory: expected dtype Float, got Double");
  // A state that resumes before what the memory still holds.
  const nn::PreparedHardStep<double> prepared(*att, mem);
  mem.release_before(3);
  att->extend(mem, torch::randn({40, o.memory_dim}, torch::kDouble));  // enough to compact the buffers
  mem.release_before(30);
  const std::vector<double> q(static_cast<size_t>(o.query_dim), 1.0);
  expect_error([&] { prepared.step(q.data(), state); },
               "PreparedHardStep::step: state: the scan resumes at memory entry 0, outside the entries the memory"
               " holds [30, 44]");
}

}  // namespace
}  // namespace mona::test
