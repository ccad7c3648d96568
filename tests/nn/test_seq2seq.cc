// label: train
// Seq2seq model, search and streaming runtime: a tiny monotonic task learned by every
// mechanism, streaming equals offline, beam width 1 equals greedy, the streaming encoder
// equals the batch encoder.
#include "mona/nn/seq2seq.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "mona/data/tokens.h"
#include "mona/nn/search.h"
#include "util/nn_test_util.h"
#include "util/test_util.h"
#include "util/tiny_task.h"

namespace mona::test {
namespace {

using nn::ModelOptions;

TEST(Seq2Seq, StreamingEncoderEqualsBatchEncoder) {
  for (const std::string kind : {"symbols", "features"}) {
    // unidirectional, bidirectional, lookahead 2, time reduction after layer 1 with a
    // feature normalisation that is not the identity
    for (int64_t variant : {0, 1, 2, 3}) {
      const bool bidi = variant == 1;
      torch::manual_seed(3);
      ModelOptions o = tiny_monotonic_options("mocha");
      o.input_kind = kind;
      o.feature_dim = 7;
      o.conv_channels = 4;
      o.bidirectional = bidi;
      o.lookahead = variant == 2 ? 2 : 0;
      o.projection_dim = bidi ? 12 : 0;
      o.encoder_layers = 2;
      o.time_reduction_layers = variant == 3 ? 1 : 0;
      nn::Encoder enc(o);
      if (variant == 3 && kind == "features") enc.set_normalization(torch::randn({7}), torch::rand({7}) + 0.5);
      enc.eval();
      torch::NoGradGuard ng;
      for (int64_t T : {1, 2, 5, 8, 13}) {
        torch::Tensor x = kind == "symbols" ? torch::randint(4, 10, {T}, torch::kLong)
                                            : torch::randn({T, 7});
        auto [mem, ml] = enc.forward(x.unsqueeze(0), torch::full({1}, T, torch::kLong));
        EXPECT_EQ(ml[0].item<int64_t>(), enc.output_length(T));
        nn::EncoderStream st;
        std::vector<torch::Tensor> parts;
        for (int64_t t = 0; t < T; ++t) parts.push_back(enc.stream(st, x.narrow(0, t, 1), false));
        parts.push_back(enc.stream(st, torch::Tensor(), true));
        auto streamed = torch::cat(parts);
        ASSERT_EQ(streamed.size(0), enc.output_length(T)) << kind << " T=" << T;
        // Other arithmetic: the batch encoder runs the LSTM over the whole sequence (one
        // matrix product for every time step's input projection), the stream one step at a
        // time, so they agree to float32 rounding only. Each output (in [-1, 1]) comes from
        // dot products of <= 48 terms and <= 13 recurrent steps: a few dozen roundings of
        // 6e-8, well inside 1e-6 + 1e-5 |x|. Measured: at most 6e-8 over the default,
        // Haswell, Sandybridge, SkylakeX and Nehalem OpenBLAS kernels.
        EXPECT_TRUE(torch::allclose(streamed, mem[0], 1e-5, 1e-6)) << kind << " variant " << variant << " T=" << T;
      }
      // Padding in a batch does not change a sequence's memory (to float32 rounding: a batch
      // of 2 and a batch of 1 take different matrix-product kernels; measured <= 3e-8).
      torch::Tensor xb = kind == "symbols" ? torch::randint(4, 10, {2, 9}, torch::kLong) : torch::randn({2, 9, 7});
      auto lens = torch::tensor({9, 5}, torch::kLong);
      auto [mb, mlb] = enc.forward(xb, lens);
      auto [ma, mla] = enc.forward(xb[1].narrow(0, 0, 5).unsqueeze(0), torch::tensor({5}, torch::kLong));
      const int64_t n = mla[0].item<int64_t>();
      EXPECT_EQ(mlb[1].item<int64_t>(), n);
      EXPECT_TRUE(torch::allclose(mb[1].narrow(0, 0, n), ma[0].narrow(0, 0, n), 1e-5, 1e-6)) << kind << " variant " << variant;
    }
  }
}

// The factor the streaming runtime maps memory entries back to input positions with
// (stream/stream.h): every memory entry of the feature front end covers subsampling() frames,
// the last one possibly fewer, as the convolutions' real output lengths show.
TEST(Seq2Seq, SubsamplingIsTheFrontEndsRatioOfInputsToMemoryEntries) {
  for (const std::string kind : {"symbols", "features"}) {
   for (int64_t reductions : {0, 1, 2}) {
    ModelOptions o = tiny_monotonic_options("mocha");
    o.input_kind = kind;
    o.append_eos = false;
    o.feature_dim = 5;
    o.conv_channels = 2;
    o.encoder_layers = 3;
    o.time_reduction_layers = reductions;
    nn::Encoder enc(o);
    enc.eval();
    torch::NoGradGuard ng;
    const int64_t s = enc.subsampling();
    EXPECT_EQ(s, (kind == "symbols" ? 1 : 4) << reductions);
    // Entry m keeps front-end output m * 2^n (elements 0, 2, 4, .. survive each reduction),
    // whose receptive field ends at input (m 2^n + 1) * 4 - 1 for frames, m 2^n for symbols.
    for (int64_t m = 0; m < 5; ++m) {
      const int64_t kept = m << reductions;
      EXPECT_EQ(enc.last_input_of(m), kind == "symbols" ? kept : 4 * kept + 3) << kind << " m " << m;
    }
    for (int64_t T = 1; T <= 13 * (1 << reductions); ++T) {
      const torch::Tensor x = kind == "symbols" ? torch::randint(4, 10, {1, T}, torch::kLong) : torch::randn({1, T, 5});
      const int64_t m = enc.forward(x, torch::full({1}, T, torch::kLong)).first.size(1);
      EXPECT_EQ(m, enc.output_length(T)) << kind << " T " << T;
      EXPECT_EQ(m, (T + s - 1) / s) << kind << " T " << T;  // ceil(T / s) entries
    }
   }
  }
}

TEST(Seq2Seq, TimeReductionAndNormalizationErrorsNameTheValue) {
  ModelOptions o = tiny_monotonic_options("mocha");
  o.encoder_layers = 2;
  o.time_reduction_layers = 2;
  expect_error([&] { o.validate(); }, "time_reduction_layers must lie in [0, encoder_layers = 2), got 2");
  o.time_reduction_layers = -1;
  expect_error([&] { o.validate(); }, "got -1");
  o.time_reduction_layers = 0;
  nn::Encoder symbols(o);
  expect_error([&] { symbols.set_normalization(torch::zeros({3}), torch::ones({3})); }, "a symbols model has no feature normalisation");
  o.input_kind = "features";
  o.feature_dim = 4;
  nn::Encoder frames(o);
  expect_error([&] { frames.set_normalization(torch::zeros({3}), torch::ones({4})); }, "mean: expected [F = 4], got [3]");
  o.input_kind = "audio";
  expect_error([&] { o.validate(); }, "feature_dim must equal features.num_bins() = 80 for audio inputs, got 4");
}

// With lookahead k, memory entry t is a function of inputs 0 .. t + k exactly: streaming
// releases it when input t + k arrives, changing input t + k moves it, changing any later
// input does not.
TEST(Seq2Seq, SetNormalizationRefusesWhatGlobalCmvnRefuses) {
  // GlobalCmvn::from's rule: a finite mean, an inv_std finite and > 0 (a NaN mean or a zero
  // inv_std would turn every frame into NaN or 0). The refused call leaves the
  // normalisation as it was.
  ModelOptions o = tiny_monotonic_options("mocha");
  o.input_kind = "features";
  o.feature_dim = 4;
  nn::Encoder enc(o);
  const torch::Tensor mean = torch::tensor({1.0, 2.0, 3.0, 4.0}), inv = torch::full({4}, 0.5);
  enc.set_normalization(mean, inv);
  const float nan = std::nanf(""), inf = INFINITY;
  expect_error([&] { enc.set_normalization(torch::tensor({0.f, nan, 0.f, 0.f}), inv); },
               "Encoder::set_normalization: GlobalCmvn::from: mean[1] = nan: expected finite");
  expect_error([&] { enc.set_normalization(torch::tensor({0.f, 0.f, inf, 0.f}), inv); },
               "Encoder::set_normalization: GlobalCmvn::from: mean[2] = inf: expected finite");
  expect_error([&] { enc.set_normalization(mean, torch::tensor({1.f, 1.f, 1.f, 0.f})); },
               "Encoder::set_normalization: GlobalCmvn::from: inv_std[3] = 0: expected finite "
               "and > 0");
  expect_error([&] { enc.set_normalization(mean, torch::tensor({-1.f, 1.f, 1.f, 1.f})); },
               "inv_std[0] = -1: expected finite and > 0");
  expect_error([&] { enc.set_normalization(mean, torch::tensor({1.f, inf, 1.f, 1.f})); },
               "inv_std[1] = inf: expected finite and > 0");
  EXPECT_TRUE(torch::equal(enc.feature_mean(), mean.to(enc.feature_mean().scalar_type())));
  const torch::Tensor x = torch::ones({1, 2, 4});
  EXPECT_TRUE(torch::allclose(enc.normalize(x), (x - mean) * 0.5));
}

TEST(Seq2Seq, EncoderForwardChecksInputRankBeforeReadingIt) {
  // A 1-dim or 0-dim input used to reach inputs.size(1) and fail with LibTorch's IndexError.
  ModelOptions o = tiny_monotonic_options("mocha");
  nn::Encoder symbols(o);
  expect_error([&] { symbols.forward(torch::zeros({3}, torch::kLong), torch::tensor({3L})); },
               "Encoder::forward: inputs: expected 2 dims (symbols [B, T]) or 3 (frames "
               "[B, T, F]), got [3]");
  expect_error([&] { symbols.forward(torch::tensor(2L), torch::tensor({1L})); },
               "Encoder::forward: inputs: expected 2 dims (symbols [B, T]) or 3 (frames "
               "[B, T, F]), got []");
  o.input_kind = "features";
  o.feature_dim = 4;
  nn::Encoder frames(o);
  expect_error([&] { frames.forward(torch::zeros({1, 2, 3, 4}), torch::tensor({2L})); },
               "Encoder::forward: inputs: expected 2 dims (symbols [B, T]) or 3 (frames "
               "[B, T, F]), got [1, 2, 3, 4]");
}

// Features with no frame at all (audio shorter than one frame): the batch encoder gives a
// memory with no valid entry, as the streaming one does; the convolutions had failed in
// LibTorch ("Kernel size can't be greater than actual input size"), under mona plot and
// expected decoding.
TEST(Seq2Seq, NoFramesGiveAnEmptyMemory) {
  for (int64_t reduce : {0, 1}) {
    torch::manual_seed(5);
    ModelOptions o = tiny_monotonic_options("mocha");
    o.input_kind = "features";
    o.feature_dim = 7;
    o.conv_channels = 4;
    o.encoder_layers = 2;
    o.time_reduction_layers = reduce;
    nn::Encoder enc(o);
    enc.eval();
    torch::NoGradGuard ng;
    auto [mem, ml] = enc.forward(torch::zeros({2, 0, 7}), torch::zeros({2}, torch::kLong));
    EXPECT_EQ(ml.sizes(), at::IntArrayRef({2}));
    EXPECT_EQ(ml.max().item<int64_t>(), 0);
    EXPECT_EQ(enc.output_length(0), 0);
    EXPECT_EQ(mem.size(0), 2);
    EXPECT_EQ(mem.size(1), 0) << "T' = output_length(0) entries, as for any T";
    nn::EncoderStream st;
    EXPECT_EQ(enc.stream(st, torch::Tensor(), true).size(0), 0);
  }
}

// A NaN or infinite feature value is refused by the streaming encoder, naming where it is
// (it turned every later output of the stream into NaN without a word).
TEST(Seq2Seq, StreamedFramesMustBeFinite) {
  ModelOptions o = tiny_monotonic_options("mocha");
  o.input_kind = "features";
  o.feature_dim = 7;
  o.conv_channels = 4;
  nn::Encoder enc(o);
  enc.eval();
  torch::NoGradGuard ng;
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    nn::EncoderStream st;
    enc.stream(st, torch::randn({2, 7}), false);
    torch::Tensor x = torch::randn({4, 7});
    x[2][5] = bad;
    expect_error([&] { enc.stream(st, x, false); },
                 std::string("Encoder::stream: inputs[2, 5] = ") + (std::isnan(bad) ? "nan" : "inf") +
                     ": expected finite feature values");
  }
}

TEST(Seq2Seq, LookaheadEntrySeesExactlyKMoreInputs) {
  for (int64_t k : {1, 3}) {
    torch::manual_seed(7);
    ModelOptions o = tiny_monotonic_options("monotonic");
    o.append_eos = false;
    o.lookahead = k;
    nn::Encoder enc(o);
    enc.eval();
    torch::NoGradGuard ng;
    const int64_t T = 9;
    const torch::Tensor x = torch::randint(4, 10, {T}, torch::kLong);
    nn::EncoderStream st;
    int64_t released = 0;
    for (int64_t t = 0; t < T; ++t) {
      released += enc.stream(st, x.narrow(0, t, 1), false).size(0);
      EXPECT_EQ(released, std::max<int64_t>(0, t + 1 - k)) << "k=" << k << " after input " << t;
    }
    released += enc.stream(st, torch::Tensor(), true).size(0);
    EXPECT_EQ(released, T);
    auto one = torch::ones({1}, torch::kLong);
    const torch::Tensor mem = enc.forward(x.unsqueeze(0), T * one).first[0];
    for (int64_t changed = 0; changed < T; ++changed) {
      torch::Tensor y = x.clone();
      y[changed] = x[changed].item<int64_t>() == 4 ? 5 : 4;
      const torch::Tensor my = enc.forward(y.unsqueeze(0), T * one).first[0];
      for (int64_t t = 0; t < T; ++t) {
        // Exact: both calls have the same shapes, so entry t is the same arithmetic on the
        // same values whenever inputs 0 .. t + k are unchanged.
        const bool same = torch::equal(my[t], mem[t]);
        EXPECT_EQ(same, changed > t + k) << "k=" << k << " entry " << t << " input " << changed;
      }
    }
  }
}

// Data-parallel training (mona/train/trainer.h) adds the shards' gradients: with
// BatchTotals, the losses and gradients of the shards of a batch add up to the batch's, for
// the smoothed cross entropy and for the GMM family's length penalty (divided by tokens and
// by sequences respectively). Float64 model in eval mode (no noise, no dropout): the two
// sides differ only in the order of additions, so 1e-12 relative is rounding with room.
TEST(Seq2Seq, ShardLossesWithBatchTotalsAddUpToTheBatchLoss) {
  for (const std::string mechanism : {"mocha", "sagmm"}) {
    SCOPED_TRACE(mechanism);
    torch::manual_seed(21);
    ModelOptions o = tiny_monotonic_options(mechanism);
    o.ctc_weight = 0.3;  // the CTC term is divided like the cross entropy
    auto model = std::make_shared<nn::Seq2Seq>(o);
    model->to(torch::kDouble);
    model->eval();
    const std::vector<std::vector<int64_t>> ys = {{4, 5, 6, 7}, {8, 9}, {5, 5, 6}, {7}, {9, 4, 8, 6}};
    auto [y, yl] = pad_batch(ys);
    auto x = torch::randint(4, 10, {5, 6}, torch::kLong);
    auto xl = torch::tensor({6, 3, 5, 2, 6}, torch::kLong);
    nn::SmoothingOptions sm;
    sm.uniform = 0.1;
    sm.localized = {0.015, 0.035, 0.035, 0.015};
    nn::LengthPenaltyOptions lp;
    lp.lambda = 0.05;
    const auto params = model->parameters();
    auto gradients = [&] {
      std::vector<at::Tensor> g;
      for (const auto& p : params) g.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
      model->zero_grad();
      return g;
    };
    int64_t batch_tokens = 0;
    at::Tensor batch_loss = model->loss(x, xl, y, yl, sm, nullptr, &batch_tokens, &lp);
    batch_loss.backward();
    const auto batch_grads = gradients();
    EXPECT_EQ(batch_tokens, 4 + 2 + 3 + 1 + 4 + 5);  // U_b + 1 each
    nn::BatchTotals totals{batch_tokens, 5};
    double shard_sum = 0;
    std::vector<at::Tensor> shard_grads;
    for (const auto& [begin, size] : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 3}}) {
      int64_t tokens = 0;
      at::Tensor l = model->loss(x.narrow(0, begin, size), xl.narrow(0, begin, size), y.narrow(0, begin, size),
                                 yl.narrow(0, begin, size), sm, nullptr, &tokens, &lp, &totals);
      l.backward();
      shard_sum += l.item<double>();
      const auto g = gradients();
      if (shard_grads.empty()) shard_grads = g;
      else for (size_t k = 0; k < g.size(); ++k) shard_grads[k] += g[k];
    }
    EXPECT_NEAR(shard_sum, batch_loss.item<double>(), 1e-12 * std::abs(batch_loss.item<double>()));
    for (size_t k = 0; k < params.size(); ++k) {
      const double scale = batch_grads[k].abs().max().item<double>();
      EXPECT_LE((shard_grads[k] - batch_grads[k]).abs().max().item<double>(), 1e-12 * std::max(scale, 1e-3))
          << "parameter " << k;
    }
    mona::test::expect_error([&] { nn::BatchTotals few{3, 5};
                                   model->loss(x, xl, y, yl, sm, nullptr, nullptr, nullptr, &few); },
                             "BatchTotals of 3 tokens and 5 sequences cannot hold this shard's 19 and 5");
  }
}

