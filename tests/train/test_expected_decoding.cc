// label: train
// train::decode_with_expected_alignment (train/trainer.h) on models of the tiny task
// (util/tiny_task.h): the hypothesis it returns is scored by the model exactly as the
// teacher-forced training computation (Seq2Seq::loss) scores that output, the decodings
// are right for a trained model, and ids outside the vocabulary are refused.
#include "mona/train/trainer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <random>
#include <string>

#include "mona/core/error.h"
#include "util/tiny_task.h"

namespace mona::test {
namespace {

// The tiny task as a TrainedModel: symbols a..f are ids 4..9 on both sides (the task's ids),
// the model trained by train_tiny for `steps` steps.
train::TrainedModel tiny_trained_model(const std::string& mechanism, int steps) {
  train::TrainedModel t;
  for (const char* s : {"a", "b", "c", "d", "e", "f"}) {
    t.input_vocab.add(s);
    t.output_vocab.add(s);
  }
  nn::ModelOptions o = tiny_model_options(mechanism);
  o.attention_options.chunk_size = 2;
  o.attention_options.init_r = -1.0;
  o.attention_options.monotonic_energy = "dot";
  t.config.model = o;
  t.model = train_tiny(o, {steps, 1});
  return t;
}

// The score of the decoded hypothesis is sum_i log p(y_i | y_<i, x) + log p(</s> | y, x)
// computed step by step with the expected alignment; Seq2Seq::loss computes the same
// log-probabilities with teacher forcing, all steps at once (Decoder::forward; the
// attention's forward() is its step() unrolled, attention.h), and returns their negated
// mean over the U + 1 targets. The encoder call is the same; what differs is the shape of
// the decoder's matrix products ([1, U+1, .] against [1, .]), i.e. float32 rounding: each
// log-probability is a logit minus a log-sum-exp, both of magnitude below about 10, so off
// by a few ulps of 10 (1e-6), and U + 1 <= 8 of them are summed: well under 1e-5 (measured:
// at most 3e-8 after 150 steps, 2e-7 after 60). A wrong alignment, a skipped or extra step
// or a different decoder state changes a score of this size (up to about 2) by far more.
// The model is trained briefly (150 steps) so that decodings end with </s>; an untrained
// one runs into the length guard.
TEST(DecodeWithExpectedAlignment, ScoresItsOutputAsTheTeacherForcedLoss) {
  for (const std::string mech : {"soft", "monotonic", "mocha"}) {
    const auto t = tiny_trained_model(mech, 150);
    std::mt19937_64 gen(17);
    int correct = 0, compared = 0;
    const int n = 20;
    for (int k = 0; k < n; ++k) {
      const auto ids = tiny_task_input(gen, true);
      const nn::Hypothesis h = train::decode_with_expected_alignment(t, ids, nn::SearchOptions{});
      correct += h.tokens == tiny_task_output(ids);
      ASSERT_EQ(h.positions.size(), h.tokens.size());
      if (!h.ended_by_eos) continue;  // ended by the length guard: no </s> term to compare
      const auto T = static_cast<int64_t>(ids.size()), U = static_cast<int64_t>(h.tokens.size());
      torch::NoGradGuard no_grad;
      const at::Tensor loss =
          t.model->loss(torch::tensor(ids, torch::kLong).unsqueeze(0), torch::full({1}, T, torch::kLong),
                        torch::tensor(h.tokens, torch::kLong).view({1, U}), torch::full({1}, U, torch::kLong), {});
      EXPECT_NEAR(-h.score, loss.item<double>() * static_cast<double>(U + 1), 1e-5) << mech << " input " << k;
      ++compared;
    }
    EXPECT_GE(compared, n / 2) << mech;  // measured: all 20
    // The decodings are the task's outputs (measured: 18-20 of 20 after 150 steps; none
    // untrained): a training outcome, so the bound is loose.
    EXPECT_GE(correct, n / 2) << mech;
  }
}

TEST(DecodeWithExpectedAlignment, RefusesIdsOutsideTheInputVocabulary) {
  const auto t = tiny_trained_model("monotonic", 0);
  for (int64_t bad : {int64_t{-1}, t.input_vocab.size()}) {
    try {
      train::decode_with_expected_alignment(t, {4, bad, 5}, nn::SearchOptions{});
      ADD_FAILURE() << "accepted id " << bad;
    } catch (const mona::ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("input_ids[1]"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mona::test
