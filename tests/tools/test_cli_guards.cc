// label: guards
// The `mona` program's guards (issue 17): a run is never silently replaced, a resumed run
// must match its checkpoint and logs each step once, thread counts are checked in one
// place, counts and references are validated, errors blame the right argument, a signal
// saves the run, and progress follows the budget that ends first. Every refusal is checked
// for its message (the argument and the value) and for leaving the files as they were.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "mona/train/trainer.h"
#include "tools/mona_cli.h"
#include "util/letter_task.h"
#include "util/program.h"
#include "util/temp_dir.h"

extern char** environ;

namespace mona::test {
namespace {
namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A task and a configuration in `d`: cfg.yaml trains into d/run (`train` adds keys).
std::string write_setup(const TempDir& d, const std::string& train = "max_steps: 10, eval_every: 10") {
  return write_letter_run(d.path(), std::string("batch_size: 8, plot_examples: 1, ") +
                                        (train.find("threads:") == std::string::npos ? "threads: 1, " : "") + train);
}

using CliResult = mona::test::ProgramRun;

// run_cli (tools/mona_cli.h) runs under `timeout`: a regression that hangs (e.g. thousands
// of threads) fails instead of blocking.

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
int64_t lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

// Every file under `dir` with its content and modification time.
using Snapshot = std::map<std::string, std::pair<std::string, fs::file_time_type>>;
Snapshot snapshot(const std::string& dir) {
  Snapshot s;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) s[e.path().string()] = {read_text(e.path().string()), e.last_write_time()};
  }
  return s;
}

// The records of a JSONL log (each line must parse).
std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// A checkpoint trained once per test process, for the tests that only read one.
const std::string& shared_checkpoint() {
  static TempDir dir;
  static const std::string ckpt = [] {
    const std::string cfg = write_setup(dir);
    const CliResult r = run_cli("train " + cfg);
    EXPECT_EQ(r.code, 0) << r.output;
    return dir / "run/best.ckpt";
  }();
  return ckpt;
}
std::string shared_dev() { return fs::path(shared_checkpoint()).parent_path().parent_path() / "dev.tsv"; }

// --- 2. a run in the output directory is not replaced without being told ---------------

TEST(CliGuards, TrainRefusesADirectoryHoldingARunUnlessResumedOrOverwritten) {
  TempDir d;
  const std::string cfg = write_setup(d, "max_steps: 20, eval_every: 10, log_every: 5");
  ASSERT_EQ(run_cli("train " + cfg).code, 0);
  const Snapshot before = snapshot(d / "run");
  ASSERT_TRUE(before.count(d / "run/last.ckpt") && before.count(d / "run/best.ckpt"));

  CliResult r = run_cli("train " + cfg + " --set train.max_steps=5");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(lines(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: error: train.output_dir " + (d / "run") +
                                     " holds a run (last.ckpt, best.ckpt, train.jsonl)"))
      << r.output;
  for (const char* way : {"--resume", "another train.output_dir", "--overwrite"}) {
    EXPECT_TRUE(contains(r.output, way)) << way << ": " << r.output;
  }
  EXPECT_EQ(snapshot(d / "run"), before) << "a refused run changed the output directory";

  // --resume and --overwrite exclude each other; nothing changes either.
  r = run_cli("train " + cfg + " --resume --overwrite");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(contains(r.output, "--overwrite")) << r.output;
  EXPECT_EQ(snapshot(d / "run"), before);

  // --overwrite with a setting that cannot run is refused before the run is replaced (a
  // max_minutes of 1e308 passed the check, overflowed to inf seconds, and failed after
  // the checkpoints and log had been removed).
  r = run_cli("train " + cfg + " --overwrite --set train.max_minutes=1e308");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: error: train.max_minutes must lie in [0, 5.256e+11], got 1e+308"))
      << r.output;
  EXPECT_EQ(snapshot(d / "run"), before) << "a refused --overwrite changed the output directory";

  // --overwrite starts afresh: the old checkpoints, log records and plots are gone.
  r = run_cli("train " + cfg + " --overwrite --set train.max_steps=5");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(train::TrainedModel::load(d / "run/last.ckpt").step, 5);
  EXPECT_EQ(train::TrainedModel::load(d / "run/best.ckpt").step, 5);
  for (const auto& rec : records(d / "run/train.jsonl")) EXPECT_LE(rec["step"].get<int64_t>(), 5) << rec;
  EXPECT_FALSE(fs::exists(d / "run/plots/step20_ex0.png"));
  EXPECT_TRUE(fs::exists(d / "run/plots/step5_ex0.png"));
}