// 003 sec. 2.4's EOS frame (ModelOptions::p_eos). encode() appends the all-ones frame right
// after each sequence's last memory entry: to every sequence outside training, to those
// drawn with probability p_eos in training. The loss trains </s> only on the sequences
// that got it: checked against the cross entropy summed by hand from the decoder's
// log-probabilities over the same memory (float64; the two differ only in summation order).
TEST(Seq2Seq, EosFrameIsAppendedAndTrainsEosOnlyWhereItWas) {
  for (const std::string mechanism : {"mocha", "sagmm-tr"}) {
    SCOPED_TRACE(mechanism);
    torch::manual_seed(5);
    ModelOptions o = tiny_monotonic_options(mechanism);
    o.attention_options.noise_std = 0;  // training mode without noise draws nothing else
    o.p_eos = 0.5;
    auto model = std::make_shared<nn::Seq2Seq>(o);
    model->to(torch::kDouble);
    const std::vector<std::vector<int64_t>> ys = {{4, 5, 6, 7}, {8, 9}, {5, 5, 6}, {7}, {9, 4, 8, 6}, {6, 5}};
    auto [y, yl] = pad_batch(ys);
    auto x = torch::randint(4, 10, {6, 6}, torch::kLong);
    auto xl = torch::tensor({6, 3, 5, 2, 6, 4}, torch::kLong);
    const int64_t B = 6;

    model->eval();
    torch::NoGradGuard no_grad;
    auto [plain, plain_lens] = model->encoder->forward(x, xl);
    at::Tensor appended;
    auto [memory, lens] = model->encode(x, xl, &appended);
    EXPECT_TRUE(appended.all().item<bool>());
    EXPECT_TRUE(torch::equal(lens, plain_lens + 1));
    ASSERT_EQ(memory.size(1), plain.size(1) + 1);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = plain_lens[b].item<int64_t>();
      EXPECT_TRUE(torch::equal(memory[b].narrow(0, 0, n), plain[b].narrow(0, 0, n))) << b;
      EXPECT_TRUE(torch::equal(memory[b][n], torch::ones({plain.size(2)}, torch::kDouble))) << b;
    }

    model->train();
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(77);
    model->decoder->dropout_generator = &gen;
    auto [drawn_memory, drawn_lens] = model->encode(x, xl, &appended);
    const int64_t got = appended.sum().item<int64_t>();
    EXPECT_GT(got, 0);  // seed 77 draws 6 sequences with p = 0.5: some get the frame, some not
    EXPECT_LT(got, B);
    EXPECT_TRUE(torch::equal(drawn_lens, plain_lens + appended.to(torch::kLong)));
    // The hand-made cross entropy over that memory, </s> counted only where appended.
    const nn::Memory m = model->decoder->attention->prepare(drawn_memory, drawn_lens);
    const int64_t U = y.size(1) + 1;
    at::Tensor y_in = torch::full({B, U}, data::kPad, torch::kLong);
    std::vector<std::vector<int64_t>> y_out(B);
    for (int64_t b = 0; b < B; ++b) {
      y_in[b][0] = data::kBos;
      for (size_t i = 0; i < ys[b].size(); ++i) y_in[b][static_cast<int64_t>(i) + 1] = ys[b][i];
      y_out[b] = ys[b];
      y_out[b].push_back(data::kEos);
    }
    const at::Tensor log_probs = torch::log_softmax(model->decoder->forward(y_in, m).first, -1);
    double sum = 0;
    int64_t positions = 0;
    for (int64_t b = 0; b < B; ++b) {
      for (size_t i = 0; i < y_out[b].size(); ++i, ++positions) {
        const bool eos = i + 1 == y_out[b].size();
        if (eos && !appended[b].item<bool>()) continue;
        sum -= log_probs[b][static_cast<int64_t>(i)][y_out[b][i]].item<double>();
      }
    }
    gen.set_current_seed(77);  // the loss draws the same sequences
    int64_t tokens = 0;
    const double loss = model->loss(x, xl, y, yl, {}, nullptr, &tokens).item<double>();
    EXPECT_EQ(tokens, positions);  // </s> still counts in the total
    EXPECT_NEAR(loss, sum / static_cast<double>(positions), 1e-12 * sum);
    model->decoder->dropout_generator = nullptr;
  }
  ModelOptions bad = tiny_monotonic_options("mocha");
  bad.p_eos = 1.5;
  mona::test::expect_error([&] { bad.validate(); }, "p_eos must lie in [0, 1], got 1.5");
}

