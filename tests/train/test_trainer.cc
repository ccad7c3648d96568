// Training runs and checkpoints on the letter task (util/letter_task.h): checkpoint round
// trip, exact resumption, refusal of corrupt checkpoints; what a run refuses before it
// starts (feature models, unreadable dev audio) and what it keeps when a dev evaluation fails.
#include "mona/train/trainer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <streambuf>

#include "mona/audio/audio_file.h"
#include "mona/core/error.h"
#include "mona/io/files.h"
#include "util/letter_task.h"
#include "util/temp_dir.h"

namespace mona::test {
namespace {
namespace fs = std::filesystem;

train::Config tiny_config(const TempDir& dir, int64_t steps) {
  train::Config c;
  c.data.train = dir / "train.tsv";
  c.data.dev = dir / "dev.tsv";
  c.model.embedding_dim = 8;
  c.model.encoder_layers = 1;
  c.model.encoder_hidden = 16;
  c.model.decoder_embedding_dim = 8;
  c.model.decoder_hidden = 16;
  c.model.dropout = 0.1;  // exercises the global generator on resume
  c.model.attention = "mocha";
  c.model.attention_options.chunk_size = 2;
  c.model.attention_options.monotonic_energy = "dot";
  c.model.attention_options.init_r = -1;
  c.train.output_dir = dir / "run";
  c.train.threads = 1;
  c.train.batch_size = 8;
  c.train.max_steps = steps;
  c.train.eval_every = 10;
  c.train.eval_limit = 10;
  c.train.log_every = 5;
  c.train.plot_examples = 1;
  c.train.optimizer.learning_rate = 0.01;
  c.train.smoothing.localized = {0.015, 0.035, 0.035, 0.015};
  return c;
}

// Trainer::run's options that continue the run in train.output_dir (mona train --resume).
train::RunOptions resume_run() {
  train::RunOptions o;
  o.resume = true;
  return o;
}

std::vector<at::Tensor> parameters_of(const train::TrainedModel& t) {
  std::vector<at::Tensor> out;
  for (const auto& p : t.model->parameters()) out.push_back(p.detach().clone());
  for (const auto& b : t.model->buffers()) out.push_back(b.detach().clone());
  return out;
}

TEST(Trainer, ResumedRunEqualsUninterruptedRun) {
  TempDir a, b;
  for (auto* d : {&a, &b}) {
    write_letter_task(*d / "train.tsv", 200, 1);
    write_letter_task(*d / "dev.tsv", 20, 2);
  }
  std::ostringstream sink;
  train::Trainer(tiny_config(a, 30)).run({}, sink);
  // Interrupted at step 22, between two log records (log_every 5) ...
  train::Trainer(tiny_config(b, 22)).run({}, sink);
  train::Trainer(tiny_config(b, 30)).run(resume_run(), sink);   // ... and resumed to 30
  const auto ta = train::TrainedModel::load(a / "run/last.ckpt");
  const auto tb = train::TrainedModel::load(b / "run/last.ckpt");
  EXPECT_EQ(ta.step, 30);
  EXPECT_EQ(tb.step, 30);
  const auto pa = parameters_of(ta), pb = parameters_of(tb);
  ASSERT_EQ(pa.size(), pb.size());
  // Bit for bit: both runs are the same binary on the same machine with one thread
  // (train.threads = 1), the same batches, dropout draws and optimizer state, so steps 23-30
  // are the same operations on the same values. Any difference is a resumption bug, not
  // rounding.
  for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(torch::equal(pa[k], pb[k])) << "tensor " << k;
  // The log too: the resumed run writes the records an uninterrupted one writes (the loss
  // window is in the checkpoint; it used to restart, and the first record after resuming
  // averaged 3 steps instead of 5), and its minutes go on from the checkpoint's instead of
  // restarting at 0.
  // step -> (loss, minutes) of the "train" records
  auto records = [](const std::string& path) {
    std::map<int64_t, std::pair<double, double>> out;
    std::ifstream log(path);
    std::string line;
    while (std::getline(log, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.at("event") == "train") out[j.at("step").get<int64_t>()] = {j.at("loss"), j.at("minutes")};
    }
    return out;
  };
  const auto ra = records(a / "run/train.jsonl"), rb = records(b / "run/train.jsonl");
  ASSERT_EQ(ra.size(), 6u);
  ASSERT_EQ(rb.size(), 6u);
  for (const auto& [step, lm] : ra) {
    ASSERT_EQ(rb.count(step), 1u) << step;
    // Bit for bit, as the parameters are.
    EXPECT_EQ(rb.at(step).first, lm.first) << "loss at step " << step;
  }
  EXPECT_GE(rb.at(25).second, rb.at(20).second) << "the minutes went back at the resumption";
  // The effective configuration, the log and the plots are beside the checkpoints.
  EXPECT_TRUE(fs::exists(b / "run/config.yaml"));
  EXPECT_TRUE(fs::exists(b / "run/train.jsonl"));
  EXPECT_TRUE(fs::exists(b / "run/best.ckpt"));
  EXPECT_FALSE(fs::is_empty(b / "run/plots"));
}

// train.threads = 2 trains two shards of each batch in parallel (TrainingRun::train_step):
// deterministic (a run interrupted and resumed equals one run, bit for bit, with dropout and
// pre-sigmoid noise drawn by both threads), and without noise or dropout the same
// optimisation as one thread but for the order of additions.
TEST(Trainer, TwoThreadRunsAreDeterministicAndResumeExactly) {
  TempDir a, b;
  for (auto* d : {&a, &b}) {
    write_letter_task(*d / "train.tsv", 200, 1);
    write_letter_task(*d / "dev.tsv", 20, 2);
  }
  auto config = [](const TempDir& d, int64_t steps) {
    train::Config c = tiny_config(d, steps);
    c.train.threads = 2;
    c.model.attention_options.noise_std = 1.0;
    return c;
  };
  std::ostringstream sink;
  train::Trainer(config(a, 30)).run({}, sink);
  train::Trainer(config(b, 20)).run({}, sink);
  train::Trainer(config(b, 30)).run(resume_run(), sink);
  const auto pa = parameters_of(train::TrainedModel::load(a / "run/last.ckpt"));
  const auto pb = parameters_of(train::TrainedModel::load(b / "run/last.ckpt"));
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(torch::equal(pa[k], pb[k])) << "tensor " << k;
}

TEST(Trainer, TwoThreadsTakeTheOneThreadStep) {
  TempDir one, two;
  for (auto* d : {&one, &two}) {
    write_letter_task(*d / "train.tsv", 200, 1);
    write_letter_task(*d / "dev.tsv", 20, 2);
  }
  auto config = [](const TempDir& d, int64_t threads) {
    train::Config c = tiny_config(d, 3);
    c.model.dropout = 0;
    c.model.attention_options.noise_std = 0;
    c.train.threads = threads;
    return c;
  };
  std::ostringstream sink;
  train::Trainer(config(one, 1)).run({}, sink);
  train::Trainer(config(two, 2)).run({}, sink);
  const auto p1 = parameters_of(train::TrainedModel::load(one / "run/last.ckpt"));
  const auto p2 = parameters_of(train::TrainedModel::load(two / "run/last.ckpt"));
  ASSERT_EQ(p1.size(), p2.size());
  // Three Adam steps at learning rate 0.01 from the same start: a parameter moves by about
  // 0.01 per step whatever its gradient's size (Adam divides by the gradient's scale), so
  // float32 gradients that differ in their last bits move it to within ~1e-7 of the other
  // run's value (measured: 1.25e-7 at most). 1e-5 leaves 80x room; a shard left out or
  // counted twice moves parameters by ~1e-2.
  for (size_t k = 0; k < p1.size(); ++k) {
    EXPECT_LE((p1[k] - p2[k]).abs().max().item<double>(), 1e-5) << "tensor " << k;
  }
}

// shard_batch against brute force: every assignment of up to 9 rows to the shards (empty
// shards allowed), the smallest largest cost (fixed_rows + rows) * longest row over them.
// The costs are exact in double (small integers times a multiple of 1/2), so the optimum is
// compared to a relative 1e-12, the bisection's stopping point.
TEST(ShardBatch, MinimisesTheLargestShardCostAsBruteForceDoes) {
  std::mt19937 gen(7);
  const auto cost = [](const std::vector<int64_t>& steps, const std::vector<size_t>& rows, double fixed_rows) {
    int64_t longest = 0;
    for (size_t b : rows) longest = std::max(longest, steps[b]);
    return (fixed_rows + static_cast<double>(rows.size())) * static_cast<double>(longest);
  };
  int split_cases = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const size_t n = 1 + gen() % 9;
    std::vector<int64_t> steps(n);
    for (auto& s : steps) s = 1 + static_cast<int64_t>(gen() % (trial % 2 ? 4 : 40));  // ties, then spread
    for (size_t shards : {1, 2, 3}) {
      for (double fixed_rows : {0.0, 2.5, 18.0}) {
        const auto got = train::shard_batch(steps, shards, fixed_rows);
        // A partition into at most `shards` non-empty shards, descending steps, ties by position.
        ASSERT_LE(got.size(), shards);
        std::vector<int> seen(n, 0);
        std::vector<size_t> flat;
        double got_cost = 0;
        for (const auto& shard : got) {
          ASSERT_FALSE(shard.empty());
          for (size_t b : shard) {
            ASSERT_LT(b, n);
            ++seen[b];
            flat.push_back(b);
          }
          got_cost = std::max(got_cost, cost(steps, shard, fixed_rows));
        }
        for (size_t b = 0; b < n; ++b) EXPECT_EQ(seen[b], 1) << "row " << b;
        for (size_t k = 1; k < flat.size(); ++k) {
          const bool ordered = steps[flat[k - 1]] > steps[flat[k]] ||
                               (steps[flat[k - 1]] == steps[flat[k]] && flat[k - 1] < flat[k]);
          EXPECT_TRUE(ordered) << "rows " << flat[k - 1] << ", " << flat[k];
        }
        double best = std::numeric_limits<double>::infinity();
        std::vector<size_t> which(n, 0);
        for (;;) {  // every assignment, as a base-`shards` counter
          std::vector<std::vector<size_t>> parts(shards);
          for (size_t b = 0; b < n; ++b) parts[which[b]].push_back(b);
          double worst = 0;
          for (const auto& part : parts) {
            if (!part.empty()) worst = std::max(worst, cost(steps, part, fixed_rows));
          }
          best = std::min(best, worst);
          size_t b = 0;
          while (b < n && ++which[b] == shards) which[b++] = 0;
          if (b == n) break;
        }
        EXPECT_NEAR(got_cost, best, 1e-12 * best) << "trial " << trial << ", shards " << shards << ", fixed_rows "
                                                  << fixed_rows;
        split_cases += got.size() > 1;
      }
    }
  }
  EXPECT_GT(split_cases, 100);  // the cases are not all one shard
}

TEST(ShardBatch, RefusesWhatItCannotSplitAndNamesIt) {
  EXPECT_ERROR_CONTAINS(train::shard_batch({}, 2, 18), "steps", "none");
  EXPECT_ERROR_CONTAINS(train::shard_batch({3, 0}, 2, 18), "steps[1]", "got 0");
  EXPECT_ERROR_CONTAINS(train::shard_batch({3}, 0, 18), "shards", "got 0");
  EXPECT_ERROR_CONTAINS(train::shard_batch({3}, 2, -1), "fixed_rows", "got -1");
  EXPECT_ERROR_CONTAINS(train::shard_batch({3}, 2, std::nan("")), "fixed_rows", "nan");
}

TEST(Trainer, CheckpointRoundTripDecodesIdentically) {
  TempDir d;
  write_letter_task(d / "train.tsv", 100, 3);
  write_letter_task(d / "dev.tsv", 10, 4);
  std::ostringstream sink;
  train::Config c = tiny_config(d, 10);
  c.model.lookahead = 2;  // a non-default shape option must survive the round trip
  train::Trainer(c).run({}, sink);
  const auto t = train::TrainedModel::load(d / "run/last.ckpt");
  train::CheckpointIO::save(d / "copy.ckpt", t, nullptr, train::RunState{});
  const auto u = train::TrainedModel::load(d / "copy.ckpt");
  EXPECT_EQ(t.model->options().lookahead, 2);
  EXPECT_EQ(u.model->options().lookahead, 2);
  const auto pt = parameters_of(t), pu = parameters_of(u);
  for (size_t k = 0; k < pt.size(); ++k) EXPECT_TRUE(torch::equal(pt[k], pu[k]));
  EXPECT_TRUE(t.input_vocab == u.input_vocab);
  EXPECT_TRUE(t.output_vocab == u.output_vocab);
  const auto sets = data::group_references(data::read_tsv(d / "dev.tsv"));
  const auto et = train::evaluate(t, sets, {}), eu = train::evaluate(u, sets, {});
  EXPECT_EQ(et.counts.token_errors, eu.counts.token_errors);
  EXPECT_EQ(et.inputs, 10);
}

// EvalResult::scored: per decoded input its index into the sets and its counts, which sum
// to the totals and equal what decoding that input alone gives (mona eval's error rate per
// voice group reads them); with a limit, the evenly spaced subset.
TEST(Trainer, EvaluateScoresEachInputAsDecodingItAloneDoes) {
  TempDir d;
  write_letter_task(d / "train.tsv", 100, 3);
  write_letter_task(d / "dev.tsv", 12, 4);
  std::ostringstream sink;
  train::Trainer(tiny_config(d, 10)).run({}, sink);
  const auto t = train::TrainedModel::load(d / "run/last.ckpt");
  const auto sets = data::group_references(data::read_tsv(d / "dev.tsv"));
  const size_t n = sets.size();  // 12 lines, duplicates grouped
  ASSERT_GE(n, 10u);
  for (const int64_t limit : {0, 5}) {
    const auto all = train::evaluate(t, sets, {}, false, limit);
    ASSERT_EQ(static_cast<int64_t>(all.scored.size()), all.inputs);
    io::ErrorCounts sum;
    std::vector<size_t> indices;
    for (const auto& s : all.scored) {
      const auto alone = train::evaluate(t, {sets.at(s.set_index)}, {});
      EXPECT_EQ(s.counts.token_errors, alone.counts.token_errors) << "input " << s.set_index;
      EXPECT_EQ(s.counts.ref_tokens, alone.counts.ref_tokens) << "input " << s.set_index;
      EXPECT_EQ(s.counts.sequence_errors, alone.counts.sequence_errors) << "input " << s.set_index;
      sum.add(s.counts);
      indices.push_back(s.set_index);
    }
    EXPECT_EQ(sum.token_errors, all.counts.token_errors);
    EXPECT_EQ(sum.ref_tokens, all.counts.ref_tokens);
    EXPECT_EQ(sum.sequences, all.counts.sequences);
    if (limit == 0) {
      ASSERT_EQ(indices.size(), n);
      for (size_t k = 0; k < n; ++k) EXPECT_EQ(indices[k], k);
    } else {  // 5 evenly spaced inputs, from the first
      ASSERT_EQ(indices.size(), 5u);
      EXPECT_EQ(indices[0], 0u);
      for (size_t k = 1; k < 5; ++k) {
        EXPECT_GE(indices[k] - indices[k - 1], n / 5) << k;
        EXPECT_LE(indices[k] - indices[k - 1], n / 5 + 1) << k;
      }
    }
  }
}

// evaluate()'s threads: inputs decoded at once, each by its own model replica computing
// with the model's parameters. Every figure but the times is the one-thread figure: the same
// inputs in the same order, each with the counts and latency of decoding it alone, for
// greedy online decoding (whose latency sums are added in input order, so equal to the
// last bit), beam search and the expected alignment, with and without a limit; for each
// mechanism family the replicas must rebuild (MoChA's chunk, GMM's buffers-free state).
// Fewer than one thread is refused, naming the argument.
TEST(Trainer, EvaluateOnSeveralThreadsGivesWhatOneThreadGives) {
  for (const std::string attention : {"mocha", "monotonic", "gmm", "soft"}) {
    SCOPED_TRACE(attention);
    TempDir d;
    write_letter_task(d / "train.tsv", 100, 3);
    write_letter_task(d / "dev.tsv", 14, 4);
    std::ostringstream sink;
    train::Config c = tiny_config(d, 10);
    c.model.attention = attention;
    if (attention != "mocha") c.model.attention_options = train::Config{}.model.attention_options;
    train::Trainer(c).run({}, sink);
    const auto t = train::TrainedModel::load(d / "run/last.ckpt");
    const auto sets = data::group_references(data::read_tsv(d / "dev.tsv"));
    EXPECT_ERROR_CONTAINS(train::evaluate(t, sets, {}, false, 0, {}, nullptr, 0), "threads", "got 0");
    for (const int64_t beam : {0, 2}) {
      for (const bool expected : {false, true}) {
        for (const int64_t limit : {0, 7}) {
          const auto one = train::evaluate(t, sets, {beam}, expected, limit);
          for (const int64_t threads : {2, 3}) {
            const at::Tensor rng_before = at::globalContext().defaultGenerator(at::kCPU).get_state();
            const auto many = train::evaluate(t, sets, {beam}, expected, limit, {}, nullptr, threads);
            // The replicas' construction leaves the global generator (training's dropout) as it was.
            EXPECT_TRUE(torch::equal(at::globalContext().defaultGenerator(at::kCPU).get_state(), rng_before));
            const std::string at = "beam " + std::to_string(beam) + (expected ? " expected" : " hard") +
                                   ", limit " + std::to_string(limit) + ", threads " + std::to_string(threads);
            EXPECT_EQ(many.threads, threads) << at;
            EXPECT_EQ(many.inputs, one.inputs) << at;
            ASSERT_EQ(many.scored.size(), one.scored.size()) << at;
            for (size_t k = 0; k < one.scored.size(); ++k) {
              EXPECT_EQ(many.scored[k].set_index, one.scored[k].set_index) << at << ", input " << k;
              EXPECT_EQ(many.scored[k].counts.token_errors, one.scored[k].counts.token_errors) << at << ", input " << k;
              EXPECT_EQ(many.scored[k].counts.sequence_errors, one.scored[k].counts.sequence_errors) << at;
            }
            EXPECT_EQ(many.counts.token_errors, one.counts.token_errors) << at;
            EXPECT_EQ(many.counts.ref_tokens, one.counts.ref_tokens) << at;
            EXPECT_EQ(many.latency.sequences, one.latency.sequences) << at;
            EXPECT_EQ(many.latency.tokens, one.latency.tokens) << at;
            EXPECT_EQ(many.latency.early_tokens, one.latency.early_tokens) << at;
            EXPECT_EQ(many.latency.proportion_sum, one.latency.proportion_sum) << at;
            EXPECT_EQ(many.latency.lagging_sum, one.latency.lagging_sum) << at;
          }
          if (beam == 0 && !expected) {
            EXPECT_GT(one.latency.sequences, 0);  // the latency was compared
          }
        }
      }
    }
  }
}

// train.init_from (fine-tuning, 003 Table 4a): a fresh run starts from a checkpoint's
// parameters and buffers under their names, here MoChA with a CTC head -> hard monotonic
// attention without one (a step-0 checkpoint holds exactly the copied values), keeping the
// checkpoint's vocabularies; what the new model lacks is listed. Refused, naming the file
// and what is wrong, before anything is written: a parameter the checkpoint lacks, one of
// another shape, and training data with a symbol outside the checkpoint's vocabulary.
TEST(Trainer, InitFromCopiesEveryParameterByNameAndRefusesWhatDoesNotFit) {
  TempDir d;
  write_letter_task(d / "train.tsv", 100, 3);
  write_letter_task(d / "dev.tsv", 10, 4);
  std::ostringstream sink;
  train::Config a = tiny_config(d, 10);
  a.model.ctc_weight = 0.2;
  train::Trainer(a).run({}, sink);
  const std::string source = d / "run/last.ckpt";
  const auto trained = train::TrainedModel::load(source);

  train::Config b = tiny_config(d, 0);
  b.model.attention = "monotonic";
  b.train.output_dir = d / "tuned";
  b.train.init_from = source;
  std::ostringstream out;
  train::Trainer(b).run({}, out);
  EXPECT_NE(out.str().find("initialised from " + source + " (step 10); not used: ctc_output.bias, ctc_output.weight, "
                           "decoder.attention.chunk."),
            std::string::npos) << out.str();
  const auto tuned = train::TrainedModel::load(d / "tuned/last.ckpt");
  EXPECT_EQ(tuned.step, 0);
  EXPECT_TRUE(tuned.input_vocab == trained.input_vocab);
  EXPECT_TRUE(tuned.output_vocab == trained.output_vocab);
  const auto theirs = trained.model->named_parameters();
  size_t compared = 0;
  for (const auto& p : tuned.model->named_parameters()) {
    ASSERT_TRUE(theirs.contains(p.key())) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), theirs[p.key()])) << p.key();
    ++compared;
  }
  EXPECT_EQ(compared + 2, theirs.size() - trained.model->decoder->attention->named_parameters().size() +
                              tuned.model->decoder->attention->named_parameters().size())
      << "every parameter but the CTC head's and MoChA's chunk energy";

  auto expect_refused = [&](train::Config c, const std::string& fragment) {
    c.train.output_dir = d / "refused/deeper/run/";  // three directories made for the lock
    try {
      train::Trainer(c).run({}, sink);
      ADD_FAILURE() << "started from a checkpoint that does not fit: " << fragment;
    } catch (const mona::Error& e) {
      EXPECT_NE(std::string(e.what()).find("train.init_from " + c.train.init_from), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(d / "refused")) << fragment << ": the directories made for the refused run are left";
  };
  train::Config chunked = tiny_config(d, 0);  // MoChA from the monotonic model: no chunk energy
  chunked.train.init_from = d / "tuned/last.ckpt";
  expect_refused(chunked, "decoder.attention.chunk.v is not in it");
  train::Config wider = b;
  wider.model.encoder_hidden = 24;
  expect_refused(wider, "encoder.lstm0.weight_hh_l0 is [64, 16] in it, [96, 24] here");
  { std::ofstream(d / "other.tsv") << "a b g\tF E Z\n" << io::read_file(d / "train.tsv"); }
  train::Config other = b;
  other.data.train = d / "other.tsv";
  expect_refused(other, "has 1 input token(s) outside the checkpoint's vocabulary: g");
}