// --- 3. thread counts ------------------------------------------------------------------

TEST(CliGuards, ThreadCountsBelowOneAreRefusedAndTooManyAreClamped) {
  const std::string ckpt = shared_checkpoint();
  // A count below one is a command line that cannot be used: exit 2, as --beam -1.
  for (const char* bad : {"0", "-1"}) {
    const CliResult r = run_cli(std::string("--threads ") + bad + " decode " + ckpt + " abc");
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_EQ(lines(r.output), 1) << r.output;
    EXPECT_TRUE(contains(r.output, std::string("mona: error: --threads: expected an integer >= 1, got ") + bad))
        << r.output;
  }
  {
    const CliResult r = run_cli("decode " + ckpt + " abc --beam -1");
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_TRUE(contains(r.output, "mona: error: --beam: expected an integer >= 0, got -1")) << r.output;
  }
  const auto hardware = std::thread::hardware_concurrency();
  ASSERT_GT(hardware, 0u);
  ASSERT_LT(hardware, 4096u);
  const std::string using_hw = "hardware threads; using " + std::to_string(hardware) + "\n";
  CliResult r = run_cli("--threads 4096 decode " + ckpt + " abc");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: --threads = 4096 is more than this machine's " + std::to_string(hardware) +
                                     " " + using_hw)) << r.output;
  EXPECT_TRUE(contains(r.output, "abc\t")) << r.output;
  // The program's option may follow the subcommand, before or after its arguments: the same
  // check and notice.
  for (const std::string& args : {"decode --threads 4096 " + ckpt + " abc", "decode " + ckpt + " abc --threads 4096"}) {
    r = run_cli(args);
    EXPECT_EQ(r.code, 0) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "mona: --threads = 4096 is more than this machine's")) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "abc\t")) << args << ": " << r.output;
  }
  // A count that int64 cannot hold is a usage error, not the largest count clamped.
  r = run_cli("--threads 99999999999999999999 decode " + ckpt + " abc");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: error: --threads: expected an integer >= 1, got 99999999999999999999"))
      << r.output;
  r = run_cli("decode --threads 0 " + ckpt + " abc");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: error: --threads: expected an integer >= 1, got 0")) << r.output;

  // The configuration key goes through the same check: clamped, and the effective value
  // is what the run records.
  TempDir d;
  const std::string cfg = write_setup(d, "max_steps: 2, eval_every: 2, threads: 100000");
  r = run_cli("train " + cfg);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: train.threads = 100000 is more than this machine's " +
                                     std::to_string(hardware) + " " + using_hw)) << r.output;
  EXPECT_TRUE(contains(read_text(d / "run/config.yaml"), "threads: " + std::to_string(hardware) + "\n"));
  TempDir e;
  const std::string cfg0 = write_setup(e, "max_steps: 2, threads: 0");
  r = run_cli("train " + cfg0);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: error: train.threads: expected a number of threads >= 1, got 0")) << r.output;
  EXPECT_FALSE(fs::exists(e / "run"));
}

// --- 4. a resumed run keeps its model ----------------------------------------------------