TEST(Seq2Seq, LookaheadOptionErrorsNameTheValue) {
  ModelOptions o = tiny_monotonic_options("mocha");
  o.lookahead = -1;
  mona::test::expect_error([&] { o.validate(); }, "lookahead must be >= 0, got -1");
  o.lookahead = 2;
  o.bidirectional = true;
  mona::test::expect_error([&] { o.validate(); }, "lookahead must be 0 with a bidirectional encoder");
}


// The loss against the same quantities assembled by hand: teacher-forced log-probabilities
// and the localised + uniform label-smoothed targets of 002 D.1.2 / 000 A.1.
TEST(Seq2Seq, LossMatchesHandBuiltSmoothedTargets) {
  torch::manual_seed(5);
  auto model = std::make_shared<nn::Seq2Seq>(tiny_monotonic_options("mocha"));
  model->to(torch::kDouble);
  model->eval();
  const std::vector<std::vector<int64_t>> ys = {{4, 5, 6, 7}, {8, 9}};
  auto x = torch::randint(4, 10, {2, 5}, torch::kLong);
  auto xl = torch::tensor({5, 3}, torch::kLong);
  auto [y, yl] = pad_batch(ys);
  nn::SmoothingOptions sm;
  sm.uniform = 0.1;
  sm.localized = {0.015, 0.035, 0.035, 0.015};
  int64_t tokens = 0;
  const double loss = model->loss(x, xl, y, yl, sm, nullptr, &tokens).item<double>();
  // by hand
  torch::NoGradGuard ng;
  auto [mem, ml] = model->encoder->forward(x, xl);
  auto m = model->decoder->attention->prepare(mem, ml);
  const int64_t U = 5, V = 10;
  auto y_in = torch::zeros({2, U}, torch::kLong);  // <s> y_1 .. y_L, then padding
  for (int64_t b = 0; b < 2; ++b) {
    y_in[b][0] = 1;
    for (size_t t = 0; t < ys[b].size(); ++t) y_in[b][static_cast<int64_t>(t) + 1] = ys[b][t];
  }
  auto lp = torch::log_softmax(model->decoder->forward(y_in, m).first, -1);
  const int64_t offsets[4] = {-2, -1, 1, 2};
  double sum = 0;
  int64_t n = 0;
  for (int64_t b = 0; b < 2; ++b) {
    std::vector<int64_t> z = ys[b];
    z.push_back(2);  // </s>
    const int64_t L = static_cast<int64_t>(z.size());
    for (int64_t t = 0; t < L; ++t) {
      std::vector<double> q(V, 0.0);
      q[z[t]] += 1.0;
      for (int k = 0; k < 4; ++k) {
        const int64_t u = t + offsets[k];
        if (u >= 0 && u < L) q[z[u]] += sm.localized[k];
      }
      double total = 0;
      for (double v : q) total += v;
      for (int64_t v = 0; v < V; ++v) {
        const double qv = (1 - sm.uniform) * q[v] / total + sm.uniform / V;
        sum -= qv * lp[b][t][v].item<double>();
      }
      ++n;
    }
  }
  EXPECT_EQ(tokens, n);
  // float64 model; the same log-probabilities summed in another order and with the targets
  // built differently: rounding ~1e-15 of a loss ~2.3 (measured 4e-16).
  EXPECT_NEAR(loss, sum / n, 1e-10);
}

