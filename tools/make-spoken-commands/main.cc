// mona-make-spoken-commands: a spoken-commands corpus in 003's protocol (papers/003, sec.
// 4.1, and a test-long set like that of sec. 4.2), synthesized with every English voice of
// espeak-ng, flite and festival (mona/audio/synthesis.h), plus the real recordings of
// Debian's pocketsphinx-testdata.
//
//   mona-make-spoken-commands --words recipes/spoken-commands/words.txt --out-dir DIR
//       [--seed N] [--train N] [--dev N] [--test N] [--test-lengths 3,7,10,15,20]
//       [--long N] [--long-seconds S] [--train-words MIN,MAX] [--threads N] [--no-noise]
//   mona-make-spoken-commands --list-voices
//
// Writes into DIR, per set (train, dev, test-<n> for each test length, test-long):
//   <set>.tsv        the manifest (mona/data/manifest.h): wav/<set>/<index>.wav<TAB>words
//   <set>.words.tsv  where each word is heard (audio::Utterance::word_times): path<TAB>word<TAB>start s<TAB>end s
//   <set>.voices.tsv who speaks: path<TAB>voice id<TAB>speaker
//   wav/<set>/       16 kHz 16-bit WAVs
//   <set>.stamp      the options the set was made with: a set whose stamp matches and whose
//                    manifest exists is kept as it is (the cache), any other is made afresh
// and voices.tsv (every voice: id, speaker, split) and real.tsv (pocketsphinx-testdata's
// `cards` WAVs and goforward.raw converted to real-goforward.wav), when those files exist,
// the recordings with a word outside --words left out and named.
// Sets: train from the train speakers, dev from the dev speakers (both min..max words of
// --train-words), test-<n> of exactly n words and test-long of at least --long-seconds,
// from the test speakers. Each utterance is a function of (--seed, set, index) and the
// options, so any --threads gives the same files.
// Prints the voices per split and, per set, utterances, words, hours and the time taken.
// Exit status: 0 on success, 1 on a data or file error, 2 on a usage error. Every error is
// one line on stderr: "mona-make-spoken-commands: error: ...".
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "mona/audio/audio_file.h"
#include "mona/audio/synthesis.h"
#include "mona/core/error.h"
#include "mona/io/files.h"
#include "../cli_validators.h"

namespace {

namespace fs = std::filesystem;
using mona::audio::VoiceSplit;

struct Set {
  std::string name;
  VoiceSplit split;
  int64_t count;
  int min_words, max_words;
  double min_seconds;
};

struct Args {
  std::string words_file, out_dir;
  uint64_t seed = 1;
  int64_t train = 4000, dev = 500, test = 500, long_count = 50;
  std::vector<int> test_lengths = {3, 7, 10, 15, 20};
  std::vector<int> train_words = {5, 9};
  double long_seconds = 50;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool no_noise = false, list_voices = false;
};

// The vocabulary, each word checked where it stands (file:line), before any set is made:
// a word the synthesizers are not given as it is, or a word listed twice (it would be drawn
// twice as often), is refused.
std::vector<std::string> read_words(const std::string& path) {
  std::istringstream in(mona::io::read_file(path));
  std::vector<std::string> words;
  std::map<std::string, int> first_line;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    std::istringstream f(line);
    for (std::string w; f >> w;) {
      mona::detail::check_data(mona::audio::is_synthesizable_word(w), path, ":", n, ": word '", w,
                               "' has characters other than letters, digits, ' and -");
      const auto [at, fresh] = first_line.emplace(w, n);
      mona::detail::check_data(fresh, path, ":", n, ": word '", w, "' is listed twice (first on line ",
                               at->second, ")");
      words.push_back(w);
    }
  }
  mona::detail::check_data(!words.empty(), path, ": no words");
  return words;
}

