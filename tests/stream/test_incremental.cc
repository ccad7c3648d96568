// stream::recognize_incrementally (stream/incremental.h): the result is Recognizer::recognize's,
// the observer sees every element, and the read counts are the ones derived here another
// way: from the partial results of a hand-written element-by-element loop, and, for greedy
// hard attention, from where the attention chose to emit (g(i) = t_i + 1, io/metrics.h).
#include "mona/stream/incremental.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "mona/core/error.h"
#include "mona/nn/search.h"
#include "mona/nn/seq2seq.h"
#include "util/tiny_task.h"

namespace mona::test {
namespace {

using nn::ModelOptions;

// An untrained model of the tiny task's shape whose hard attention chooses often (r = 1
// by default), so that tokens appear all along the input.
std::shared_ptr<nn::Seq2Seq> untrained(const std::string& mechanism, const std::string& kind,
                                       double init_r = 1.0, const std::string& energy = "additive") {
  torch::manual_seed(3);
  ModelOptions o = tiny_model_options(mechanism);
  o.attention_options.chunk_size = 2;
  o.attention_options.init_r = init_r;
  o.attention_options.monotonic_energy = energy;
  o.input_kind = kind;
  o.feature_dim = 5;
  o.conv_channels = 3;
  return std::make_shared<nn::Seq2Seq>(o);
}

at::Tensor random_input(const std::string& kind, int64_t n) {
  return kind == "symbols" ? torch::randint(4, 10, {n}, torch::kLong) : torch::randn({n, 5});
}

// The read counts by their definition (IncrementalResult::inputs_read), from the lengths of
// the partial results: lengths[k - 1] after k elements (k = 1..n), `final_length` after the
// end. g(i) is the least k such that every length from the k-th on exceeds i; n when only
// the final result holds token i.
std::vector<int64_t> reads_from_lengths(const std::vector<size_t>& lengths, size_t final_length) {
  const auto n = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> g;
  for (size_t i = 0; i < final_length; ++i) {
    int64_t k = n;  // ends as the last k whose partial result lacks token i (0: none)
    while (k > 0 && lengths[static_cast<size_t>(k - 1)] > i) --k;
    g.push_back(std::min(k + 1, n));  // k = n: only the final result holds it
  }
  return g;
}

// Soft, monotonic, MoChA, MAtChA and SAGMM-tr attention, both input kinds, greedy and beam
// search: the tokens, positions and score of Recognizer::recognize; read counts
// non-decreasing in [1, n] and equal to those derived from a hand-written loop; the
// observer called after each element and once at the end.
TEST(RecognizeIncrementally, EqualsRecognizeAndTheReadCountsOfAHandWrittenLoop) {
  int64_t tokens = 0, early = 0;
  for (const std::string mech : {"soft", "monotonic", "mocha", "matcha", "sagmm-tr"}) {
    for (const std::string kind : {"symbols", "features"}) {
      auto model = untrained(mech, kind);
      for (int64_t beam : {0, 3}) {
        nn::SearchOptions so;
        so.beam = beam;
        const stream::Recognizer rec(model, so);
        for (int64_t n : {1, 4, 9}) {
          const at::Tensor x = random_input(kind, n);
          const std::string what = mech + " " + kind + " beam " + std::to_string(beam) + " n " + std::to_string(n);
          std::vector<int64_t> seen_reads;
          std::vector<bool> seen_finished;
          stream::StreamResult seen_last;
          const auto r = stream::recognize_incrementally(
              rec, x, [&](int64_t read, bool finished, const stream::StreamResult& so_far) {
                seen_reads.push_back(read);
                seen_finished.push_back(finished);
                seen_last = so_far;
              });

          const auto offline = rec.recognize(x);
          EXPECT_EQ(r.result.tokens, offline.tokens) << what;
          EXPECT_EQ(r.result.memory_positions, offline.memory_positions) << what;
          EXPECT_EQ(r.result.input_positions, offline.input_positions) << what;
          // Bit for bit: the same operations whatever the split of the input (stream.h).
          EXPECT_EQ(r.result.score, offline.score) << what;
          EXPECT_TRUE(r.result.final) << what;

          ASSERT_EQ(r.inputs_read.size(), r.result.tokens.size()) << what;
          for (size_t i = 0; i < r.inputs_read.size(); ++i) {
            EXPECT_GE(r.inputs_read[i], 1) << what << " token " << i;
            EXPECT_LE(r.inputs_read[i], n) << what << " token " << i;
            if (i > 0) {
              EXPECT_LE(r.inputs_read[i - 1], r.inputs_read[i]) << what << " token " << i;
            }
          }

          // The loop of stream.h's header comment, one element per accept().
          auto s = rec.create_stream();
          std::vector<size_t> lengths;
          for (int64_t k = 0; k < n; ++k) {
            rec.accept(*s, x.narrow(0, k, 1));
            while (rec.is_ready(*s)) rec.decode(*s);
            lengths.push_back(rec.result(*s).tokens.size());
          }
          rec.input_finished(*s);
          while (rec.is_ready(*s)) rec.decode(*s);
          EXPECT_EQ(r.inputs_read, reads_from_lengths(lengths, rec.result(*s).tokens.size())) << what;

          std::vector<int64_t> expected_reads;
          for (int64_t k = 1; k <= n; ++k) expected_reads.push_back(k);
          expected_reads.push_back(n);
          EXPECT_EQ(seen_reads, expected_reads) << what;
          std::vector<bool> expected_finished(static_cast<size_t>(n), false);
          expected_finished.push_back(true);
          EXPECT_EQ(seen_finished, expected_finished) << what;
          EXPECT_EQ(seen_last.tokens, r.result.tokens) << what;

          tokens += static_cast<int64_t>(r.inputs_read.size());
          for (int64_t g : r.inputs_read) early += g < n;
          if (mech == "soft") {  // soft attention emits only after the end of the input
            for (int64_t g : r.inputs_read) EXPECT_EQ(g, n) << what;
          }
        }
      }
    }
  }
  // The comparisons must cover tokens emitted before the end of the input, or the read
  // counts would all be n and prove little.
  std::printf("[   info   ] %lld tokens, %lld before the end of their input\n", static_cast<long long>(tokens),
              static_cast<long long>(early));
  EXPECT_GT(tokens, 0);
  EXPECT_GT(early, tokens / 10) << early << " of " << tokens << " tokens before the end";
}

// For greedy hard attention with a causal symbol encoder (no lookahead), token i appears
// exactly when the memory entry t_i its attention chose has arrived: g(i) = t_i + 1, and n
// for the appended </s> or an attention that ran past the end (io/metrics.h). A structural
// fact of the runtime, so untrained models show it (r = 0 with the dot-product energy: the
// attention now stays, now moves on), with one exception: the output length guard
// (nn/search.h) holds token i back while i >= floor(length_ratio * entries) + length_bonus,
// and an untrained decoder may emit many tokens at one entry. Tokens up to the first one
// the guard could have held back are compared.
TEST(RecognizeIncrementally, GreedyHardAttentionReadsUpToTheChosenEntry) {
  for (const std::string mech : {"monotonic", "mocha", "matcha"}) {
    const nn::SearchOptions so;
    const stream::Recognizer rec(untrained(mech, "symbols", 0.0, "dot"), so);
    int64_t compared = 0, early = 0, moved = 0;
    for (int64_t n : {1, 2, 5, 8, 13}) {
      for (int rep = 0; rep < 4; ++rep) {
        const at::Tensor x = random_input("symbols", n);
        const auto r = stream::recognize_incrementally(rec, x);
        ASSERT_EQ(r.inputs_read.size(), r.result.tokens.size());
        for (size_t i = 0; i < r.inputs_read.size(); ++i) {
          const int64_t t = r.result.memory_positions[i];
          const bool streamed = t >= 0 && t < n;  // else: emitted after the end of the input
          const auto guard = static_cast<int64_t>(std::floor(so.length_ratio * static_cast<double>(t + 1))) +
                             so.length_bonus;
          if (streamed && static_cast<int64_t>(i) >= guard) break;  // held back, and all after it
          const int64_t expected = streamed ? t + 1 : n;
          EXPECT_EQ(r.inputs_read[i], expected) << mech << " n " << n << " token " << i << " entry " << t;
          ++compared;
          early += r.inputs_read[i] < n;
          moved += streamed && t > 0;
        }
      }
    }
    std::printf("[   info   ] %s: %lld tokens compared, %lld before the end of their input, %lld past entry 0\n",
                mech.c_str(), static_cast<long long>(compared), static_cast<long long>(early),
                static_cast<long long>(moved));
    // Measured: 414-432 compared, 98-122 before the end, 82-84 past entry 0.
    EXPECT_GT(early, compared / 10) << mech << ": the comparison must cover tokens emitted while streaming";
    EXPECT_GT(moved, compared / 20) << mech << ": and tokens at entries past the first";
  }
}

TEST(RecognizeIncrementally, RefusesAnUndefinedOr0dInput) {
  const stream::Recognizer rec(untrained("monotonic", "symbols"), nn::SearchOptions{});
  EXPECT_THROW(stream::recognize_incrementally(rec, at::Tensor()), mona::ArgumentError);
  EXPECT_THROW(stream::recognize_incrementally(rec, torch::tensor(int64_t{4})), mona::ArgumentError);
}

}  // namespace
}  // namespace mona::test