// -log P_ctc(y | h) by enumerating every path of T' classes (the output ids and the blank,
// id V) and summing the probabilities of those that collapse to y (repeats merged, blanks
// dropped): the definition of Graves et al. 2006, with no lattice. 0 when no path exists.
double ctc_nll_by_paths(const at::Tensor& log_probs, const std::vector<int64_t>& y) {  // [T', V + 1]
  const int64_t T = log_probs.size(0), C = log_probs.size(1), blank = C - 1;
  double total = 0;
  std::vector<int64_t> path(static_cast<size_t>(T), 0);
  for (int64_t code = 0, n = static_cast<int64_t>(std::pow(C, T)); code < n; ++code) {
    int64_t rest = code;
    double log_p = 0;
    for (int64_t t = 0; t < T; ++t, rest /= C) {
      path[t] = rest % C;
      log_p += log_probs[t][path[t]].item<double>();
    }
    std::vector<int64_t> collapsed;
    for (int64_t t = 0; t < T; ++t) {
      if (path[t] != blank && (t == 0 || path[t] != path[t - 1])) collapsed.push_back(path[t]);
    }
    if (collapsed == y) total += std::exp(log_p);
  }
  return total > 0 ? -std::log(total) : 0.0;
}

// The auxiliary CTC loss (ModelOptions::ctc_weight, 003 sec. 4.3): its term is the sum
// over sequences of -log P_ctc by path enumeration over the encoder's memory, per target
// token; a sequence with no path (the third: 3 targets, 2 entries) adds 0; the loss mixes
// the terms with lambda, and the cross-entropy term is the loss of the same model without
// a head. Float64: the path sums and the lattice agree to rounding (~1e-15 of ~10).
TEST(Seq2Seq, CtcTermIsTheSumOverAlignmentPathsMixedWithTheCrossEntropy) {
  ModelOptions o = tiny_monotonic_options("soft");
  o.ctc_weight = 0.25;
  torch::manual_seed(8);
  auto model = std::make_shared<nn::Seq2Seq>(o);
  model->to(torch::kDouble);
  model->eval();
  ASSERT_TRUE(model->ctc_output);
  EXPECT_EQ(model->ctc_output->options.out_features(), o.output_vocab + 1);
  const std::vector<std::vector<int64_t>> ys = {{4, 5}, {6, 6}, {7, 8, 9}};
  auto [y, yl] = pad_batch(ys);
  const auto x = torch::randint(4, 10, {3, 3}, torch::kLong);
  const auto xl = torch::tensor({3, 2, 1}, torch::kLong);  // memory 4, 3, 2 entries (</s> appended)
  nn::LossTerms terms;
  int64_t tokens = 0;
  const at::Tensor loss = model->loss(x, xl, y, yl, {}, nullptr, &tokens, nullptr, nullptr, &terms);
  ASSERT_TRUE(terms.ctc.defined());
  EXPECT_EQ(tokens, 3 + 3 + 4);
  double by_paths = 0;
  {
    torch::NoGradGuard no_grad;
    auto [memory, memory_lengths] = model->encoder->forward(x, xl);
    const at::Tensor log_probs = torch::log_softmax(model->ctc_output->forward(memory), -1);
    for (int64_t b = 0; b < 3; ++b) {
      const double nll = ctc_nll_by_paths(log_probs[b].narrow(0, 0, memory_lengths[b].item<int64_t>()), ys[b]);
      if (b == 2) EXPECT_EQ(nll, 0.0) << "no path of 2 entries spells 3 tokens";
      else EXPECT_GT(nll, 0.0);
      by_paths += nll;
    }
  }
  EXPECT_NEAR(terms.ctc.item<double>(), by_paths / tokens, 1e-12);
  EXPECT_NEAR(loss.item<double>(), 0.75 * terms.cross_entropy.item<double>() + 0.25 * terms.ctc.item<double>(), 1e-14);
  // The same encoder and decoder without the head: the loss is the cross-entropy term.
  ModelOptions without = o;
  without.ctc_weight = 0;
  auto plain = std::make_shared<nn::Seq2Seq>(without);
  plain->to(torch::kDouble);
  plain->eval();
  EXPECT_FALSE(plain->ctc_output);
  {
    torch::NoGradGuard no_grad;
    const auto ours = model->named_parameters();
    for (auto& p : plain->named_parameters()) p.value().copy_(ours[p.key()]);
  }
  EXPECT_NEAR(plain->loss(x, xl, y, yl, {}).item<double>(), terms.cross_entropy.item<double>(), 1e-14);
  // Gradients reach the head and stay finite with the pathless sequence in the batch.
  loss.backward();
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
  }
  EXPECT_GT(model->ctc_output->weight.grad().abs().max().item<double>(), 0.0);
}

