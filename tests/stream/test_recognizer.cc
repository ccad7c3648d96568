// The streaming runtime (stream/stream.h) on models of the tiny task (util/tiny_task.h):
// what trained models recognise, and that streaming equals offline decoding bit for bit
// for every mechanism, input kind, split of the input and search.
#include "mona/stream/stream.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>

#include "mona/data/tokens.h"
#include "mona/nn/search.h"
#include "mona/nn/seq2seq.h"
#include "util/test_util.h"
#include "util/tiny_task.h"

namespace mona::test {
namespace {

using nn::ModelOptions;

// 500 Adam steps from two initialisations per mechanism. Where a run lands after so few steps
// depends on the initialisation and on the last bits of the kernels' rounding (MoChA from
// seed 1 ended at 13/100 with the vectorised kernel, 0/100 from seed 2), so the test asks
// that every run has clearly learned the task and that the better of the two has
// near-zero sequence error with hard online decoding (untrained: ~100/100). Measured over
// the default, Haswell, Zen, Sandybridge, SkylakeX and Nehalem OpenBLAS kernels, both core
// kernel targets and 1 or 2 threads (64 runs): every run 0-9/100, the better of two 0-5.
// On an Intel Xeon with AVX-512 (2026-11-28, OpenBLAS's SkylakeX kernels) MAtChA ended at
// 10 and 11/100 from the two seeds, the code unchanged, so the better of two may reach 10.
// The thresholds (30, 15) leave room for such runs; a real regression (no learning, or
// decoding broken) gives tens of errors in every run.
TEST(Recognizer, EveryMechanismLearnsATinyMonotonicTask) {
  for (const std::string mech : {"soft", "monotonic", "mocha", "matcha"}) {
    int best = 1 << 30;
    for (uint64_t seed : {1, 2}) {
      const auto t0 = std::chrono::steady_clock::now();
      auto model = train_tiny(tiny_monotonic_options(mech), {500, seed});
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      stream::Recognizer rec(model, nn::SearchOptions{});
      std::mt19937_64 gen(99);
      int errors = 0;
      const int n = 100;
      for (int k = 0; k < n; ++k) {
        auto x = tiny_task_input(gen, true);
        auto r = rec.recognize(torch::tensor(x, torch::kLong));
        errors += r.tokens != tiny_task_output(x);
      }
      std::printf("[   info   ] %s, seed %d: %d/%d sequence errors after %.1f s of training\n",
                  mech.c_str(), static_cast<int>(seed), errors, n, secs);
      EXPECT_LE(errors, 30) << mech << " seed " << seed;
      best = std::min(best, errors);
    }
    EXPECT_LE(best, 15) << mech;
  }
}

// A stream holds state of its model's sizes, so a Recognizer refuses one that a Recognizer of
// another model created, naming the call; two Recognizers of one model share streams.
TEST(Recognizer, RefusesAStreamOfAnotherModel) {
  const auto a = std::make_shared<nn::Seq2Seq>(tiny_monotonic_options("mocha"));
  const auto b = std::make_shared<nn::Seq2Seq>(tiny_monotonic_options("monotonic"));
  const stream::Recognizer ra(a, nn::SearchOptions{}), rb(b, nn::SearchOptions{}), ra2(a, nn::SearchOptions{});
  auto s = ra.create_stream();
  const at::Tensor x = torch::tensor({3, 4}, torch::kLong);
  const std::string why = ": stream: created by a Recognizer of another model";
  expect_error([&] { rb.accept(*s, x); }, "Recognizer::accept" + why);
  expect_error([&] { rb.is_ready(*s); }, "Recognizer::is_ready" + why);
  expect_error([&] { rb.decode(*s); }, "Recognizer::decode" + why);
  expect_error([&] { rb.decode_streams({s.get()}); }, "Recognizer::decode_streams" + why);
  expect_error([&] { rb.input_finished(*s); }, "Recognizer::input_finished" + why);
  expect_error([&] { rb.result(*s); }, "Recognizer::result" + why);
  expect_error([&] { rb.reset(*s); }, "Recognizer::reset" + why);
  EXPECT_EQ(s->inputs_received(), 0) << "a refused call changed the stream";
  ra2.accept(*s, x);
  ra2.input_finished(*s);
  while (ra.is_ready(*s)) ra.decode(*s);
  EXPECT_EQ(ra.result(*s).tokens, ra.recognize(x).tokens);
}

TEST(Recognizer, StreamingEqualsOfflineAndBeamOneEqualsGreedy) {
  auto model = train_tiny(tiny_monotonic_options("mocha"), {400, 1});
  std::mt19937_64 gen(7);
  for (int64_t beam : {0, 1, 3}) {
    nn::SearchOptions so;
    so.beam = beam;
    stream::Recognizer rec(model, so);
    for (int k = 0; k < 20; ++k) {
      auto x = tiny_task_input(gen, true);
      auto offline = rec.recognize(torch::tensor(x, torch::kLong));
      auto s = rec.create_stream();
      std::vector<size_t> tokens_seen;
      for (int64_t v : x) {
        rec.accept(*s, torch::tensor({v}, torch::kLong));
        while (rec.is_ready(*s)) rec.decode(*s);
        tokens_seen.push_back(rec.result(*s).tokens.size());
      }
      rec.input_finished(*s);
      while (rec.is_ready(*s)) rec.decode(*s);
      auto online = rec.result(*s);
      EXPECT_TRUE(online.final);
      EXPECT_EQ(online.tokens, offline.tokens) << "beam " << beam;
      EXPECT_EQ(online.memory_positions, offline.memory_positions) << "beam " << beam;
      // Bit for bit: both are the same operations in the same order (stream/stream.h), on
      // any CPU and BLAS kernel family (make test-other-kernels forces a second one).
      EXPECT_EQ(online.score, offline.score) << "beam " << beam;
      if (beam == 0) {  // greedy streams: tokens appear before the input is finished
        EXPECT_GT(tokens_seen.back(), 0u) << "nothing emitted before the end of input";
      }
      if (beam == 1) {
        nn::SearchOptions greedy;
        stream::Recognizer g(model, greedy);
        auto gr = g.recognize(torch::tensor(x, torch::kLong));
        EXPECT_EQ(gr.tokens, offline.tokens);
        EXPECT_EQ(gr.memory_positions, offline.memory_positions);
      }
    }
  }
}

// The claim of stream/stream.h, for every mechanism and input kind, any split of the input,
// greedy and beam search: tokens, positions and score bit for bit. Odd sizes on purpose, so
// that a memory row starts at varying alignments and matrix products get odd shapes (a BLAS
// kernel whose rounding depended on either would show here, under make test's second
// OpenBLAS kernel family too). With these sizes the code before the fix of issue 17, which
// computed the keys of all entries of one accept() call in one matrix product, fails here
// on the default kernels already. Untrained models with init_r = 1 emit plenty of tokens.
TEST(Recognizer, StreamingEqualsOfflineBitForBitForAnySplitWithOddSizes) {
  int64_t compared = 0, tokens = 0;
  for (const std::string mech : {"soft", "monotonic", "mocha", "matcha", "sagmm-tr", "gmm"}) {
    for (const std::string kind : {"symbols", "features"}) {
      for (int64_t lookahead : {0, 1}) {
        torch::manual_seed(11);
        ModelOptions o = tiny_monotonic_options(mech);
        o.embedding_dim = 7;
        o.encoder_layers = 2;
        o.encoder_hidden = 37;
        o.decoder_embedding_dim = 5;
        o.decoder_hidden = 21;
        o.attention_options.attention_dim = 19;
        o.attention_options.chunk_size = 3;
        o.attention_options.init_r = 1.0;
        o.input_kind = kind;
        o.feature_dim = 5;
        o.conv_channels = 3;
        o.lookahead = lookahead;
        auto model = std::make_shared<nn::Seq2Seq>(o);
        for (int64_t beam : {0, 3}) {
          nn::SearchOptions so;
          so.beam = beam;
          stream::Recognizer rec(model, so);
          for (int64_t T : {5, 8, 11, 14}) {
            const torch::Tensor x = kind == "symbols" ? torch::randint(4, 10, {T}, torch::kLong)
                                                      : torch::randn({T, 5});
            const auto offline = rec.recognize(x);
            for (int64_t chunk : {1, 2, 5}) {
              auto s = rec.create_stream();
              for (int64_t t = 0; t < T; t += chunk) {
                rec.accept(*s, x.narrow(0, t, std::min(chunk, T - t)));
                while (rec.is_ready(*s)) rec.decode(*s);
              }
              rec.input_finished(*s);
              while (rec.is_ready(*s)) rec.decode(*s);
              const auto online = rec.result(*s);
              const std::string what = mech + " " + kind + " lookahead " + std::to_string(lookahead) +
                                       " beam " + std::to_string(beam) + " T " + std::to_string(T) +
                                       " chunk " + std::to_string(chunk);
              EXPECT_EQ(online.tokens, offline.tokens) << what;
              EXPECT_EQ(online.memory_positions, offline.memory_positions) << what;
              EXPECT_EQ(online.score, offline.score) << what;
              ++compared;
              tokens += static_cast<int64_t>(offline.tokens.size());
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 6 * 2 * 2 * 2 * 4 * 3);
  EXPECT_GT(tokens, 2 * compared) << "the comparison must cover emitted tokens";
}

// A model trained with 003's EOS frame (ModelOptions::p_eos) gets the frame appended once
// its input is finished: exactly one memory entry more than the same weights without it,
// and streaming still equals offline decoding bit for bit, greedy and beam, for the
// monotonic and the GMM family.
TEST(Recognizer, EosFrameIsAppendedWhenTheInputFinishes) {
  for (const std::string mech : {"mocha", "sagmm-tr"}) {
    SCOPED_TRACE(mech);
    torch::manual_seed(3);
    ModelOptions o = tiny_monotonic_options(mech);
    o.attention_options.init_r = 1.0;  // untrained, but emitting
    auto without = std::make_shared<nn::Seq2Seq>(o);
    o.p_eos = 1.0;
    auto with = std::make_shared<nn::Seq2Seq>(o);
    {
      torch::NoGradGuard no_grad;
      const auto from = without->parameters();
      const auto to = with->parameters();
      for (size_t k = 0; k < from.size(); ++k) to[k].copy_(from[k]);
    }
    without->eval();
    with->eval();
    std::mt19937_64 gen(5);
    for (int64_t beam : {0, 3}) {
      nn::SearchOptions so;
      so.beam = beam;
      stream::Recognizer plain(without, so), framed(with, so);
      for (int k = 0; k < 5; ++k) {
        const auto x = tiny_task_input(gen, true);
        auto a = plain.create_stream(), b = framed.create_stream();
        for (int64_t v : x) {
          plain.accept(*a, torch::tensor({v}, torch::kLong));
          framed.accept(*b, torch::tensor({v}, torch::kLong));
          while (plain.is_ready(*a)) plain.decode(*a);
          while (framed.is_ready(*b)) framed.decode(*b);
        }
        EXPECT_EQ(b->memory_size(), a->memory_size());  // nothing added while input arrives
        plain.input_finished(*a);
        framed.input_finished(*b);
        while (plain.is_ready(*a)) plain.decode(*a);
        while (framed.is_ready(*b)) framed.decode(*b);
        EXPECT_EQ(b->memory_size(), a->memory_size() + 1);
        const auto online = framed.result(*b);
        const auto offline = framed.recognize(torch::tensor(x, torch::kLong));
        EXPECT_TRUE(online.final);
        EXPECT_EQ(online.tokens, offline.tokens) << "beam " << beam;
        EXPECT_EQ(online.memory_positions, offline.memory_positions) << "beam " << beam;
        EXPECT_EQ(online.score, offline.score) << "beam " << beam;
      }
    }
  }
}

// SearchOptions::eos_only_at_last_entry (003's long-form rule): </s> only from a step that
// attended the memory's last entry or scanned past it. An untrained MoChA model whose output layer favours
// </s> ends at its first step without the rule; with it, every hypothesis that ends by
// </s> does so with its attention on the last entry (the EOS frame) or past it, greedy and
// beam. Measured: 40 of 40 searches end early without the rule, 16 end by </s> with it, on
// the default, the second OpenBLAS with baseline core and the x86-64-v3 kernels alike.
TEST(Recognizer, EosOnlyAtLastEntryWaitsForTheAttentionToReachIt) {
  torch::manual_seed(3);
  ModelOptions o = tiny_monotonic_options("mocha");
  o.attention_options.init_r = 0.0;
  o.p_eos = 1.0;
  auto model = std::make_shared<nn::Seq2Seq>(o);
  model->eval();
  torch::NoGradGuard no_grad;
  model->named_parameters()["decoder.output.bias"][data::kEos] += 3.0;
  std::mt19937_64 gen(9);
  int early_without = 0, ended_with = 0;
  for (int k = 0; k < 20; ++k) {
    const auto x = tiny_task_input(gen, true);
    auto [memory, lens] = model->encode(torch::tensor(x, torch::kLong).unsqueeze(0),
                                        torch::full({1}, static_cast<int64_t>(x.size()), torch::kLong));
    nn::OnlineMemory m;
    model->decoder->attention->extend(m, memory[0].narrow(0, 0, lens[0].item<int64_t>()));
    m.finish();
    for (int64_t beam : {0, 3}) {
      for (bool rule : {false, true}) {
        nn::SearchOptions so;
        so.beam = beam;
        so.eos_only_at_last_entry = rule;
        nn::OnlineSearch search(so);
        search.reset(*model->decoder);
        while (search.advance(*model->decoder, m)) {
        }
        const nn::Hypothesis& best = search.best();
        const bool at_last = best.state.attention.exhausted || best.state.attention.t == m.size() - 1;
        if (!rule) early_without += best.ended_by_eos && !at_last;
        if (rule && best.ended_by_eos) {
          ++ended_with;
          EXPECT_TRUE(at_last) << "beam " << beam << ": </s> with the attention on entry "
                               << best.state.attention.t << " of " << m.size();
        }
      }
    }
  }
  std::printf("[   info   ] of 40 searches: %d ended by </s> early without the rule, %d by </s> with it\n",
              early_without, ended_with);
  EXPECT_GT(early_without, 0);  // the rule had something to stop
  EXPECT_GT(ended_with, 0);     // and </s> still ends hypotheses, at the EOS frame
}

TEST(Recognizer, FeatureInputStreamsExactlyAsOffline) {
  for (int64_t lookahead : {0, 2}) {
    torch::manual_seed(4);
    ModelOptions o = tiny_monotonic_options("monotonic");
    o.input_kind = "features";
    o.feature_dim = 6;
    o.conv_channels = 4;
    o.lookahead = lookahead;
    o.attention_options.init_r = 1.0;
    auto model = std::make_shared<nn::Seq2Seq>(o);
    stream::Recognizer rec(model, nn::SearchOptions{});
    for (int k = 0; k < 5; ++k) {
      auto x = torch::randn({17, 6});
      auto offline = rec.recognize(x);
      auto s = rec.create_stream();
      for (int64_t t = 0; t < 17; t += 3) {
        rec.accept(*s, x.narrow(0, t, std::min<int64_t>(3, 17 - t)));
        while (rec.is_ready(*s)) rec.decode(*s);
      }
      rec.input_finished(*s);
      while (rec.is_ready(*s)) rec.decode(*s);
      auto online = rec.result(*s);
      // Exact: the same arithmetic whatever the split of the input (stream/stream.h).
      EXPECT_EQ(online.tokens, offline.tokens);
      EXPECT_EQ(online.input_positions, offline.input_positions) << "lookahead " << lookahead;
      for (int64_t p : online.input_positions) EXPECT_LT(p, 17);
    }
  }
}

TEST(Recognizer, GmmFamilyLearnsTheTinyTask) {
  for (const std::string mech : {"sagmm-tr", "gmm"}) {
    const TrainedTiny& t = trained_gmm_tiny(mech);
    const auto t0 = std::chrono::steady_clock::now();
    stream::Recognizer rec(t.model, nn::SearchOptions{});
    std::mt19937_64 gen(99);
    int errors = 0;
    const int n = 100;
    for (int k = 0; k < n; ++k) {
      auto x = tiny_task_input(gen, false);
      errors += rec.recognize(torch::tensor(x, torch::kLong)).tokens != tiny_task_output(x);
    }
    const double dec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[   info   ] %s: %d/%d sequence errors after %.1f s of training (%.2f s decoding)\n",
                mech.c_str(), errors, n, t.seconds, dec);
    // A training outcome, so it moves with rounding (BLAS kernels, threads); measured 0/100
    // for both mechanisms on every OpenBLAS family and kernel target tried.
    EXPECT_LE(errors, 5) << mech;
  }
}

TEST(Recognizer, GmmFamilyStreamsAsOfflineAndBeamSearchWorks) {
  for (const std::string mech : {"sagmm-tr", "gmm"}) {
    auto model = trained_gmm_tiny(mech).model;
    std::mt19937_64 gen(7);
    for (int64_t beam : {0, 1, 3}) {
      nn::SearchOptions so;
      so.beam = beam;
      stream::Recognizer rec(model, so);
      int early = 0, correct = 0;
      const int n = 15;
      for (int k = 0; k < n; ++k) {
        auto x = tiny_task_input(gen, false);
        auto offline = rec.recognize(torch::tensor(x, torch::kLong));
        auto s = rec.create_stream();
        size_t before_end = 0;
        for (int64_t v : x) {
          rec.accept(*s, torch::tensor({v}, torch::kLong));
          while (rec.is_ready(*s)) rec.decode(*s);
          before_end = rec.result(*s).tokens.size();
        }
        rec.input_finished(*s);
        while (rec.is_ready(*s)) rec.decode(*s);
        auto online = rec.result(*s);
        EXPECT_TRUE(online.final) << mech << " beam " << beam;
        EXPECT_EQ(online.tokens, offline.tokens) << mech << " beam " << beam;
        EXPECT_EQ(online.memory_positions, offline.memory_positions) << mech << " beam " << beam;
        // Bit for bit, as in test_seq2seq.cc: streaming and offline decoding are the same
        // operations in the same order (stream/stream.h; GMM positions are computed one frame
        // at a time), on any CPU and BLAS. A tolerance of 1e-9 on a float32 model's score
        // would hide nothing and only blur that claim.
        EXPECT_EQ(online.score, offline.score) << mech << " beam " << beam;
        early += before_end > 0;
        correct += offline.tokens == tiny_task_output(x);
        if (beam == 1) {  // beam width 1 is greedy
          stream::Recognizer g(model, nn::SearchOptions{});
          auto gr = g.recognize(torch::tensor(x, torch::kLong));
          EXPECT_EQ(gr.tokens, offline.tokens) << mech;
          EXPECT_EQ(gr.memory_positions, offline.memory_positions) << mech;
        }
      }
      EXPECT_GE(correct, n - 2) << mech << " beam " << beam;
      if (mech == "gmm") {
        EXPECT_EQ(early, 0) << "plain GMM cannot emit before the input ends";
      } else if (beam == 0) {
        EXPECT_GT(early, n / 2) << "SAGMM-tr should emit before the end of the input";
      }
    }
  }
}

}  // namespace
}  // namespace mona::test