std::string stamp_of(const Args& a, const Set& s, const mona::audio::UtteranceOptions& o,
                     const std::vector<std::string>& words, size_t voices) {
  std::ostringstream st;
  st << "seed " << a.seed << "\ncount " << s.count << "\nwords " << s.min_words << " " << s.max_words << " "
     << s.min_seconds << "\nvoices " << voices << "\n";
  // Every option of the utterances; "format" changes when the rendering does (2: word
  // times where the word is heard, audio::kAudibleBelowPeakDb).
  auto range = [&](const char* k, const std::pair<double, double>& r) { st << k << " " << r.first << " " << r.second << "\n"; };
  st << "format 2\nsample_rate " << o.sample_rate << "\nclip_seconds " << o.clip_seconds << "\nadd_noise " << o.add_noise
     << "\n";
  range("crop_seconds", o.crop_seconds);
  range("rate", o.rate);
  range("tempo", o.tempo);
  range("pitch_cents", o.pitch_cents);
  range("gain_db", o.gain_db);
  range("snr_db", o.snr_db);
  range("noise_pole", o.noise_pole);
  st << "vocabulary";
  for (const auto& w : words) st << " " << w;
  st << "\n";
  return st.str();
}

// Makes one set with `threads` workers, each with its own work directory.
void make_set(const Args& a, const Set& s, const std::vector<mona::audio::Voice>& voices,
              const std::vector<std::string>& words, const mona::audio::UtteranceOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string stamp = stamp_of(a, s, o, words, voices.size());
  const fs::path dir = fs::path(a.out_dir), manifest = dir / (s.name + ".tsv"), stamp_path = dir / (s.name + ".stamp");
  if (fs::exists(manifest) && fs::exists(dir / (s.name + ".words.tsv")) && fs::exists(dir / (s.name + ".voices.tsv")) &&
      fs::exists(stamp_path) && mona::io::read_file(stamp_path) == stamp) {
    std::printf("%-10s cached (%s)\n", s.name.c_str(), manifest.c_str());
    return;
  }
  // The set is made afresh: its manifests go with the stamp, so that a run stopped while the
  // WAVs are rewritten leaves no manifest that names them with the old transcripts.
  for (const char* suffix : {".stamp", ".tsv", ".words.tsv", ".voices.tsv"}) fs::remove(dir / (s.name + suffix));
  fs::create_directories(dir / "wav" / s.name);
  std::vector<std::string> lines(static_cast<size_t>(s.count)), times(lines.size()), speakers(lines.size());
  std::vector<double> seconds(static_cast<size_t>(s.count));
  std::vector<size_t> n_words(static_cast<size_t>(s.count));
  std::atomic<int64_t> next{0};
  std::mutex failure_mutex;
  std::string failure;
  auto work = [&]() {
    char tmpl[] = "/tmp/mona-spoken-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      failure = "cannot create a work directory under /tmp";
      return;
    }
    try {
      for (int64_t i; (i = next++) < s.count;) {
        {
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (!failure.empty()) break;
        }
        const auto plan = mona::audio::plan_utterance(mona::audio::utterance_seed(a.seed, s.name, static_cast<uint64_t>(i)),
                                                      voices, words, s.min_words, s.max_words, s.min_seconds, o);
        const auto u = mona::audio::render_utterance(plan, o, tmpl);
        char name[32];
        std::snprintf(name, sizeof name, "%06lld.wav", static_cast<long long>(i));
        const std::string rel = "wav/" + s.name + "/" + name;
        mona::audio::write_wav((dir / rel).string(), u.audio.samples, u.audio.sample_rate);
        std::string line = rel + "\t", t;
        for (size_t k = 0; k < plan.words.size(); ++k) {
          line += (k ? " " : "") + plan.words[k];
          char buf[64];
          std::snprintf(buf, sizeof buf, "\t%.3f\t%.3f\n", u.word_times[k].first, u.word_times[k].second);
          t += rel + "\t" + plan.words[k] + buf;
        }
        lines[static_cast<size_t>(i)] = line + "\n";
        times[static_cast<size_t>(i)] = t;
        speakers[static_cast<size_t>(i)] = rel + "\t" + plan.voice.id() + "\t" + plan.voice.speaker + "\n";
        seconds[static_cast<size_t>(i)] = u.audio.seconds();
        n_words[static_cast<size_t>(i)] = plan.words.size();
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (failure.empty()) failure = e.what();
    }
    fs::remove_all(tmpl);
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, a.threads); ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  mona::detail::check_data(failure.empty(), "set ", s.name, ": ", failure);
  std::string all_lines, all_times, all_speakers;
  double total = 0, longest = 0;
  size_t total_words = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    all_lines += lines[i];
    all_times += times[i];
    all_speakers += speakers[i];
    total += seconds[i];
    longest = std::max(longest, seconds[i]);
    total_words += n_words[i];
  }
  mona::io::write_files_atomic({{manifest.string(), all_lines},
                                {(dir / (s.name + ".words.tsv")).string(), all_times},
                                {(dir / (s.name + ".voices.tsv")).string(), all_speakers},
                                {stamp_path.string(), stamp}});
  std::printf("%-10s %6lld utterances, %7zu words, %7.2f hours (longest %.1f s), %.0f s to make\n", s.name.c_str(),
              static_cast<long long>(s.count), total_words, total / 3600, longest,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::fflush(stdout);
}