TEST(Seq2Seq, LossErrors) {
  auto model = std::make_shared<nn::Seq2Seq>(tiny_monotonic_options("soft"));
  auto x = torch::randint(4, 10, {2, 5}, torch::kLong);
  auto xl = torch::tensor({5, 4}, torch::kLong);
  auto y = torch::randint(4, 10, {2, 3}, torch::kLong);
  expect_error([&] { model->loss(x, xl, y, torch::tensor({3, 4}, torch::kLong), {}); },
                     "target_lengths[1] must lie in [0, 3], got 4");
  expect_error([&] { model->loss(x, torch::tensor({5, 6}, torch::kLong), y, torch::tensor({3, 2}, torch::kLong), {}); },
                     "lengths[1] must lie in [0, 5], got 6");
  nn::SmoothingOptions bad;
  bad.localized = {0.1};
  expect_error([&] { model->loss(x, xl, y, torch::tensor({3, 2}, torch::kLong), bad); },
                     "SmoothingOptions: localized: expected 4 weights (offsets -2, -1, +1, +2) or none, got 1");
  bad.localized = {0.1, 0.2, std::nan(""), 0.1};
  expect_error([&] { model->loss(x, xl, y, torch::tensor({3, 2}, torch::kLong), bad); },
                     "SmoothingOptions: localized[2]: expected a finite weight >= 0, got nan");
  bad.localized.clear();
  bad.uniform = -0.1;
  expect_error([&] { model->loss(x, xl, y, torch::tensor({3, 2}, torch::kLong), bad); },
                     "SmoothingOptions: uniform: expected a value in [0, 1), got -0.1");
  ModelOptions o = tiny_monotonic_options("soft");
  o.ctc_weight = 1.0;
  expect_error([&] { nn::Seq2Seq m(o); }, "ctc_weight must lie in [0, 1), got 1");
  o.ctc_weight = 0;
  o.attention = "luong";
  expect_error([&] { nn::Seq2Seq m(o); }, "attention must be one of soft, monotonic, mocha, matcha, gmm, sagmm, sagmm-tr, sagmm-fixed; got \"luong\"");
  auto x_bad = x.clone();
  x_bad[0][0] = 12;
  expect_error([&] { model->loss(x_bad, xl, y, torch::tensor({3, 2}, torch::kLong), {}); },
                     "Encoder::forward: inputs[0, 0] = 12: expected <unk> (3) or a symbol id in [4, 10)");
  x_bad = x.clone();
  x_bad[1][3] = -1;
  expect_error([&] { model->loss(x_bad, xl, y, torch::tensor({3, 2}, torch::kLong), {}); },
                     "Encoder::forward: inputs[1, 3] = -1: expected <unk> (3) or a symbol id in [4, 10)");
  // The markers the model places itself are refused inside an input (an </s> there would end
  // it early) and accepted in its padding, where the batch holds <pad>.
  x_bad = x.clone();
  x_bad[1][2] = data::kEos;
  expect_error([&] { model->loss(x_bad, xl, y, torch::tensor({3, 2}, torch::kLong), {}); },
                     "Encoder::forward: inputs[1, 2] = 2 (</s>): expected <unk> (3) or a symbol id in [4, 10)");
  x_bad[1][2] = data::kUnk;
  x_bad[1][4] = data::kPad;  // xl[1] = 4: padding
  EXPECT_TRUE(std::isfinite(model->loss(x_bad, xl, y, torch::tensor({3, 2}, torch::kLong), {}).item<double>()));
  // Targets outside the output vocabulary used to reach the embedding and fail in LibTorch.
  auto y_bad = y.clone();
  y_bad[1][2] = model->options().output_vocab;
  expect_error([&] { model->loss(x, xl, y_bad, torch::tensor({3, 2}, torch::kLong), {}); },
                     "Seq2Seq::loss: targets[1, 2] = " + std::to_string(model->options().output_vocab) +
                     ": expected <unk> (3) or a symbol id in [4, " + std::to_string(model->options().output_vocab) + ")");
  y_bad = y.clone();
  y_bad[0][1] = data::kBos;
  expect_error([&] { model->loss(x, xl, y_bad, torch::tensor({3, 2}, torch::kLong), {}); },
                     "Seq2Seq::loss: targets[0, 1] = 1 (<s>): expected <unk> (3) or a symbol id in [4, ");
  y_bad[0][1] = data::kUnk;
  y_bad[1][2] = data::kPad;  // target_lengths[1] = 2: padding
  EXPECT_TRUE(std::isfinite(model->loss(x, xl, y_bad, torch::tensor({3, 2}, torch::kLong), {}).item<double>()));
  expect_error([&] { model->loss(torch::Tensor(), xl, y, torch::tensor({3, 2}, torch::kLong), {}); },
                     "Seq2Seq::loss: inputs: expected a tensor, got an undefined one");
}

