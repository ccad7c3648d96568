// label: gmm
// GMM-family attention end to end (mona/nn/gmm_attention.h through make_attention, the
// seq2seq model, the search and the streaming runtime): the tiny task of test_seq2seq.cc
// learned by "sagmm-tr" and "gmm", streaming one symbol at a time equals offline, beam 3,
// HardState copies that do not alias, and the length penalty (003 eq. 13) of
// Seq2Seq::loss (value, and gradient through the model by finite differences).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>

#include "mona/nn/gmm_attention.h"
#include "mona/nn/search.h"
#include "mona/nn/seq2seq.h"
#include "util/nn_test_util.h"
#include "util/tiny_task.h"

namespace mona::test {
namespace {

using nn::ModelOptions;

ModelOptions tiny_options(const std::string& mechanism) { return tiny_model_options(mechanism); }

std::vector<int64_t> random_input(std::mt19937_64& gen) {
  return tiny_task_input(gen, /*distinct_neighbours=*/false);
}

TEST(GmmSeq2Seq, MakeAttentionBuildsTheGmmFamily) {
  nn::AttentionOptions o;
  o.query_dim = 3;
  o.memory_dim = 4;
  o.gmm.num_heads = 2;
  o.gmm.window_radius = 1.5;
  o.gmm.window_width = 5;
  o.gmm.max_step = 2.5;
  o.gmm.min_variance = 1e-3;
  struct Case {
    const char* name;
    bool source_aware;
    core::GmmWindow window;
    bool online;
  };
  for (const Case& c : {Case{"gmm", false, core::GmmWindow::kNone, false},
                        Case{"sagmm", true, core::GmmWindow::kNone, false},
                        Case{"sagmm-tr", true, core::GmmWindow::kAdaptive, true},
                        Case{"sagmm-fixed", true, core::GmmWindow::kFixed, true}}) {
    auto a = nn::make_attention(c.name, o);
    auto* g = dynamic_cast<nn::GmmAttention*>(a.get());
    ASSERT_NE(g, nullptr) << c.name;
    const auto& go = g->gmm_options();
    EXPECT_EQ(go.num_heads, 2) << c.name;
    EXPECT_EQ(g->source_aware(), c.source_aware) << c.name;
    EXPECT_EQ(g->window().window, c.window) << c.name;
    EXPECT_EQ(g->window().radius, 1.5);
    EXPECT_EQ(g->window().width, 5);
    EXPECT_EQ(go.max_step, 2.5);
    EXPECT_EQ(go.min_variance, 1e-3);
    EXPECT_EQ(a->is_online(), c.online) << c.name;
  }
  auto bad = o;
  bad.gmm.num_heads = 0;
  expect_error([&] { nn::make_attention("sagmm-tr", bad); }, "gmm.num_heads must lie in [1, 1048576], got 0");
  bad = o;
  bad.gmm.window_radius = -1;
  expect_error([&] { nn::make_attention("sagmm-tr", bad); },
                     "gmm.window_radius must be finite and > 0, got -1");
  bad = o;
  bad.gmm.window_width = 0;
  expect_error([&] { nn::make_attention("sagmm-fixed", bad); },
                     "gmm.window_width c must be >= 1, got 0");
  bad = o;
  bad.gmm.min_variance = 0;
  expect_error([&] { nn::make_attention("gmm", bad); },
                     "gmm.min_variance must be finite and > 0, got 0");
  expect_error([&] { nn::make_attention("sagmm-xl", o); },
                     "gmm, sagmm, sagmm-tr, sagmm-fixed; got \"sagmm-xl\"");
}



TEST(GmmSeq2Seq, DecodeExpectedMatchesTheTask) {
  // Offline decoding with the training computation: GMM's state is mu [1, H], passed
  // through by Decoder::expected_step; positions are the argmax of the weights.
  auto model = trained_gmm_tiny("sagmm-tr").model;
  std::mt19937_64 gen(5);
  torch::NoGradGuard ng;
  int errors = 0;
  for (int k = 0; k < 20; ++k) {
    auto x = random_input(gen);
    const int64_t T = static_cast<int64_t>(x.size());
    auto [mem, ml] = model->encoder->forward(torch::tensor(x, torch::kLong).unsqueeze(0),
                                             torch::full({1}, T, torch::kLong));
    auto m = model->decoder->attention->prepare(mem, ml);
    auto h = nn::decode_expected(*model->decoder, m, nn::SearchOptions{});
    errors += h.tokens != tiny_task_output(x);
    for (int64_t p : h.positions) {
      EXPECT_GE(p, 0);
      EXPECT_LT(p, T);
    }
  }
  EXPECT_LE(errors, 2);
}

// Runs `queries` [n, Dq] through the HardState interface from `state`, feeding frames of
// `frames` [T, Dh] one at a time into `memory` when a step needs input. Returns contexts.
std::vector<torch::Tensor> run(nn::Attention& att, nn::OnlineMemory& memory,
                               const torch::Tensor& frames, nn::HardState& state,
                               const torch::Tensor& queries) {
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < queries.size(0); ++i) {
    for (;;) {
      auto r = att.hard_step(queries[i], memory, state);
      if (r.status == mona::core::ScanStatus::kNeedMoreInput) {
        const int64_t fed = memory.size();
        EXPECT_LT(fed, frames.size(0));
        if (fed >= frames.size(0)) return out;
        att.extend(memory, frames[fed]);
        if (fed + 1 == frames.size(0)) memory.finish();
        continue;
      }
      out.push_back(r.context);
      break;
    }
  }
  return out;
}

TEST(GmmSeq2Seq, HardStateCopiesDoNotAlias) {
  torch::manual_seed(11);
  nn::AttentionOptions o;
  o.query_dim = 3;
  o.memory_dim = 4;
  o.gmm.num_heads = 2;
  for (const char* mech : {"sagmm-tr", "sagmm-fixed", "gmm"}) {
    auto att = nn::make_attention(mech, o);
    att->to(torch::kDouble);
    att->eval();
    const int64_t T = 24;
    auto frames = torch::randn({T, 4}, torch::kDouble);
    auto common = torch::randn({3, 3}, torch::kDouble);
    auto qa = torch::randn({4, 3}, torch::kDouble);
    auto qb = torch::randn({4, 3}, torch::kDouble) * 2;
    // Alone: a fresh stream per hypothesis.
    auto alone = [&](const torch::Tensor& q) {
      nn::OnlineMemory m;
      nn::HardState s;
      run(*att, m, frames, s, common);
      return run(*att, m, frames, s, q);
    };
    const auto ea = alone(qa), eb = alone(qb);
    // Together: one stream, a common prefix, then two copies advanced in turn (B first
    // catches up with the frames A pulled in; both share the positions computed by A).
    nn::OnlineMemory m;
    nn::HardState s;
    run(*att, m, frames, s, common);
    nn::HardState a = s, b = s;
    const auto* before = s.extension.get();
    std::vector<torch::Tensor> ga, gb;
    for (int64_t i = 0; i < qa.size(0); ++i) {
      auto ra = run(*att, m, frames, a, qa.narrow(0, i, 1));
      auto rb = run(*att, m, frames, b, qb.narrow(0, i, 1));
      ga.insert(ga.end(), ra.begin(), ra.end());
      gb.insert(gb.end(), rb.begin(), rb.end());
    }
    EXPECT_EQ(s.extension.get(), before) << mech << ": the common state was modified";
    ASSERT_EQ(ga.size(), ea.size()) << mech;
    ASSERT_EQ(gb.size(), eb.size()) << mech;
    // Exact: a copy steps through the same per-frame positions and the same window
    // arithmetic as a fresh stream; sharing the positions must change nothing.
    for (size_t i = 0; i < ea.size(); ++i) {
      EXPECT_TRUE(torch::equal(ga[i], ea[i])) << mech << " A step " << i;
      EXPECT_TRUE(torch::equal(gb[i], eb[i])) << mech << " B step " << i;
    }
    // The two hypotheses share one positions object (no per-copy copy of nu / delta).
    const auto* xa = dynamic_cast<const nn::GmmHardState*>(a.extension.get());
    const auto* xb = dynamic_cast<const nn::GmmHardState*>(b.extension.get());
    ASSERT_TRUE(xa && xb);
    EXPECT_EQ(xa->positions.get(), xb->positions.get());
    EXPECT_NE(xa, xb);
  }
}

// Length penalty through the model: value against a direct evaluation and gradient
// against finite differences, on a tiny double model.
TEST(GmmSeq2Seq, LengthPenaltyValueAndGradient) {
  torch::manual_seed(12);
  ModelOptions opt = tiny_options("sagmm");
  opt.embedding_dim = 4;
  opt.encoder_hidden = 5;
  opt.decoder_embedding_dim = 3;
  opt.decoder_hidden = 4;
  opt.attention_options.gmm.num_heads = 2;
  auto model = std::make_shared<nn::Seq2Seq>(opt);
  model->to(torch::kDouble);
  model->eval();
  auto x = torch::tensor({{4, 5, 6, 7, 8}, {9, 8, 7, 0, 0}}, torch::kLong);
  auto xl = torch::tensor({5, 3}, torch::kLong);
  auto y = torch::tensor({{9, 8, 7, 6}, {4, 5, 0, 0}}, torch::kLong);
  auto yl = torch::tensor({4, 2}, torch::kLong);
  nn::LengthPenaltyOptions lp;
  lp.lambda = 0.3;
  lp.until_step = 10;
  lp.step = 3;
  auto penalty = [&] {
    return model->loss(x, xl, y, yl, {}, nullptr, nullptr, &lp) - model->loss(x, xl, y, yl, {});
  };
  // Direct evaluation: mu of the </s> step (row L) and nu of the last frame, per head.
  {
    torch::NoGradGuard ng;
    auto [mem, ml] = model->encoder->forward(x, xl);
    auto m = model->decoder->attention->prepare(mem, ml);
    auto y_in = torch::cat({torch::ones({2, 1}, torch::kLong), y}, 1);  // rows <= L as in loss
    torch::Tensor states;
    model->decoder->forward(y_in, m, &states);
    auto* g = dynamic_cast<nn::GmmAttention*>(model->decoder->attention.get());
    ASSERT_NE(g, nullptr);
    auto nu = g->positions(m).first;  // [B, H, T]
    ASSERT_EQ(states.sizes(), (std::vector<int64_t>{2, 5, 2}));
    double expect = 0;
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t I = yl[b].item<int64_t>() + 1, J = ml[b].item<int64_t>();  // memory length (with </s>)
      const double mm = static_cast<double>(std::min(I, J));
      for (int64_t h = 0; h < 2; ++h) {
        expect += lp.lambda * (std::pow(states[b][I - 1][h].item<double>() - mm, 2) +
                               std::pow(nu[b][h][J - 1].item<double>() - mm, 2));
      }
    }
    expect /= 2;
    EXPECT_GT(expect, 1e-3);
    // float64; the model's penalty is the difference of two losses of ~2.3, so it carries
    // their rounding (~1e-15; measured 1e-17), far inside 1e-12.
    EXPECT_NEAR(penalty().item<double>(), expect, 1e-12);
  }
  // Gradient through the model (query projection, position projection, encoder).
  auto* g = dynamic_cast<nn::GmmAttention*>(model->decoder->attention.get());
  model->zero_grad();
  penalty().backward();
  auto f = [&] {
    torch::NoGradGuard ng;
    return penalty().item<double>();
  };
  const auto pos_params = g->position_energy->parameters();
  ASSERT_EQ(pos_params.size(), 2u);
  for (auto& p : std::vector<torch::Tensor>{g->query_proj->bias, g->query_proj->weight,
                                            pos_params[0], pos_params[1]}) {
    expect_grad_close(p.grad(), numeric_grad(f, p.detach()), 1e-6, "penalty gradient");
  }
  auto emb = model->encoder->parameters()[0];
  expect_grad_close(emb.grad(), numeric_grad(f, emb.detach()), 1e-6, "encoder gradient");
  // Off from until_step on; lambda = 0 and non-GMM mechanisms: no-op.
  lp.step = 10;
  EXPECT_EQ(penalty().item<double>(), 0.0);
  lp.step = 0;
  lp.lambda = 0;
  EXPECT_EQ(penalty().item<double>(), 0.0);
  lp.lambda = -1;
  expect_error([&] { penalty(); }, "LengthPenaltyOptions.lambda must be finite and >= 0, got -1");
  lp.lambda = 0.3;
  auto mocha = std::make_shared<nn::Seq2Seq>(tiny_options("mocha"));
  mocha->eval();
  EXPECT_EQ((mocha->loss(x, xl, y, yl, {}, nullptr, nullptr, &lp) - mocha->loss(x, xl, y, yl, {}))
                .item<float>(),
            0.0f);
}

}  // namespace
}  // namespace mona::test
