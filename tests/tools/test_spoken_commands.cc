// label: commands
// recipes/spoken-commands as a user runs it, on a handful of utterances: the corpus
// program writes the same files whatever its thread count, keeps a finished set as its
// cache, holds dev and test speakers out of training, makes the test lengths it is asked
// for, and lists the real recordings; then `mona train` on the corpus (the loss falls),
// `mona eval` of a test set, `mona stream --audio` of one of its WAVs and `mona plot`, with
// 003's EOS frame (p_eos) in the model.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "mona/audio/audio_file.h"
#include "mona/io/files.h"
#include "util/program.h"
#include "util/temp_dir.h"

namespace mona::test {
namespace {

namespace fs = std::filesystem;

ProgramRun make_corpus(const std::string& dir, const std::string& more) {
  return run_program(std::string(MONA_MAKE_SPOKEN_COMMANDS) + " --words " + MONA_SPOKEN_WORDS + " --out-dir " + dir +
                     " " + more);
}

std::vector<std::vector<std::string>> rows(const std::string& path) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(io::read_file(path));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::istringstream cells(line);
    for (std::string c; std::getline(cells, c, '\t');) f.push_back(c);
    out.push_back(f);
  }
  return out;
}

size_t word_count(const std::string& transcript) {
  std::istringstream in(transcript);
  size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

const char* kSets = "--train 6 --dev 3 --test 2 --test-lengths 3,12 --long 1 --long-seconds 15";

TEST(SpokenCommands, TheCorpusIsTheSameOnAnyThreadCountAndKeptAsACache) {
  TempDir d;
  auto r = make_corpus(d / "a", std::string(kSets) + " --seed 5 --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("train           6 utterances"), std::string::npos) << r.output;
  r = make_corpus(d / "b", std::string(kSets) + " --seed 5 --threads 1");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* set : {"train", "dev", "test-3", "test-12", "test-long"}) {
    const std::string name = set;
    const auto a = rows(d / ("a/" + name + ".tsv")), b = rows(d / ("b/" + name + ".tsv"));
    ASSERT_EQ(a, b) << set;
    EXPECT_EQ(rows(d / ("a/" + name + ".words.tsv")), rows(d / ("b/" + name + ".words.tsv"))) << set;
    for (const auto& row : a)
      EXPECT_EQ(io::read_file(d / ("a/" + row[0])), io::read_file(d / ("b/" + row[0]))) << row[0];
  }
  // Run again: every set is the cache, nothing is rewritten.
  const auto before = fs::last_write_time(d / "a/wav/train/000000.wav");
  r = make_corpus(d / "a", std::string(kSets) + " --seed 5 --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("train      cached"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("test-long  cached"), std::string::npos) << r.output;
  EXPECT_EQ(fs::last_write_time(d / "a/wav/train/000000.wav"), before);
  // Another seed is another corpus.
  r = make_corpus(d / "c", std::string(kSets) + " --seed 6 --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(rows(d / "a/train.tsv"), rows(d / "c/train.tsv"));
}

TEST(SpokenCommands, SetsHaveTheirLengthsAndSpeakersAndTheRealRecordingsAreListed) {
  TempDir d;
  const auto r = make_corpus(d.path(), std::string(kSets) + " --seed 7");
  ASSERT_EQ(r.code, 0) << r.output;
  std::map<std::string, std::string> split_of_speaker;
  for (const auto& row : rows(d / "voices.tsv")) split_of_speaker[row[1]] = row[2];
  const std::map<std::string, std::pair<size_t, size_t>> lengths = {
      {"train", {5, 9}}, {"dev", {5, 9}}, {"test-3", {3, 3}}, {"test-12", {12, 12}}};
  const std::map<std::string, std::string> split_of_set = {
      {"train", "train"}, {"dev", "dev"}, {"test-3", "test"}, {"test-12", "test"}, {"test-long", "test"}};
  for (const auto& [set, split] : split_of_set) {
    const auto manifest = rows(d / (set + ".tsv")), voices = rows(d / (set + ".voices.tsv"));
    ASSERT_EQ(manifest.size(), voices.size()) << set;
    std::map<std::string, size_t> words_listed;
    for (const auto& w : rows(d / (set + ".words.tsv"))) {
      ++words_listed[w[0]];
      EXPECT_LT(std::stod(w[2]), std::stod(w[3])) << set << " " << w[0] << " " << w[1];
    }
    for (size_t i = 0; i < manifest.size(); ++i) {
      const auto& [path, transcript] = std::make_pair(manifest[i][0], manifest[i][1]);
      EXPECT_EQ(voices[i][0], path);
      EXPECT_EQ(split_of_speaker.at(voices[i][2]), split) << set << ": " << voices[i][1];
      EXPECT_EQ(words_listed[path], word_count(transcript)) << path;
      const auto audio = audio::read_audio(d / path);
      EXPECT_EQ(audio.sample_rate, 16000);
      if (set == "test-long") {
        EXPECT_GE(audio.seconds(), 15.0 * 0.98) << path << " (sox's tempo rounds the length by a few ms)";
      } else {
        EXPECT_GE(word_count(transcript), lengths.at(set).first) << path;
        EXPECT_LE(word_count(transcript), lengths.at(set).second) << path;
      }
    }
  }
  const auto real = rows(d / "real.tsv");
  ASSERT_EQ(real.size(), 6u);  // five `cards` and goforward
  EXPECT_EQ(real.back()[1], "go forward ten meters");
  EXPECT_NEAR(audio::read_audio(d / "real-goforward.wav").seconds(), 89160 / 2 / 16000.0, 1e-9);
  EXPECT_EQ(real[4][1], "eight of spades four of clubs seven of hearts");
}

// Usage errors: one line in mona's style, exit code 2, before any voice is looked up.
TEST(SpokenCommands, BadArgumentsAreOneLineUsageErrors) {
  TempDir d;
  const struct {
    std::string args, expected;
  } cases[] = {
      {"--train -5", "mona-make-spoken-commands: error: --train: expected an integer in [0, 10000000], got -5"},
      {"--dev 1.5", "--dev: expected an integer in [0, 10000000], got 1.5"},
      {"--test-lengths 3,0", "--test-lengths: expected an integer >= 1, got 0"},
      {"--train-words 0,3", "--train-words: expected an integer >= 1, got 0"},
      {"--train-words 5,3", "mona-make-spoken-commands: error: --train-words: expected MIN <= MAX, got 5,3"},
      {"--long-seconds 0", "--long-seconds: expected a finite number > 0, got 0"},
      {"--threads 0", "--threads: expected an integer in [1, 256], got 0"},
      {"--seed -1", "--seed: expected an integer >= 0, got -1"},
      {"--train 100000000000", "--train: expected an integer in [0, 10000000], got 100000000000"},
      {"--bogus", "mona-make-spoken-commands: error: "},
  };
  for (const auto& c : cases) {
    const auto r = make_corpus(d / "out", c.args);
    EXPECT_EQ(r.code, 2) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.args << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << c.args << ": " << r.output;
    EXPECT_EQ(r.output.find("179769313486"), std::string::npos) << c.args << ": " << r.output;  // DBL_MAX's digits
    EXPECT_FALSE(fs::exists(d / "out")) << c.args;
  }
  // --words and --out-dir are required (but for --list-voices).
  const auto r = run_program(std::string(MONA_MAKE_SPOKEN_COMMANDS) + " --train 3");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("mona-make-spoken-commands: error: --words and --out-dir are required"), std::string::npos)
      << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

// The word list is checked where it stands, before anything is made: a word the
// synthesizers are not given as it is, or one listed twice, is refused with file:line. The
// real recordings with a word outside the list are named and left out.
TEST(SpokenCommands, TheWordListIsCheckedWhereItStandsAndTheRealRecordingsKeepToIt) {
  TempDir d;
  const auto corpus = [&](const std::string& words, const std::string& more) {
    io::write_file_atomic(d / "words.txt", words);
    return run_program(std::string(MONA_MAKE_SPOKEN_COMMANDS) + " --words " + (d / "words.txt") + " --out-dir " +
                       (d / "out") + " --dev 0 --test 0 --long 0 " + more);
  };
  auto r = corpus("yes no\nstop o'clock,\n", "--train 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("words.txt:2: word 'o'clock,' has characters other than letters, digits, ' and -"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(d / "out"));
  r = corpus("yes no\n\nstop yes\n", "--train 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("words.txt:3: word 'yes' is listed twice (first on line 1)"), std::string::npos)
      << r.output;
  // goforward's words only: the five `cards` recordings are left out, each named.
  r = corpus("go forward ten meters yes no\n", "--train 1");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto real = rows(d / "out/real.tsv");
  ASSERT_EQ(real.size(), 1u) << r.output;
  EXPECT_EQ(real[0][1], "go forward ten meters");
  EXPECT_NE(r.output.find("left out /usr/share/pocketsphinx/test/data/cards/001.wav: 'of', 'clubs' not in "),
            std::string::npos)
      << r.output;
  // No recording left: real.tsv is not written, and the one before is removed.
  r = corpus("yes no\n", "--train 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("real       skipped: no recording has only words of"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / "out/real.tsv"));
}

TEST(SpokenCommands, TrainEvalAndStreamOnTheCorpus) {
  TempDir d;
  auto r = make_corpus(d / "corpus",
                       "--seed 3 --train 48 --dev 4 --test 3 --test-lengths 3 --long 0 --train-words 1,2 --no-noise");
  ASSERT_EQ(r.code, 0) << r.output;
  {
    std::ofstream cfg(d / "smoke.yaml");
    cfg << "data: {train: " << (d / "corpus/train.tsv") << ", dev: " << (d / "corpus/dev.tsv") << "}\n"
        << "model: {input_kind: audio, features: {num_mel_bins: 20}, conv_channels: 4, encoder_layers: 2,\n"
        << "        encoder_hidden: 32, time_reduction_layers: 1, decoder_embedding_dim: 8, decoder_hidden: 32,\n"
        << "        attention: {type: mocha, monotonic_energy: dot, init_r: -1, chunk_size: 2}, p_eos: 0.5,\n"
        << "        ctc_weight: 0.1}\n"
        << "train: {output_dir: " << (d / "run") << ", batch_size: 8, max_steps: 60, eval_every: 60, log_every: 5,\n"
        << "        threads: 1, optimizer: {learning_rate: 0.01}}\n";
  }
  r = run_program(std::string(MONA_CLI) + " train " + (d / "smoke.yaml"));
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<double> losses, ctc;
  std::ifstream log(d / "run/train.jsonl");
  for (std::string line; std::getline(log, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] != "train") continue;
    losses.push_back(j["loss"].get<double>());
    if (j.contains("ctc")) ctc.push_back(j["ctc"].get<double>());
  }
  ASSERT_GE(losses.size(), 10u);
  // The auxiliary CTC term (model.ctc_weight) is logged with every record: a negative
  // log-likelihood per token, so positive.
  ASSERT_EQ(ctc.size(), losses.size());
  for (double v : ctc) EXPECT_GT(v, 0.0);
  // 60 steps learn at least the output's distribution (about 50 words, 1-2 per utterance):
  // the loss of the last record is below 3/4 of the first's (log(55) ~ 4 at the start).
  EXPECT_LT(losses.back(), 0.75 * losses.front()) << "first " << losses.front() << " last " << losses.back();
  r = run_program(std::string(MONA_CLI) + " eval " + (d / "run/last.ckpt") + " " + (d / "corpus/test-3.tsv"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("token error rate"), std::string::npos) << r.output;  // words: the WER
  // test-3.words.tsv lies beside the manifest: the emission delay after each recognised word
  // (io::emission_delays), over at most the set's 3 * 3 reference words (greedy: the latency is measured for it).
  r = run_program(std::string(MONA_CLI) + " eval " + (d / "run/last.ckpt") + " " + (d / "corpus/test-3.tsv") + " --beam 0 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto result = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  ASSERT_TRUE(result.contains("word_delay_words")) << r.output;
  EXPECT_LE(result["word_delay_words"].get<int64_t>(), 3 * 3) << r.output;
  // test-3.voices.tsv lies beside it too: per synthesizer, as many inputs as the file lists.
  std::map<std::string, int64_t> inputs_of_synthesizer;
  {
    std::ifstream voices(d / "corpus/test-3.voices.tsv");
    for (std::string line; std::getline(voices, line);) {
      const std::string voice = line.substr(line.find('\t') + 1);
      ++inputs_of_synthesizer[voice.substr(0, voice.find('/'))];
    }
  }
  ASSERT_TRUE(result.contains("by_voice_group")) << r.output;
  std::map<std::string, int64_t> reported;
  for (const auto& [group, g] : result["by_voice_group"].items()) {
    reported[group] = g["inputs"].get<int64_t>();
    EXPECT_GE(g["token_error_rate"].get<double>(), 0.0) << group;
  }
  EXPECT_EQ(reported, inputs_of_synthesizer) << r.output;
  // The real-time factor's audio: the frames cover each waveform to within one 10 ms shift.
  double audio_seconds = 0;
  {
    std::ifstream manifest(d / "corpus/test-3.tsv");
    for (std::string line; std::getline(manifest, line);) {
      audio_seconds += audio::read_audio((fs::path(d / "corpus") / line.substr(0, line.find('\t'))).string()).seconds();
    }
  }
  EXPECT_NEAR(result["audio_seconds"].get<double>(), audio_seconds, 3 * 0.010) << r.output;
  // A stream's real-time factor: the time spent on each input, summed, per second of audio.
  const double rtf = result["decode_seconds"].get<double>() / result["audio_seconds"].get<double>();
  EXPECT_NEAR(result["real_time_factor"].get<double>(), rtf, 1e-5 * rtf) << r.output;  // 6 digits printed
  // Three inputs at once (--threads 3; train::evaluate): every figure but the times is the
  // one-thread figure, word delays and voice groups included.
  const std::string one_at_a_time =
      std::string(MONA_CLI) + " --threads 1 eval " + (d / "run/last.ckpt") + " " + (d / "corpus/test-3.tsv") + " --beam 0 --json";
  r = run_program(one_at_a_time);
  ASSERT_EQ(r.code, 0) << r.output;
  auto one = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  r = run_program(std::string(MONA_CLI) + " --threads 3 eval " + (d / "run/last.ckpt") + " " + (d / "corpus/test-3.tsv") +
                  " --beam 0 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  auto three = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(one["threads"], 1);
  EXPECT_EQ(three["threads"], std::min<int64_t>(3, std::thread::hardware_concurrency()));  // clamped to the machine's
  for (auto* j : {&one, &three}) {
    for (const char* key : {"seconds", "decode_seconds", "inputs_per_second", "real_time_factor", "threads"}) j->erase(key);
  }
  EXPECT_EQ(three, one);
  // Inputs that cannot be read as audio, decoded in parallel: the first such input in the
  // manifest's order is named, whichever thread met which first.
  {
    std::ifstream in(d / "corpus/test-3.tsv");
    std::string first;
    std::getline(in, first);
    std::ofstream out(d / "corpus/broken.tsv");
    out << first << "\nnot-audio-1.wav\tyes no\n" << first << "\nnot-audio-2.wav\tup down\n" << first << "\n";
    std::ofstream(d / "corpus/not-audio-1.wav") << "not a WAV file\n";
    std::ofstream(d / "corpus/not-audio-2.wav") << "not a WAV file either\n";
  }
  r = run_program(std::string(MONA_CLI) + " --threads 2 eval " + (d / "run/last.ckpt") + " " + (d / "corpus/broken.tsv"));
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("not-audio-1.wav"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("not-audio-2.wav"), std::string::npos) << r.output;
  // A voice file that lacks one of the manifest's utterances is refused before decoding,
  // naming the file and the audio.
  fs::copy_file(d / "corpus/test-3.voices.tsv", d / "voices.bak");
  {
    std::ifstream in(d / "voices.bak");
    std::string first, rest, line;
    std::getline(in, first);
    while (std::getline(in, line)) rest += line + "\n";
    std::ofstream(d / "corpus/test-3.voices.tsv") << rest;
  }
  r = run_program(std::string(MONA_CLI) + " eval " + (d / "run/last.ckpt") + " " + (d / "corpus/test-3.tsv"));
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("test-3.voices.tsv: no voice for audio file "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("eval "), std::string::npos) << "decoded before refusing: " << r.output;
  fs::rename(d / "voices.bak", d / "corpus/test-3.voices.tsv");
  // So is a word-time file (read for greedy decoding) that lacks one of them: the file and
  // the audio are named, and nothing is decoded.
  fs::copy_file(d / "corpus/test-3.words.tsv", d / "words.bak");
  std::string first_audio;
  {
    std::ifstream manifest(d / "corpus/test-3.tsv");
    std::getline(manifest, first_audio);
    first_audio = first_audio.substr(0, first_audio.find('\t'));
    std::ifstream in(d / "words.bak");
    std::string kept;
    for (std::string line; std::getline(in, line);) {
      if (line.substr(0, line.find('\t')) != first_audio) kept += line + "\n";
    }
    std::ofstream(d / "corpus/test-3.words.tsv") << kept;
  }
  ASSERT_FALSE(first_audio.empty());
  r = run_program(std::string(MONA_CLI) + " eval " + (d / "run/last.ckpt") + " " + (d / "corpus/test-3.tsv") +
                  " --beam 0");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("mona: error: " + (d / "corpus/test-3.words.tsv") + ": no word times for audio file "),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find(first_audio), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("eval "), std::string::npos) << "decoded before refusing: " << r.output;
  // A listed word that is not the transcript's: the first that differs is named, before
  // decoding.
  {
    std::ifstream in(d / "words.bak");
    std::string changed, line;
    std::getline(in, line);  // the first audio file's first word
    const auto f1 = line.find('\t'), f2 = line.find('\t', f1 + 1);
    const std::string word = line.substr(f1 + 1, f2 - f1 - 1);
    changed = line.substr(0, f1 + 1) + "xyzzy" + line.substr(f2) + "\n";
    for (; std::getline(in, line);) changed += line + "\n";
    std::ofstream(d / "corpus/test-3.words.tsv") << changed;
    r = run_program(std::string(MONA_CLI) + " eval " + (d / "run/last.ckpt") + " " + (d / "corpus/test-3.tsv") +
                    " --beam 0");
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find("test-3.words.tsv: the words listed for "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(first_audio + " are not its transcript: word 1 is 'xyzzy' where the transcript has '" +
                            word + "'"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("eval "), std::string::npos) << "decoded before refusing: " << r.output;
  }
  fs::rename(d / "words.bak", d / "corpus/test-3.words.tsv");
  // A decode setting of the checkpoint overridden for evaluation (003's long-form rule for
  // this p_eos model); a model setting cannot be.
  r = run_program(std::string(MONA_CLI) + " eval " + (d / "run/last.ckpt") + " " + (d / "corpus/test-3.tsv") +
                  " --beam 0 --set decode.eos_only_at_last_entry=true");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("token error rate"), std::string::npos) << r.output;
  r = run_program(std::string(MONA_CLI) + " eval " + (d / "run/last.ckpt") + " " + (d / "corpus/test-3.tsv") +
                  " --set model.p_eos=0");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("--set model.p_eos=0: only decode.* settings can change after training"), std::string::npos)
      << r.output;
  r = run_program(std::string(MONA_CLI) + " stream " + (d / "run/last.ckpt") + " --audio " +
                  (d / "corpus/wav/test-3/000000.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("real-time factor"), std::string::npos) << r.output;
  // --long-form on a model with 003's EOS frame (decode.eos_only_at_last_entry, search tests).
  r = run_program(std::string(MONA_CLI) + " stream " + (d / "run/last.ckpt") + " --long-form --audio " +
                  (d / "corpus/wav/test-3/000000.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("real-time factor"), std::string::npos) << r.output;
  // The plots (the trainer's at its evaluation, and `mona plot`) label 003's EOS frame too:
  // one label per memory entry of the alignment.
  EXPECT_FALSE(fs::is_empty(d / "run/plots")) << "no plot written by the trainer";
  r = run_program(std::string(MONA_CLI) + " plot " + (d / "run/last.ckpt") + " " + (d / "corpus/wav/test-3/000000.wav") +
                  " -o " + (d / "a.png"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_GT(fs::file_size(d / "a.png"), 1000u);
}

}  // namespace
}  // namespace mona::test