TEST(Seq2Seq, EncoderNamesTheBadSymbolOrFrameDtype) {
  // Symbols: the first id outside [0, V) or marker (streamed ids are all input) and where it
  // is, offline and streaming.
  ModelOptions o = tiny_monotonic_options("mocha");
  nn::Encoder symbols(o);
  symbols.eval();
  torch::NoGradGuard ng;
  nn::EncoderStream st;
  expect_error([&] { symbols.stream(st, torch::tensor({4L, 5L, 99L, 200L}), false); },
               "Encoder::stream: inputs[2] = 99: expected <unk> (3) or a symbol id in [4, 10)");
  expect_error([&] { symbols.stream(st, torch::tensor({4L, 0L}), false); },
               "Encoder::stream: inputs[1] = 0 (<pad>): expected <unk> (3) or a symbol id in [4, 10)");
  // Frames of another dtype than the model's used to fail inside conv2d with LibTorch's error.
  o.input_kind = "features";
  o.feature_dim = 4;
  nn::Encoder frames(o);
  frames.eval();
  expect_error([&] { frames.forward(torch::zeros({1, 6, 4}, torch::kDouble), torch::tensor({6L})); },
               "Encoder::forward: inputs: expected features of dtype Float (the model's), got Double");
  nn::EncoderStream fs;
  expect_error([&] { frames.stream(fs, torch::zeros({6, 4}, torch::kDouble), false); },
               "Encoder::stream: inputs: expected frames of dtype Float (the model's), got Double");
}

}  // namespace
}  // namespace mona::test
