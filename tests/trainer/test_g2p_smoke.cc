// label: g2p
// End-to-end smoke run of the G2P recipe's path: a tiny MoChA model trained for a few
// seconds on 300 CMUdict words (tests/data/g2p_sample.tsv, taken from the prepared train
// split); the training loss must fall, the checkpoint must decode every word, and the
// streaming latency evaluate() reports must be the one a letter-by-letter stream shows.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "mona/stream/stream.h"
#include "mona/train/trainer.h"

namespace mona::test {
namespace {
namespace fs = std::filesystem;

TEST(G2pSmoke, LossFallsAndCheckpointDecodes) {
  const fs::path dir = fs::temp_directory_path() / ("mona_g2p_smoke_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string sample = std::string(MONA_TEST_DATA) + "/g2p_sample.tsv";
  train::Config c;
  c.data.train = sample;
  c.data.dev = sample;
  c.model.embedding_dim = 16;
  c.model.encoder_layers = 1;
  c.model.encoder_hidden = 32;
  c.model.decoder_embedding_dim = 16;
  c.model.decoder_hidden = 32;
  c.model.attention = "mocha";
  c.model.attention_options.chunk_size = 2;
  c.model.attention_options.init_r = -1;
  c.train.output_dir = (dir / "run").string();
  c.train.threads = 1;
  c.train.batch_size = 16;
  c.train.max_steps = 120;
  c.train.eval_every = 120;
  c.train.eval_limit = 20;
  c.train.log_every = 20;
  c.train.optimizer.learning_rate = 0.01;
  std::ostringstream sink;
  const auto r = train::Trainer(c).run(false, sink);
  EXPECT_EQ(r.steps, 120);
  std::vector<double> losses;
  std::ifstream log(dir / "run/train.jsonl");
  for (std::string line; std::getline(log, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "train") losses.push_back(j["loss"].get<double>());
    if (j["event"] == "eval") {  // the dev evaluation logs the streaming latency too
      EXPECT_GT(j["dev_average_proportion"].get<double>(), 0.0);
      EXPECT_LE(j["dev_average_proportion"].get<double>(), 1.0);
      EXPECT_GT(j["dev_average_lagging"].get<double>(), 0.0);
      EXPECT_TRUE(j.contains("dev_early_token_share"));
    }
  }
  ASSERT_EQ(losses.size(), 6u);
  std::printf("[   info   ] training loss every 20 steps:");
  for (double l : losses) std::printf(" %.3f", l);
  std::printf("\n");
  EXPECT_LT(losses.back(), 0.8 * losses.front());  // the loss falls
  const auto t = train::Transducer::load(r.best_checkpoint);
  const auto sets = data::group_references(data::read_tsv(sample));
  const auto ev = train::evaluate(t, sets, {}, false, 50);
  EXPECT_EQ(ev.inputs, 50);
  EXPECT_GT(ev.counts.ref_tokens, 0);
  // The latency evaluate() reports (from the attention's positions) is the one a stream
  // shows: feed each word one letter at a time and note how many letters had been read
  // when each phoneme appeared (the whole word for those that came after the end).
  stream::Recognizer rec(t.model, {});
  train::LatencyCounts streamed;
  for (size_t q = 0; q < 50; ++q) {
    const auto ids = t.input_vocab.encode_or_unk(sets[q * sets.size() / 50].input);
    const auto n = static_cast<int64_t>(ids.size());
    auto s = rec.create_stream();
    std::vector<int64_t> read;
    for (int64_t k = 0; k < n; ++k) {
      rec.accept(*s, torch::tensor({ids[static_cast<size_t>(k)]}, torch::kLong));
      while (rec.is_ready(*s)) rec.decode(*s);
      read.resize(rec.result(*s).tokens.size(), k + 1);
    }
    rec.input_finished(*s);
    while (rec.is_ready(*s)) rec.decode(*s);
    read.resize(rec.result(*s).tokens.size(), n);
    streamed.add(train::latency(read, n));
  }
  EXPECT_GT(streamed.tokens, 0);
  EXPECT_EQ(ev.latency.tokens, streamed.tokens);
  EXPECT_EQ(ev.latency.early_tokens, streamed.early_tokens);
  EXPECT_EQ(ev.latency.sequences, streamed.sequences);
  EXPECT_NEAR(ev.latency.proportion_sum, streamed.proportion_sum, 1e-9);
  EXPECT_NEAR(ev.latency.lagging_sum, streamed.lagging_sum, 1e-9);
  std::printf("[   info   ] latency: AP %.3f, AL %.2f letters, %.0f%% of phonemes before the end\n",
              ev.latency.average_proportion(), ev.latency.average_lagging(), 100 * ev.latency.early_token_share());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mona::test