TEST(CliGuards, ResumeRefusesChangedModelOptionsNamingThemAndTouchesNothing) {
  TempDir d;
  const std::string cfg = write_setup(d);
  ASSERT_EQ(run_cli("train " + cfg).code, 0);
  const Snapshot before = snapshot(d / "run");
  const CliResult r = run_cli("train " + cfg +
                        " --resume --set train.max_steps=20 --set model.encoder_hidden=32 --set model.dropout=0.25");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(lines(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: error: checkpoint " + (d / "run/last.ckpt") + ": model options differ"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "model.encoder_hidden: 16 in the checkpoint, 32 in the configuration")) << r.output;
  EXPECT_TRUE(contains(r.output, "model.dropout: 0 in the checkpoint, 0.25 in the configuration")) << r.output;
  EXPECT_FALSE(contains(r.output, "mat1")) << r.output;
  EXPECT_EQ(snapshot(d / "run"), before) << "config.yaml or the log changed";
  // The same options resume.
  EXPECT_EQ(run_cli("train " + cfg + " --resume --set train.max_steps=12").code, 0);
  EXPECT_EQ(train::TrainedModel::load(d / "run/last.ckpt").step, 12);
}

// --- 5. eval needs something to evaluate -------------------------------------------------

// An empty dev file is refused as an empty training file is (it read as "no dev set"), and
// the refusal changes nothing in the output directory.
TEST(CliGuards, TrainRefusesAnEmptyDevFile) {
  TempDir d;
  const std::string cfg = write_setup(d);
  { std::ofstream(d / "empty.tsv"); }
  const CliResult r = run_cli("train " + cfg + " --set data.dev=" + (d / "empty.tsv"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: error: data.dev: " + (d / "empty.tsv") + " holds no examples")) << r.output;
  EXPECT_FALSE(fs::exists(d / "run")) << r.output;
}

// An output directory that cannot be made (a file where a parent should be) is named with the
// key; it was LibTorch-free but bare: "filesystem error: cannot create directories".
TEST(CliGuards, TrainNamesAnOutputDirThatCannotBeMade) {
  TempDir d;
  const std::string cfg = write_setup(d);
  { std::ofstream(d / "afile") << "x"; }
  const CliResult r = run_cli("train " + cfg + " --set train.output_dir=" + (d / "afile/run"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: error: train.output_dir " + (d / "afile/run") + ": cannot create it: "))
      << r.output;
  EXPECT_EQ(read_text(d / "afile"), "x");
}

TEST(CliGuards, EvalRefusesADataFileWithoutExamples) {
  const std::string ckpt = shared_checkpoint();
  TempDir d;
  { std::ofstream(d / "empty.tsv"); }
  { std::ofstream(d / "blank.tsv") << "\n  \n\n"; }
  for (const char* name : {"empty.tsv", "blank.tsv"}) {
    const CliResult r = run_cli("eval " + ckpt + " " + (d / name) + " --json");
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_EQ(lines(r.output), 1) << r.output;
    EXPECT_TRUE(contains(r.output, "mona: error: DATA: " + (d / name) + " holds no examples")) << r.output;
    EXPECT_FALSE(contains(r.output, "error_rate")) << r.output;
  }
}

// --- 6. each step is logged once across kills and resumptions ---------------------------

TEST(CliGuards, ResumeDropsLogRecordsPastTheCheckpointSoEachStepIsLoggedOnce) {
  TempDir d;
  const std::string cfg = write_setup(d, "max_steps: 20, eval_every: 10, log_every: 5");
  ASSERT_EQ(run_cli("train " + cfg).code, 0);
  fs::copy_file(d / "run/last.ckpt", d / "step20.ckpt");
  ASSERT_EQ(run_cli("train " + cfg + " --resume --set train.max_steps=30").code, 0);
  // A kill after the records of steps 25 and 30 (the last one cut short) but before the
  // checkpoint of step 30: the directory as it was left.
  fs::copy_file(d / "step20.ckpt", d / "run/last.ckpt", fs::copy_options::overwrite_existing);
  { std::ofstream(d / "run/train.jsonl", std::ios::app) << "{\"event\":\"train\",\"st"; }
  const CliResult r = run_cli("train " + cfg + " --resume --set train.max_steps=30");
  ASSERT_EQ(r.code, 0) << r.output;
  std::multiset<std::pair<std::string, int64_t>> seen;
  std::vector<int64_t> train_steps, eval_steps;
  for (const auto& rec : records(d / "run/train.jsonl")) {
    const auto key = std::make_pair(rec["event"].get<std::string>(), rec["step"].get<int64_t>());
    EXPECT_EQ(seen.count(key), 0u) << "logged twice: " << rec;
    seen.insert(key);
    (key.first == "train" ? train_steps : eval_steps).push_back(key.second);
  }
  EXPECT_EQ(train_steps, (std::vector<int64_t>{5, 10, 15, 20, 25, 30}));
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{10, 20, 30}));
  // The log is rewritten atomically: no temporary file is left beside it.
  for (const auto& e : fs::directory_iterator(d / "run")) {
    EXPECT_FALSE(contains(e.path().filename().string(), ".tmp.")) << e.path();
  }
}

// --- 7. counts are not negative ------------------------------------------------------------

TEST(CliGuards, NegativeBeamAndLimitAreRefused) {
  const std::string ckpt = shared_checkpoint();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"eval " + ckpt + " " + shared_dev() + " --beam -1", "--beam: expected an integer >= 0, got -1"},
      {"eval " + ckpt + " " + shared_dev() + " --limit -5", "--limit: expected an integer >= 0, got -5"},
      {"decode " + ckpt + " abc --beam -2", "--beam: expected an integer >= 0, got -2"}};
  for (const auto& [args, message] : cases) {
    const CliResult r = run_cli(args);
    EXPECT_NE(r.code, 0) << args << ": " << r.output;
    EXPECT_EQ(lines(r.output), 1) << r.output;
    EXPECT_TRUE(contains(r.output, "mona: error: " + message)) << r.output;
    EXPECT_FALSE(contains(r.output, "error rate")) << r.output;
    EXPECT_FALSE(contains(r.output, "abc\t")) << r.output;
  }
  EXPECT_EQ(run_cli("eval " + ckpt + " " + shared_dev() + " --beam 0 --limit 3").code, 0);
}

// --- 8. plot references --------------------------------------------------------------------

TEST(CliGuards, PlotRefusesReferenceTokensOutsideTheOutputVocabulary) {
  const std::string ckpt = shared_checkpoint();
  TempDir d;
  CliResult r = run_cli("plot " + ckpt + " abc --reference 'F Q E ZZ Q' -o " + (d / "a.png"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(lines(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: error: --reference \"F Q E ZZ Q\": tokens outside the model's output "
                                 "vocabulary: 'Q', 'ZZ'\n")) << r.output;
  EXPECT_FALSE(fs::exists(d / "a.png"));
  r = run_cli("plot " + ckpt + " abc --reference 'F E D' -o " + (d / "a.png"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(d / "a.png"));
  // An input outside the input vocabulary is an error too (plot has one input: nothing to
  // skip to), in the same style, and writes nothing.
  for (const auto& [input, message] : std::vector<std::pair<std::string, std::string>>{
           {"ab9z", "mona: error: INPUT \"ab9z\": symbols outside the model's input vocabulary: '9', 'z'\n"},
           {"abz", "mona: error: INPUT \"abz\": a symbol outside the model's input vocabulary: 'z'\n"}}) {
    r = run_cli("plot " + ckpt + " " + input + " -o " + (d / "b.png"));
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_EQ(lines(r.output), 1) << r.output;
    EXPECT_TRUE(contains(r.output, message)) << r.output;
    EXPECT_FALSE(contains(r.output, "skipping")) << r.output;
    EXPECT_FALSE(fs::exists(d / "b.png"));
  }
}

// --- 8b. stream: the options of audio streams are refused for a symbol model --------------

TEST(CliGuards, StreamRefusesAudioOptionsForASymbolModelNamingTheOption) {
  const std::string ckpt = shared_checkpoint();
  for (const std::string option : {"--rate 8000", "--channels 2", "--chunk-ms 20", "--format raw", "--long-form"}) {
    const std::string name = option.substr(0, option.find(' '));
    const CliResult r = run_cli("stream " + ckpt + " abc " + option);
    EXPECT_EQ(r.code, 1) << option << ": " << r.output;
    EXPECT_EQ(lines(r.output), 1) << option << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "mona: error: " + name + ": " + ckpt + " takes ")) << option << ": " << r.output;
    EXPECT_TRUE(contains(r.output, ", not audio")) << option << ": " << r.output;
    EXPECT_FALSE(contains(r.output, "read 1 'a'")) << "streamed before refusing: " << r.output;
  }
  // Without them the same input streams.
  const CliResult r = run_cli("stream " + ckpt + " abc");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "read 1 'a'")) << r.output;
}

// --- 8c. train without a dev set says so ---------------------------------------------------

TEST(CliGuards, TrainWithoutADevSetSaysSoInsteadOfASentinelErrorRate) {
  TempDir d;
  const std::string cfg = write_setup(d, "max_steps: 3, eval_every: 3");
  // With the dev set: its best token error rate.
  CliResult r = run_cli("train " + cfg);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string best = "; best dev token error rate ";
  const auto at = r.output.find(best);
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_GE(std::stod(r.output.substr(at + best.size())), 0.0) << r.output;
  // Without one (the same configuration less data.dev): no error rate, and no sentinel.
  std::string text = read_text(cfg);
  const std::string dev = ", dev: " + (d / "dev.tsv");
  ASSERT_TRUE(contains(text, dev)) << text;
  text.erase(text.find(dev), dev.size());
  { std::ofstream(d / "nodev.yaml") << text; }
  r = run_cli("train " + (d / "nodev.yaml") + " --overwrite");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "trained 3 steps in ")) << r.output;
  EXPECT_TRUE(contains(r.output, "; no dev set\nbest checkpoint: ")) << r.output;
  EXPECT_FALSE(contains(r.output, "e+300")) << r.output;
  EXPECT_FALSE(contains(r.output, "best dev token error rate")) << r.output;
}