TEST(Trainer, CorruptOrTruncatedCheckpointIsRefusedAndNothingIsOverwritten) {
  TempDir d;
  write_letter_task(d / "train.tsv", 50, 5);
  write_letter_task(d / "dev.tsv", 5, 6);
  std::ostringstream sink;
  train::Trainer(tiny_config(d, 10)).run({}, sink);
  const std::string last = d / "run/last.ckpt";
  const std::string good = io::read_file(last);
  auto expect_refused = [&](const std::string& bytes, const std::string& fragment) {
    { std::ofstream(last, std::ios::binary) << bytes; }
    try {
      train::TrainedModel::load(last);
      ADD_FAILURE() << "loaded a damaged checkpoint";
    } catch (const mona::Error& e) {
      EXPECT_NE(std::string(e.what()).find(last), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
    // Resuming from it fails too, and leaves every file as it was.
    EXPECT_THROW(train::Trainer(tiny_config(d, 20)).run(resume_run(), sink), mona::Error);
    EXPECT_EQ(io::read_file(last), bytes);
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  expect_refused(flipped, "CRC");
  expect_refused(good.substr(0, good.size() / 3), "truncated");
  expect_refused("not a checkpoint at all, just text", "");
}

TEST(Trainer, FeatureModelsAreRefusedBeforeAnythingIsWritten) {
  TempDir d;
  write_letter_task(d / "train.tsv", 20, 5);
  write_letter_task(d / "dev.tsv", 5, 6);
  train::Config c = tiny_config(d, 10);
  c.model.input_kind = "features";
  c.model.feature_dim = 4;
  std::ostringstream sink;
  EXPECT_ERROR_CONTAINS(train::Trainer(c).run({}, sink), "model.input_kind: \"features\"", "\"symbols\" or \"audio\"");
  EXPECT_FALSE(fs::exists(d / "run")) << "the output directory was made for a run that cannot train";
}

// A symbol model whose encoder reduces time keeps every 2nd input element: the plots'
// labels are one per memory entry, the elements the entries keep, as many as the
// attention's columns (training's plots failed on the count before).
TEST(Trainer, SymbolModelsWithTimeReductionPlotTheirAlignment) {
  TempDir d;
  write_letter_task(d / "train.tsv", 20, 5);
  write_letter_task(d / "dev.tsv", 5, 6);
  train::Config c = tiny_config(d, 4);
  c.model.encoder_layers = 2;
  c.model.time_reduction_layers = 1;
  c.model.lookahead = 2;
  c.train.eval_every = 4;
  c.train.plot_every = 4;
  std::ostringstream sink;
  train::Trainer(c).run({}, sink);
  const auto t = train::TrainedModel::load(d / "run/last.ckpt");
  const std::vector<std::string> input = {"a", "b", "c", "d", "e"};
  const auto labels = train::memory_labels(t, input);
  data::Example ex;
  ex.input = input;
  ex.output = {"A"};
  const auto weights = train::alignment_weights(t, ex);
  const int64_t entries = t.model->encoder->output_length(static_cast<int64_t>(input.size()));
  ASSERT_EQ(static_cast<int64_t>(labels.size()), entries + (t.config.model.p_eos > 0 ? 1 : 0));
  // [U + 1, T'] weights: one label per column.
  EXPECT_EQ(weights.size(), labels.size() * (ex.output.size() + 1));
  // 5 elements and </s>: 6 read, 3 entries kept, elements 0, 2 and 4.
  ASSERT_EQ(entries, 3);
  EXPECT_EQ(labels[0], "a");
  EXPECT_EQ(labels[1], "c");
  EXPECT_EQ(labels[2], "e");
  bool plotted = false;
  for (const auto& f : fs::directory_iterator(d / "run/plots")) plotted |= f.path().extension() == ".png";
  EXPECT_TRUE(plotted);
}

// A learning rate far too large makes the parameters infinite at the first update: the run
// stops there with the trainer's own message, naming the step and the setting, on one
// thread and on two (each part of the optimizer step reports), instead of failing in the
// next forward pass inside whichever operator first checks its input.
TEST(Trainer, AnUpdateThatMakesParametersNonFiniteStopsTheRunNamingTheStep) {
  for (const int64_t threads : {1, 2}) {
    TempDir d;
    write_letter_task(d / "train.tsv", 20, 5);
    write_letter_task(d / "dev.tsv", 5, 6);
    std::ostringstream sink;
    train::Config c = tiny_config(d, 4);
    c.train.threads = threads;
    c.train.optimizer.learning_rate = 1e200;  // inf once rounded to float
    expect_error([&] { train::Trainer(c).run({}, sink); },
                 "training diverged: the update of step 1 made parameters NaN or infinite (lower "
                 "train.optimizer.learning_rate?)");
  }
}

TEST(Trainer, BestTokenErrorRateIsEmptyWithoutADevSet) {
  TempDir d;
  write_letter_task(d / "train.tsv", 20, 5);
  write_letter_task(d / "dev.tsv", 5, 6);
  std::ostringstream sink;
  train::Config without = tiny_config(d, 4);
  without.data.dev.clear();
  without.train.output_dir = d / "without";
  const train::TrainResult a = train::Trainer(without).run({}, sink);
  EXPECT_FALSE(a.best_token_error_rate.has_value()) << "a sentinel " << a.best_token_error_rate.value_or(0);
  EXPECT_TRUE(fs::exists(a.best_checkpoint));
  const train::TrainResult b = train::Trainer(tiny_config(d, 4)).run({}, sink);
  ASSERT_TRUE(b.best_token_error_rate.has_value());
  EXPECT_GE(*b.best_token_error_rate, 0.0);
  EXPECT_LT(*b.best_token_error_rate, 1000.0);  // an error rate, not a sentinel
}

// An audio run on 8 kHz tones in `dir`: wav/train1.wav and wav/train2.wav listed in
// train.tsv, wav/dev1.wav and wav/dev2.wav written for dev.tsv (which the test writes).
train::Config tone_run_config(const TempDir& dir) {
  fs::create_directories(dir / "wav");
  double frequency = 0.1;  // radians per sample, a new tone per file
  for (const char* name : {"train1", "train2", "dev1", "dev2"}) {
    std::vector<float> x(2000);  // 0.25 s
    for (size_t n = 0; n < x.size(); ++n) x[n] = static_cast<float>(0.3 * std::sin(frequency * static_cast<double>(n)));
    audio::write_wav(dir / ("wav/" + std::string(name) + ".wav"), x, 8000);
    frequency += 0.1;
  }
  write_raw(dir / "train.tsv", "wav/train1.wav\tgo\nwav/train2.wav\tleft\n");
  train::Config c;
  c.data.train = dir / "train.tsv";
  c.data.dev = dir / "dev.tsv";
  c.model.input_kind = "audio";
  c.model.features.sample_rate = 8000;  // frames of 200 samples every 80
  c.model.features.num_mel_bins = 10;
  c.model.conv_channels = 2;
  c.model.encoder_layers = 1;
  c.model.encoder_hidden = 8;
  c.model.decoder_embedding_dim = 4;
  c.model.decoder_hidden = 8;
  c.train.output_dir = dir / "run";
  c.train.threads = 1;
  c.train.batch_size = 2;
  c.train.max_steps = 4;
  c.train.eval_every = 2;
  c.train.log_every = 1;
  c.train.plot_examples = 0;
  return c;
}

TEST(Trainer, DevAudioThatCannotBeReadIsRefusedBeforeAnyStep) {
  TempDir d;
  const train::Config c = tone_run_config(d);
  std::ostringstream sink;
  { std::ofstream empty(d / "wav/empty.wav"); }  // exists (the manifest's check), holds nothing
  write_raw(d / "dev.tsv", "wav/dev1.wav\tgo\nwav/empty.wav\tleft\n");
  EXPECT_ERROR_CONTAINS(train::Trainer(c).run({}, sink), "data.dev: " + (d / "dev.tsv") + ":2: ", "empty.wav",
                        "the file is empty");
  EXPECT_FALSE(fs::exists(d / "run")) << "refused only after the run had started";
  audio::write_wav(d / "wav/short.wav", std::vector<float>(100, 0.1f), 8000);
  write_raw(d / "dev.tsv", "\nwav/dev1.wav\tgo\nwav/short.wav\tleft\n");
  EXPECT_ERROR_CONTAINS(train::Trainer(c).run({}, sink), "data.dev: " + (d / "dev.tsv") + ":3: ", "short.wav",
                        "100 samples, shorter than one frame (200 samples)");
  EXPECT_FALSE(fs::exists(d / "run"));
  // The same audio is trained on and evaluated when it is fine.
  write_raw(d / "dev.tsv", "wav/dev1.wav\tgo\nwav/dev2.wav\tleft\n");
  EXPECT_EQ(train::Trainer(c).run({}, sink).steps, 4);
}

// An audio model's plot labels give every 10th memory entry's time as a stream reports an
// emission's: the end of the last frame the entry has read. At 8 kHz a frame is 200 samples
// every 80 (25 ms, shift 10 ms, snip_edges), so frame k ends at 10 k + 25 ms.
TEST(Trainer, AudioPlotLabelsAreTheEntriesLastFrameEnds) {
  TempDir d;
  const train::Config c = tone_run_config(d);
  write_raw(d / "dev.tsv", "wav/dev1.wav\tgo\nwav/dev2.wav\tleft\n");
  std::ostringstream sink;
  train::Trainer(c).run({}, sink);
  const auto t = train::TrainedModel::load(d / "run/last.ckpt");
  std::vector<float> x(8000, 0.1f);  // 1 s: 1 + (8000 - 200) / 80 = 98 frames
  for (size_t n = 0; n < x.size(); n += 7) x[n] = -0.1f;
  audio::write_wav(d / "wav/long.wav", x, 8000);
  const std::vector<std::string> input = {d / "wav/long.wav"};
  const auto labels = train::memory_labels(t, input);
  const nn::Encoder& encoder = *t.model->encoder;
  const int64_t entries = encoder.output_length(98);
  ASSERT_EQ(static_cast<int64_t>(labels.size()), entries);
  ASSERT_GT(entries, 20);
  for (int64_t m = 0; m < entries; ++m) {
    if (m % 10 != 0) {
      EXPECT_EQ(labels[static_cast<size_t>(m)], "") << m;
      continue;
    }
    const int64_t frame = std::min<int64_t>(encoder.last_input_of(m), 97);
    std::ostringstream want;
    want.precision(3);
    want << (10.0 * static_cast<double>(frame) + 25.0) / 1000 << "s";
    EXPECT_EQ(labels[static_cast<size_t>(m)], want.str()) << m;
  }
}

// A stream buffer that calls `action` once the text written to it first contains `marker`.
class CallOnMarker : public std::streambuf {
 public:
  CallOnMarker(std::string marker, std::function<void()> action) : marker_(std::move(marker)), action_(std::move(action)) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    text_ += traits_type::to_char_type(c);
    if (!called_ && text_.find(marker_) != std::string::npos) {
      called_ = true;
      action_();
    }
    return c;
  }

 private:
  std::string marker_, text_;
  std::function<void()> action_;
  bool called_ = false;
};

// A dev evaluation that fails (here: its second file emptied once it has started, as a disk
// or a network share can fail) loses no training: last.ckpt holds the step it began at.
TEST(Trainer, LastCheckpointIsSavedBeforeTheDevEvaluation) {
  TempDir d;
  const train::Config c = tone_run_config(d);
  write_raw(d / "dev.tsv", "wav/dev1.wav\tgo\nwav/dev2.wav\tleft\n");
  // The evaluation's progress line ("dev eval (step 2) ...") follows its first input.
  CallOnMarker buffer("dev eval", [&] { write_raw(d / "wav/dev2.wav", ""); });
  std::ostream progress(&buffer);
  EXPECT_ERROR_CONTAINS(train::Trainer(c).run({}, progress), "dev2.wav", "the file is empty");
  ASSERT_TRUE(fs::exists(d / "run/last.ckpt")) << "the steps before the failed evaluation were lost";
  EXPECT_EQ(train::TrainedModel::load(d / "run/last.ckpt").step, 2);
}

// A stop asked for during a dev evaluation (mona's SIGINT) ends it before its next input,
// not after the whole dev set: the run saves last.ckpt at the evaluation's step and returns
// stopped, with no record of the part of the dev set it decoded. One and two decoding threads.
TEST(Trainer, AStopDuringTheDevEvaluationEndsItAndTheRun) {
  for (const int64_t threads : {1, 2}) {
    SCOPED_TRACE(threads);
    TempDir d;
    write_letter_task(d / "train.tsv", 100, 3);
    write_letter_task(d / "dev.tsv", 60, 4);
    train::Config c = tiny_config(d, 20);
    c.train.eval_every = 5;
    c.train.eval_limit = 0;  // all 60: the stop comes after the first
    c.train.threads = threads;
    volatile std::sig_atomic_t stop = 0;
    train::RunOptions options;
    options.stop = &stop;
    // The evaluation's progress line ("dev eval (step 5) ...") follows its first input.
    CallOnMarker buffer("dev eval", [&] { stop = 2; });
    std::ostream progress(&buffer);
    const train::TrainResult r = train::Trainer(c).run(options, progress);
    EXPECT_EQ(r.stopped, 2);
    EXPECT_EQ(r.steps, 5);
    EXPECT_EQ(train::TrainedModel::load(d / "run/last.ckpt").step, 5);
    std::ifstream log(d / "run/train.jsonl");
    std::string line, events;
    while (std::getline(log, line)) {
      if (line.find("\"event\":\"eval\"") != std::string::npos) events += "eval ";
      if (line.find("\"event\":\"stopped\"") != std::string::npos) events += "stopped ";
    }
    EXPECT_EQ(events, "stopped ");
  }
}

// Two runs into one output directory at once: the second is refused while the first holds
// the directory (both used to pass the look for an existing run and write over each other),
// and a run refused for its request leaves no directory it made behind.
TEST(Trainer, OneRunAtATimeInAnOutputDirectory) {
  TempDir d;
  write_letter_task(d / "train.tsv", 100, 3);
  write_letter_task(d / "dev.tsv", 14, 4);
  const train::Config c = tiny_config(d, 2);
  fs::create_directories(c.train.output_dir);
  {
    io::DirectoryLock running(c.train.output_dir, "a run in progress (this test)");
    std::ostringstream sink;
    EXPECT_ERROR_CONTAINS(train::Trainer(c).run({}, sink), c.train.output_dir,
                          "locked: another mona train is running there");
    EXPECT_TRUE(fs::is_empty(c.train.output_dir));
  }
  std::ostringstream sink;
  EXPECT_EQ(train::Trainer(c).run({}, sink).steps, 2);
  train::Config elsewhere = c;
  elsewhere.train.output_dir = d / "fresh";
  EXPECT_ERROR_CONTAINS(train::Trainer(elsewhere).run(resume_run(), sink), "no checkpoint to resume from");
  EXPECT_FALSE(fs::exists(d / "fresh"));
}

}  // namespace
}  // namespace mona::test
