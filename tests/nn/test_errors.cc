// The LibTorch layer reports bad arguments with mona's type (mona::ArgumentError, a
// std::invalid_argument), not LibTorch's c10::Error, and keeps the value in the message.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mona/core/error.h"
#include "mona/core/rng.h"
#include "mona/nn/attention.h"
#include "mona/nn/conditional_bernoulli.h"
#include "mona/nn/functional.h"
#include "mona/nn/gmm_attention.h"

TEST(NnErrors, ArgumentChecksThrowMonasArgumentError) {
  mona::nn::AttentionOptions o;
  o.query_dim = 4;
  o.memory_dim = 4;
  o.chunk_size = 0;
  try {
    mona::nn::make_attention("mocha", o);
    FAIL() << "chunk_size 0 was accepted";
  } catch (const mona::ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("chunk_size"), std::string::npos) << e.what();
  }
  // A tensor of the wrong rank: the message names the argument and its sizes.
  const auto p = torch::full({2, 3}, 0.5, torch::kDouble);
  try {
    mona::nn::monotonic_alignment(p);
    FAIL() << "a 2-D p was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mona::nn::make_attention("bogus", o), mona::Error);
}

TEST(NnErrors, ValuesThatFailAChecksArePrintedSoThatTheyVisiblyFailIt) {
  const auto p = torch::full({1, 1, 3}, 0.5, torch::kFloat);
  p[0][0][2] = 1.0f + 1.0f / (1 << 23);
  try {
    mona::nn::monotonic_alignment(p);
    FAIL() << "p > 1 was accepted";
  } catch (const mona::ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("got 1.0000001 at [0, 0, 2]"), std::string::npos) << e.what();
  }
}

// Every autograd node of mona::nn has a first-order backward pass (the core kernels, no
// graph). Differentiating through it (create_graph=True) is refused with the function named,
// not answered with a gradient that lacks the second-order terms; without create_graph the
// same gradient is computed as usual.
TEST(NnErrors, DoubleBackwardIsRefusedByEveryNode) {
  torch::manual_seed(3);
  namespace nn = mona::nn;
  const int64_t B = 2, U = 3, T = 5, H = 2, d = 4;
  auto leaf = [](torch::Tensor t) { return t.to(torch::kDouble).requires_grad_(); };
  const auto p = leaf(torch::sigmoid(torch::randn({B, U, T})));
  const auto u = leaf(torch::randn({B, U, T}));
  const auto p2 = leaf(torch::sigmoid(torch::randn({B, T})));
  const auto a2 = leaf(torch::softmax(torch::randn({B, T}), 1));
  const auto q = leaf(torch::randn({B, U, d})), keys = leaf(torch::randn({B, T, d})), w = leaf(torch::randn({d}));
  const auto mu = leaf(torch::rand({B, U, H}) * T), var = leaf(torch::rand({B, U, H}) + 0.5);
  const auto mix = leaf(torch::softmax(torch::randn({B, U, H}), 2));
  const auto nu = leaf(torch::arange(1, T + 1).repeat({B, 1}) + 0.1 * torch::rand({B, T}));
  const auto delta = leaf(torch::ones({B, T}));
  const auto logits = leaf(torch::randn({B, T}));
  const auto k = torch::tensor({2, 3}, torch::kLong);
  auto b = torch::zeros({B, T}, torch::kDouble);
  b.index_put_({0, torch::indexing::Slice(0, 2)}, 1.0);
  b.index_put_({1, torch::indexing::Slice(1, 4)}, 1.0);
  const auto order = torch::tensor({{1, 0, 0}, {3, 1, 2}}, torch::kLong);
  const auto log_emit = leaf(torch::log_softmax(torch::randn({B, 2, T}), 1));
  mona::core::Rng rng(7);
  const std::vector<std::pair<std::string, std::function<torch::Tensor()>>> cases = {
      {"mona::nn::monotonic_alignment", [&] { return nn::monotonic_alignment(p); }},
      {"mona::nn::monotonic_alignment_step", [&] { return nn::monotonic_alignment_step(p2, a2); }},
      {"mona::nn::mocha_chunkwise", [&] { return nn::mocha_chunkwise(p, u, 2); }},
      {"mona::nn::matcha_chunkwise", [&] { return nn::matcha_chunkwise(p, p, u); }},
      {"mona::nn::masked_softmax", [&] { return nn::masked_softmax(u); }},
      {"mona::nn::additive_energy", [&] { return nn::additive_energy(q, keys, w); }},
      {"mona::nn::attention_context", [&] { return nn::attention_context(a2, keys); }},
      {"mona::nn::gmm_attention_weights", [&] { return nn::gmm_attention_weights(mu, var, mix, nu, delta); }},
      {"mona::nn::gmm_length_penalty", [&] { return nn::gmm_length_penalty(mu, nu, 0.5); }},
      {"mona::nn::poisson_binomial_log_prob", [&] { return nn::poisson_binomial_log_prob(logits, k); }},
      {"mona::nn::cb_log_prob", [&] { return nn::cb_log_prob(logits, b); }},
      {"mona::nn::cb_log_table", [&] { return nn::cb_log_table(logits, k).nan_to_num(0.0, 0.0, 0.0); }},
      {"mona::nn::cb_idb_step_log_probs", [&] { return nn::cb_idb_step_log_probs(logits, b); }},
      {"mona::nn::cb_bb_step_log_probs", [&] { return nn::cb_bb_step_log_probs(logits, b); }},
      {"mona::nn::cb_db_step_log_probs", [&] { return nn::cb_db_step_log_probs(logits, order, k); }},
      {"mona::nn::cb_idb_step_log_probs", [&] { return nn::cb_sample_idb(logits, k, rng).step_log_probs; }},
      {"mona::nn::cb_marginal_log_likelihood", [&] { return nn::cb_marginal_log_likelihood(logits, log_emit); }},
  };
  for (const auto& [name, f] : cases) {
    SCOPED_TRACE(name);
    const torch::Tensor y = f();
    ASSERT_TRUE(y.requires_grad());
    std::vector<torch::Tensor> inputs;
    for (const auto& t : {p, u, p2, a2, q, keys, w, mu, var, mix, nu, delta, logits, log_emit}) inputs.push_back(t);
    const auto loss = (y * y).sum();  // its gradient depends on y: second order through the node
    try {
      torch::autograd::grad({loss}, inputs, {}, /*retain_graph=*/true, /*create_graph=*/true,
                            /*allow_unused=*/true);
      ADD_FAILURE() << "create_graph=True through " << name << " was accepted";
    } catch (const c10::NotImplementedError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(name + ": mona's backward passes are first order"), std::string::npos) << msg;
    }
    const auto first = torch::autograd::grad({loss}, inputs, {}, /*retain_graph=*/false, /*create_graph=*/false,
                                             /*allow_unused=*/true);
    bool any = false;
    for (const auto& g : first) any = any || (g.defined() && g.abs().sum().item<double>() > 0);
    EXPECT_TRUE(any) << "first order: no gradient";
  }
}