// --- 9. errors blame the argument at fault ----------------------------------------------------

TEST(CliGuards, UnknownSubcommandIsNamedAndOverrideErrorsBlameTheSetArgument) {
  CliResult r = run_cli("bogus");
  EXPECT_EQ(lines(r.output), 1) << r.output;
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(contains(r.output, "mona: error: unknown subcommand 'bogus' (expected one of: train, eval, decode, "
                                 "stream, transcribe, plot)")) << r.output;
  r = run_cli("--threads 2 bogus abc");
  EXPECT_TRUE(contains(r.output, "unknown subcommand 'bogus'")) << r.output;
  r = run_cli("");
  EXPECT_TRUE(contains(r.output, "subcommand is required")) << r.output;

  TempDir d;
  const std::string cfg = write_setup(d);
  r = run_cli("train " + cfg + " --set train.bogus=3");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(lines(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "mona: error: --set train.bogus=3: unknown key \"train.bogus\"")) << r.output;
  EXPECT_FALSE(contains(r.output, cfg)) << "blames the file: " << r.output;
  r = run_cli("train " + cfg + " --set 'train.optimizer={learning_rate: 0.1, lr: 2}'");
  EXPECT_TRUE(contains(r.output, "mona: error: --set train.optimizer={learning_rate: 0.1, lr: 2}: unknown key "
                                 "\"train.optimizer.lr\"")) << r.output;
  r = run_cli("train " + cfg + " --set train.max_steps=many");
  EXPECT_TRUE(contains(r.output, "mona: error: --set train.max_steps=many: train.max_steps: cannot read")) << r.output;
  EXPECT_FALSE(fs::exists(d / "run"));
  // A mistake in the file still names the file.
  { std::ofstream(cfg, std::ios::app) << "decode: {beem: 3}\n"; }
  r = run_cli("train " + cfg + " --set train.max_steps=3");
  EXPECT_TRUE(contains(r.output, "mona: error: " + cfg + ": unknown key \"decode.beem\"")) << r.output;
}

