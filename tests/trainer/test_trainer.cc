// label: train
// Training runs, checkpoints and the command-line program on a tiny synthetic task:
// checkpoint round trip, exact resumption, refusal of corrupt checkpoints, CLI errors.
#include "mona/train/trainer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "mona/core/error.h"
#include "mona/train/files.h"
#include "util/program.h"

namespace mona::test {
namespace {
namespace fs = std::filesystem;

// A fresh temporary directory per test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("mona_trainer_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// Letters a..f spelled as "symbols" A..F reversed (a -> F, b -> E, ...): a monotonic
// one-to-one transduction, no adjacent repeats.
void write_task(const std::string& path, int n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> len(2, 6), sym(0, 5);
  std::ofstream out(path);
  for (int k = 0; k < n; ++k) {
    std::string in, o;
    int prev = -1;
    for (int i = 0, L = len(gen); i < L; ++i) {
      int s;
      do s = sym(gen); while (s == prev);
      prev = s;
      in += std::string(i ? " " : "") + char('a' + s);
      o += std::string(i ? " " : "") + char('F' - s);
    }
    out << in << "\t" << o << "\n";
  }
}

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

std::vector<at::Tensor> parameters_of(const train::Transducer& t) {
  std::vector<at::Tensor> out;
  for (const auto& p : t.model->parameters()) out.push_back(p.detach().clone());
  for (const auto& b : t.model->buffers()) out.push_back(b.detach().clone());
  return out;
}

TEST(Trainer, ResumedRunEqualsUninterruptedRun) {
  TempDir a, b;
  for (auto* d : {&a, &b}) {
    write_task(*d / "train.tsv", 200, 1);
    write_task(*d / "dev.tsv", 20, 2);
  }
  std::ostringstream sink;
  train::Trainer(tiny_config(a, 30)).run(false, sink);
  train::Trainer(tiny_config(b, 20)).run(false, sink);  // interrupted at step 20 ...
  train::Trainer(tiny_config(b, 30)).run(true, sink);   // ... and resumed to 30
  const auto ta = train::Transducer::load(a / "run/last.ckpt");
  const auto tb = train::Transducer::load(b / "run/last.ckpt");
  EXPECT_EQ(ta.step, 30);
  EXPECT_EQ(tb.step, 30);
  const auto pa = parameters_of(ta), pb = parameters_of(tb);
  ASSERT_EQ(pa.size(), pb.size());
  // Bit for bit: both runs are the same binary on the same machine with one thread
  // (train.threads = 1), the same batches, dropout draws and optimizer state, so steps 21-30
  // are the same operations on the same values. Any difference is a resumption bug, not
  // rounding.
  for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(torch::equal(pa[k], pb[k])) << "tensor " << k;
  // The effective configuration, the log and the plots are beside the checkpoints.
  EXPECT_TRUE(fs::exists(b / "run/config.yaml"));
  EXPECT_TRUE(fs::exists(b / "run/train.jsonl"));
  EXPECT_TRUE(fs::exists(b / "run/best.ckpt"));
  EXPECT_FALSE(fs::is_empty(b / "run/plots"));
}

TEST(Trainer, CheckpointRoundTripDecodesIdentically) {
  TempDir d;
  write_task(d / "train.tsv", 100, 3);
  write_task(d / "dev.tsv", 10, 4);
  std::ostringstream sink;
  train::Config c = tiny_config(d, 10);
  c.model.lookahead = 2;  // a non-default shape option must survive the round trip
  train::Trainer(c).run(false, sink);
  const auto t = train::Transducer::load(d / "run/last.ckpt");
  train::CheckpointIO::save(d / "copy.ckpt", t, nullptr, train::RunState{});
  const auto u = train::Transducer::load(d / "copy.ckpt");
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

TEST(Trainer, CorruptOrTruncatedCheckpointIsRefusedAndNothingIsOverwritten) {
  TempDir d;
  write_task(d / "train.tsv", 50, 5);
  write_task(d / "dev.tsv", 5, 6);
  std::ostringstream sink;
  train::Trainer(tiny_config(d, 10)).run(false, sink);
  const std::string last = d / "run/last.ckpt";
  const std::string good = train::read_file(last);
  auto expect_refused = [&](const std::string& bytes, const std::string& fragment) {
    { std::ofstream(last, std::ios::binary) << bytes; }
    try {
      train::Transducer::load(last);
      ADD_FAILURE() << "loaded a damaged checkpoint";
    } catch (const mona::Error& e) {
      EXPECT_NE(std::string(e.what()).find(last), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
    // Resuming from it fails too, and leaves every file as it was.
    EXPECT_THROW(train::Trainer(tiny_config(d, 20)).run(true, sink), mona::Error);
    EXPECT_EQ(train::read_file(last), bytes);
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  expect_refused(flipped, "CRC");
  expect_refused(good.substr(0, good.size() / 3), "truncated");
  expect_refused("not a checkpoint at all, just text", "");
}

// --- the command-line program -------------------------------------------------------

using Run = mona::test::ProgramRun;

Run run_cli(const std::string& args, const std::string& stdin_text = "") {
  TempDir d;
  std::string cmd = std::string(MONA_CLI) + " " + args;
  if (!stdin_text.empty()) {
    std::ofstream(d / "stdin.txt") << stdin_text;
    cmd += " < " + (d / "stdin.txt");
  }
  return mona::test::run_program(cmd);
}

TEST(Cli, ErrorsAreOneLineAndNonZero) {
  TempDir d;
  write_task(d / "train.tsv", 50, 7);
  write_task(d / "dev.tsv", 5, 8);
  {
    std::ofstream cfg(d / "bad.yaml");
    cfg << "model:\n  attenton: {type: mocha}\n";
  }
  auto r = run_cli("train " + (d / "bad.yaml"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("mona: error: " + (d / "bad.yaml") + ": unknown key \"model.attenton\""),
            std::string::npos) << r.output;
  r = run_cli("train " + (d / "missing.yaml"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("missing.yaml"), std::string::npos) << r.output;
  r = run_cli("frobnicate");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("mona: error: "), std::string::npos) << r.output;
  r = run_cli("eval");  // missing arguments
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  r = run_cli("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("train"), std::string::npos) << r.output;
  r = run_cli("train " + (d / "bad.yaml") + " --set model.attenton=");
  EXPECT_NE(r.code, 0);
  { std::ofstream(d / "garbage.ckpt") << "garbage"; }
  r = run_cli("decode " + (d / "garbage.ckpt") + " abc");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("mona: error: checkpoint " + (d / "garbage.ckpt")), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("frame #"), std::string::npos) << "no stack traces: " << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(Cli, TrainDecodeStreamEvalPlot) {
  TempDir d;
  write_task(d / "train.tsv", 100, 9);
  write_task(d / "dev.tsv", 8, 10);
  {
    std::ofstream cfg(d / "cfg.yaml");
    cfg << "data: {train: " << (d / "train.tsv") << ", dev: " << (d / "dev.tsv") << "}\n"
        << "model: {embedding_dim: 8, encoder_layers: 1, encoder_hidden: 16, decoder_embedding_dim: 8,\n"
        << "        decoder_hidden: 16, attention: {type: monotonic, monotonic_energy: dot, init_r: -1}}\n"
        << "train: {output_dir: " << (d / "run") << ", max_steps: 10, eval_every: 10, batch_size: 8, threads: 1}\n";
  }
  auto r = run_cli("train " + (d / "cfg.yaml") + " --set train.optimizer.learning_rate=0.01");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string ckpt = d / "run/best.ckpt";
  // unknown characters: reported with the word, and decoding goes on with the next one
  r = run_cli("decode " + ckpt + " -", "abc\nab9z\n\ncab\n");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("skipping \"ab9z\": symbols outside the model's input vocabulary: '9', 'z'"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("skipping empty input (line 3)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("abc\t"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cab\t"), std::string::npos) << r.output;
  // characters are UTF-8 code points, named whole; a stray byte is shown in hex
  r = run_cli("decode " + ckpt + " -", "ab\xc3\xa9" "c\nb\xff" "a\n");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("skipping \"ab\xc3\xa9" "c\": symbols outside the model's input vocabulary: '\xc3\xa9'\n"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("symbols outside the model's input vocabulary: '\\xFF'"), std::string::npos) << r.output;
  r = run_cli("stream " + ckpt, "abcdef\n");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("read 6 'f'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  = "), std::string::npos) << r.output;
  r = run_cli("eval " + ckpt + " " + (d / "dev.tsv") + " --json");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"inputs\": 8"), std::string::npos) << r.output;
  r = run_cli("eval " + ckpt + " " + (d / "dev.tsv") + " --json --beam 0");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"average_lagging\": "), std::string::npos) << r.output;  // greedy: latency too
  r = run_cli("eval " + ckpt + " " + (d / "dev.tsv") + " --json --beam 2");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("average_lagging"), std::string::npos) << r.output;  // beam search: none
  r = run_cli("plot " + ckpt + " abc -o " + (d / "a.png"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(d / "a.png"));
  // a 200-letter input decodes without error
  std::string longw;
  for (int k = 0; k < 200; ++k) longw += char('a' + (k % 6));
  r = run_cli("decode " + ckpt + " " + longw);
  EXPECT_EQ(r.code, 0) << r.output;
}

}  // namespace
}  // namespace mona::test