// pocketsphinx-testdata's recordings whose words are all in `words`: the five `cards` WAVs
// (by absolute path) and goforward.raw (16 kHz s16le, written as real-goforward.wav). The
// others are named and left out; with none left, real.tsv is not written (an earlier one is
// removed).
void write_real(const Args& a, const std::vector<std::string>& words) {
  const fs::path data = "/usr/share/pocketsphinx/test/data";
  const fs::path transcription = data / "cards" / "cards.transcription";
  if (!fs::exists(transcription)) {
    std::printf("real       skipped: %s not found (Debian package pocketsphinx-testdata)\n", transcription.c_str());
    return;
  }
  std::string manifest;
  std::istringstream in(mona::io::read_file(transcription));
  for (std::string line; std::getline(in, line);) {  // "<s> ten of clubs  </s> (001)"
    std::istringstream f(line);
    std::string text;
    for (std::string w; f >> w;) {
      if (w == "<s>" || w == "</s>") continue;
      if (w.front() == '(') {
        manifest += (data / "cards" / (w.substr(1, w.size() - 2) + ".wav")).string() + "\t" + text + "\n";
        break;
      }
      text += (text.empty() ? "" : " ") + w;
    }
  }
  if (fs::exists(data / "goforward.raw")) {
    const auto w = mona::audio::read_pcm_s16le((data / "goforward.raw").string(), 16000, 1);
    mona::audio::write_wav((fs::path(a.out_dir) / "real-goforward.wav").string(), w.samples, w.sample_rate);
    manifest += "real-goforward.wav\tgo forward ten meters\n";
  }
  std::istringstream all(manifest);
  std::string kept;
  for (std::string line; std::getline(all, line);) {
    const std::string path = line.substr(0, line.find('\t'));
    std::istringstream f(line.substr(line.find('\t') + 1));
    std::string missing;
    for (std::string w; f >> w;) {
      if (std::find(words.begin(), words.end(), w) == words.end()) missing += (missing.empty() ? "'" : ", '") + w + "'";
    }
    if (missing.empty()) {
      kept += line + "\n";
    } else {
      std::printf("real       left out %s: %s not in %s\n", path.c_str(), missing.c_str(), a.words_file.c_str());
    }
  }
  const fs::path real = fs::path(a.out_dir) / "real.tsv";
  if (kept.empty()) {
    fs::remove(real);
    std::printf("real       skipped: no recording has only words of %s\n", a.words_file.c_str());
    return;
  }
  mona::io::write_file_atomic(real.string(), kept);
  std::printf("real       %s (pocketsphinx-testdata: cards, goforward)\n", real.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"mona-make-spoken-commands: a spoken-commands corpus from Debian's voices (003's protocol)"};
  app.add_option("--words", a.words_file, "the vocabulary: a text file of words (whitespace-separated)")
      ->check(CLI::ExistingFile);
  app.add_option("--out-dir", a.out_dir, "where the manifests and WAVs go (created if missing)");
  // Numbers: the validators of mona's programs (tools/cli_validators.h), whose errors read
  // "--seed: expected an integer >= 0, got -1".
  using mona::tools::integer_in;
  using mona::tools::number_above;
  app.add_option("--seed", a.seed, "the seed every utterance is drawn from")->check(integer_in(0));
  // At most kMaxUtterances per set: about 8,000 hours of audio at 3 s each, far beyond
  // what the synthesizers make in a day; more only ran out of memory for the set's lines.
  constexpr int64_t kMaxUtterances = 10000000;
  app.add_option("--train", a.train, "training utterances")->check(integer_in(0, kMaxUtterances));
  app.add_option("--dev", a.dev, "dev utterances (held-out dev speakers, the training lengths)")
      ->check(integer_in(0, kMaxUtterances));
  app.add_option("--test", a.test, "utterances per test length (held-out test speakers)")
      ->check(integer_in(0, kMaxUtterances));
  app.add_option("--test-lengths", a.test_lengths, "the words per utterance of the test sets")
      ->delimiter(',')
      ->check(integer_in(1));
  app.add_option("--long", a.long_count, "test-long utterances")->check(integer_in(0, kMaxUtterances));
  app.add_option("--long-seconds", a.long_seconds, "the least duration of a test-long utterance")
      ->check(number_above(0, false));
  app.add_option("--train-words", a.train_words, "MIN,MAX words per train and dev utterance")
      ->delimiter(',')
      ->expected(2)
      ->check(integer_in(1));
  app.add_option("--threads", a.threads, "utterances made at once")->check(integer_in(1, 256));
  app.add_flag("--no-noise", a.no_noise, "add no noise");
  app.add_flag("--list-voices", a.list_voices, "print every voice (id, speaker, split) and exit");
  // A usage error: one line in mona's style and exit code 2 (as mona-cb-toy).
  auto usage_error = [](const std::string& what) {
    std::cerr << "mona-make-spoken-commands: error: " << what.substr(0, what.find('\n'))
              << " (see mona-make-spoken-commands --help)\n";
    return 2;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  // Before the voices are listed (which prints notices), so that the error is all there is.
  if (!a.list_voices && (a.words_file.empty() || a.out_dir.empty())) {
    return usage_error("--words and --out-dir are required");
  }
  if (a.train_words[0] > a.train_words[1]) {
    return usage_error("--train-words: expected MIN <= MAX, got " + std::to_string(a.train_words[0]) + "," +
                       std::to_string(a.train_words[1]));
  }

  try {
    std::vector<std::string> missing;
    const auto voices = mona::audio::english_voices(&missing);
    // On stderr: stdout is the voice table with --list-voices.
    for (const auto& m : missing) std::fprintf(stderr, "voices: %s is not installed: no voices from it\n", m.c_str());
    std::string table;
    for (const auto& v : voices)
      table += v.id() + "\t" + v.speaker + "\t" + mona::audio::split_name(mona::audio::voice_split(v)) + "\n";
    if (a.list_voices) {
      std::fputs(table.c_str(), stdout);
      return 0;
    }
    const auto words = read_words(a.words_file);
    fs::create_directories(a.out_dir);
    mona::io::write_file_atomic((fs::path(a.out_dir) / "voices.tsv").string(), table);
    mona::audio::UtteranceOptions o;
    o.add_noise = !a.no_noise;
    std::map<VoiceSplit, std::vector<mona::audio::Voice>> by_split;
    for (auto s : {VoiceSplit::train, VoiceSplit::dev, VoiceSplit::test}) {
      by_split[s] = mona::audio::voices_of(voices, s);
      std::map<std::string, int> per;
      for (const auto& v : by_split[s]) ++per[mona::audio::synthesizer_name(v.synthesizer)];
      std::printf("voices %-5s", mona::audio::split_name(s));
      for (const auto& [k, n] : per) std::printf(" %s %d", k.c_str(), n);
      std::printf("\n");
      mona::detail::check_data(!by_split[s].empty(), "no ", mona::audio::split_name(s),
                               " voices: install espeak-ng, flite or festival");
    }
    std::vector<Set> sets = {{"train", VoiceSplit::train, a.train, a.train_words[0], a.train_words[1], 0},
                             {"dev", VoiceSplit::dev, a.dev, a.train_words[0], a.train_words[1], 0}};
    for (int n : a.test_lengths) sets.push_back({"test-" + std::to_string(n), VoiceSplit::test, a.test, n, n, 0});
    sets.push_back({"test-long", VoiceSplit::test, a.long_count, 1, 1, a.long_seconds});
    for (const auto& s : sets)
      if (s.count > 0) make_set(a, s, by_split[s.split], words, o);
    write_real(a, words);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::cerr << "mona-make-spoken-commands: error: " << what.substr(0, what.find('\n')) << "\n";
    return 1;
  }
  return 0;
}