// --- 12. a signal saves the run ------------------------------------------------------------------

pid_t spawn_cli(const std::vector<std::string>& args, const std::string& output_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t def;
  sigemptyset(&def);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &def);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> all{MONA_CLI};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, MONA_CLI, &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -1;
}

// Waits (at most 90 s) until `ready` holds; false on timeout.
template <class F>
bool wait_for(F&& ready) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// waitpid with a 90 s limit (then SIGKILL): the status.
int wait_exit(pid_t pid) {
  int status = 0;
  if (!wait_for([&] { return ::waitpid(pid, &status, WNOHANG) == pid; })) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "mona did not end within 90 s of the signal";
  }
  return status;
}

// Training steps logged so far (log_every 1).
int64_t logged_steps(const std::string& log) {
  const std::string text = read_text(log);
  return std::count(text.begin(), text.end(), '\n');
}

TEST(CliGuards, SignalSavesTheRunAndExitsNonZeroAndASecondSignalEndsAtOnce) {
  TempDir d;
  // No checkpoint before the end: whatever last.ckpt holds, the signal wrote it.
  const std::string cfg = write_setup(d, "max_steps: 1000000, eval_every: 1000000, log_every: 1");
  const std::vector<std::string> args{"train", cfg};
  pid_t pid = spawn_cli(args, d / "out1.txt");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for([&] { return logged_steps(d / "run/train.jsonl") >= 3; })) << read_text(d / "out1.txt");
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = wait_exit(pid);
  std::string out = read_text(d / "out1.txt");
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ": " << out;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << out;
  const auto saved = train::TrainedModel::load(d / "run/last.ckpt");
  EXPECT_GE(saved.step, 3);
  EXPECT_TRUE(contains(out, "mona: interrupted by SIGTERM at step " + std::to_string(saved.step) +
                                ": the run is saved in " + (d / "run/last.ckpt") + "; continue it")) << out;
  EXPECT_TRUE(contains(out, "--resume")) << out;
  const auto recs = records(d / "run/train.jsonl");
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs.back()["event"], "stopped");
  EXPECT_EQ(recs.back()["step"], saved.step);

  // Resumed, then two signals (SIGINT, SIGTERM) at once: the second ends it at once, by its
  // default action, and the checkpoint on disk is whole (the old one or a new one).
  pid = spawn_cli({"train", cfg, "--resume"}, d / "out2.txt");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for([&] { return logged_steps(d / "run/train.jsonl") >= static_cast<int64_t>(recs.size()) + 3; }))
      << read_text(d / "out2.txt");
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  status = wait_exit(pid);
  out = read_text(d / "out2.txt");
  ASSERT_TRUE(WIFSIGNALED(status)) << "exited with " << WEXITSTATUS(status) << ": " << out;
  EXPECT_TRUE(WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM) << WTERMSIG(status);
  EXPECT_FALSE(contains(out, "interrupted by")) << out;
  const int64_t kept = train::TrainedModel::load(d / "run/last.ckpt").step;
  EXPECT_GE(kept, saved.step);

  // The saved run continues.
  const CliResult r = run_cli("train " + cfg + " --resume --set train.max_steps=" + std::to_string(kept + 2) +
                        " --set train.eval_every=1");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(train::TrainedModel::load(d / "run/last.ckpt").step, kept + 2);
}