TEST(NnErrors, ArgumentsKeptForBackwardAreRefusedWhenChangedInPlace) {
  // Lengths and counts are kept for the backward pass outside save_for_backward's list (they
  // may be undefined); a change in place between the passes used to give another gradient
  // silently. Now the backward pass refuses it, naming the node and the argument.
  namespace nn = mona::nn;
  torch::manual_seed(5);
  const int64_t B = 2, U = 3, T = 5;
  const auto p = torch::sigmoid(torch::randn({B, U, T}, torch::kDouble)).requires_grad_();
  const auto mu = (torch::rand({B, U, 1}, torch::kDouble) * T).requires_grad_();
  const auto nu = torch::arange(1, T + 1, torch::kDouble).repeat({B, 1});
  const auto logits = torch::randn({B, T}, torch::kDouble).requires_grad_();
  struct Case {
    std::string node, argument;
    std::function<torch::Tensor(const torch::Tensor&)> forward;  // of the tensor changed after it
  };
  const std::vector<Case> cases = {
      {"mona::nn::monotonic_alignment", "in_lens", [&](const torch::Tensor& l) { return nn::monotonic_alignment(p, l); }},
      {"mona::nn::masked_softmax", "out_lens",
       [&](const torch::Tensor& l) { return nn::masked_softmax(p, {}, l); }},
      {"mona::nn::gmm_length_penalty", "in_lens", [&](const torch::Tensor& l) { return nn::gmm_length_penalty(mu, nu, 0.5, l); }},
      {"mona::nn::poisson_binomial_log_prob", "k", [&](const torch::Tensor& l) { return nn::poisson_binomial_log_prob(logits, l); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.node);
    const torch::Tensor lens = torch::tensor({3L, 2L}, torch::kLong);  // within T and U
    // Unchanged: the backward pass runs.
    torch::autograd::grad({c.forward(lens).sum()}, {p, mu, logits}, {}, false, false, /*allow_unused=*/true);
    const torch::Tensor kept = c.forward(lens);
    lens[1] = 1;
    try {
      torch::autograd::grad({kept.sum()}, {p, mu, logits}, {}, false, false, /*allow_unused=*/true);
      ADD_FAILURE() << c.argument << " changed in place was accepted";
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.node + ": " + c.argument + " was modified in place after the forward pass (version "),
                std::string::npos) << msg;
    }
  }
}