// --- 13. progress ------------------------------------------------------------------------------------

TEST(CliGuards, ProgressFollowsTheTimeBudgetAndEvaluationsShowProgress) {
  TempDir d;
  // 1.2 s of training out of at most 1,000,000 steps: the time budget ends first.
  const std::string cfg = write_setup(d, "max_steps: 1000000, max_minutes: 0.02, eval_every: 1000000");
  CliResult r = run_cli("train " + cfg);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "/1000000")) << r.output;
  EXPECT_TRUE(contains(r.output, "(100.0% of 0:00:01)  loss ")) << r.output;
  EXPECT_TRUE(contains(r.output, "ETA 0:00:00\n")) << r.output;
  // The dev evaluation at the end shows its own progress (plain lines: not a terminal).
  EXPECT_TRUE(contains(r.output, "\ndev eval (step ")) << r.output;
  EXPECT_TRUE(contains(r.output, " 8/8 (100.0%)  ")) << r.output;

  r = run_cli("eval " + shared_checkpoint() + " " + shared_dev() + " --json --beam 0");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "eval 1/8 (12.5%)  ")) << r.output;
  EXPECT_TRUE(contains(r.output, "eval 8/8 (100.0%)  ")) << r.output;
  EXPECT_TRUE(contains(r.output, " inputs/s  elapsed ")) << r.output;
}

}  // namespace
}  // namespace mona::test
