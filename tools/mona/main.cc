// mona: the command-line program. Subcommands: train, eval, decode, stream, transcribe, plot.
// Every error is one line on stderr ("mona: error: ...") and a non-zero exit code.
//
// Layout: helpers; the stop signals of `mona train`; the options before the subcommand
// (--threads); then one section per subcommand: its arguments (XArgs), add_x() registering
// them with CLI11, and run_x() doing the work and returning the exit code; main() parses
// and dispatches. Exit codes: 0 done; 1 an error (mona::ArgumentError, mona::DataError or
// any other exception, printed as one line "mona: error: ..."), output that could not be
// written, or inputs that decode and stream skipped (each named on stderr; the others are
// decoded); 2 a command line that cannot be parsed; 128 + the signal number for a training
// run stopped by SIGINT / SIGTERM.
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <torch/torch.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "mona/audio/audio_file.h"
#include "mona/core/error.h"
#include "mona/stream/incremental.h"
#include "mona/stream/stream.h"
#include "mona/io/log.h"
#include "mona/io/plot.h"
#include "mona/nn/threads.h"
#include "mona/train/trainer.h"
#include "../cli_validators.h"

namespace {

using mona::train::TrainedModel;

// ---------------------------------------------------------------------------------------
// Helpers: reading inputs (decode, stream, plot), search options, messages

std::string join(const std::vector<std::string>& v, const char* sep = " ") {
  std::string s;
  for (size_t k = 0; k < v.size(); ++k) s += (k ? sep : "") + v[k];
  return s;
}

// Input tokens of one line: whitespace-separated tokens if the line has whitespace
// ("h e l l o"), else its characters ("hello"), unless --split says otherwise. Characters
// are UTF-8 code points ("é" is one token, so a notice names it whole); a byte that does
// not start a valid UTF-8 sequence is a token of its own, shown as \xHH.
std::vector<std::string> split_input(const std::string& line, const std::string& mode) {
  const bool spaces = mode == "spaces" || (mode == "auto" && line.find_first_of(" \t") != std::string::npos);
  if (spaces) return mona::data::tokenize(line);
  std::vector<std::string> out;
  for (size_t k = 0; k < line.size();) {
    const auto lead = static_cast<unsigned char>(line[k]);
    const size_t len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    bool valid = len > 0 && k + len <= line.size();
    for (size_t c = 1; valid && c < len; ++c) valid = (static_cast<unsigned char>(line[k + c]) & 0xC0) == 0x80;
    if (!valid) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", lead);
      out.emplace_back(hex);
      ++k;
      continue;
    }
    if (!(len == 1 && std::isspace(lead))) out.push_back(line.substr(k, len));
    k += len;
  }
  return out;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// "'a', 'b'": symbols as notices and errors name them.
std::string quoted_list(const std::vector<std::string>& symbols) {
  std::vector<std::string> quoted;
  for (const auto& u : symbols) quoted.push_back("'" + u + "'");
  return join(quoted, ", ");
}

// How many of `sequences` hold symbols outside `vocab`, and the first five distinct ones
// quoted ("'x', 'y', ..."): eval's notices of inputs and references it cannot take as given.
struct OutsideVocabulary {
  int64_t sequences = 0;
  std::string examples;
};
OutsideVocabulary outside_vocabulary(const mona::data::Vocabulary& vocab,
                                     const std::vector<const std::vector<std::string>*>& sequences) {
  OutsideVocabulary out;
  std::vector<std::string> first;
  for (const auto* sequence : sequences) {
    const auto unknown = vocab.unknown_symbols(*sequence);
    out.sequences += unknown.empty() ? 0 : 1;
    for (const auto& u : unknown) {
      if (first.size() < 5 && std::find(first.begin(), first.end(), u) == first.end()) first.push_back(u);
    }
  }
  out.examples = quoted_list(first) + (first.size() == 5 ? ", ..." : "");
  return out;
}

// The distinct symbols of `tokens` that are the markers <pad>, <s>, </s> (data/tokens.h):
// the model places them itself (an input </s> would end the input there), so no input or
// reference may hold one (nn::Encoder refuses their ids). <unk> is not among them.
std::vector<std::string> markers_in(const std::vector<std::string>& tokens) {
  std::vector<std::string> found;
  for (const auto& token : tokens) {
    for (int64_t id = 0; id < mona::data::kUnk; ++id) {
      if (token == mona::data::kReservedSymbols[id] && std::find(found.begin(), found.end(), token) == found.end()) {
        found.push_back(token);
      }
    }
  }
  return found;
}

// Encodes a line; on symbols outside the model's input vocabulary, or markers, prints one
// notice naming them and the line, returns false (the caller goes on with the next line).
bool encode_line(const TrainedModel& t, const std::string& line, const std::string& split,
                 std::vector<std::string>& tokens, std::vector<int64_t>& ids) {
  tokens = split_input(line, split);
  const auto unknown = t.input_vocab.unknown_symbols(tokens);
  const auto markers = markers_in(tokens);
  if (!unknown.empty() || !markers.empty()) {
    std::cerr << "mona: skipping \"" << line << "\": "
              << (unknown.empty() ? "" : "symbols outside the model's input vocabulary: " + quoted_list(unknown))
              << (unknown.empty() || markers.empty() ? "" : "; ")
              << (markers.empty() ? "" : "markers the model places itself: " + quoted_list(markers)) << "\n";
    return false;
  }
  ids = t.input_vocab.encode(tokens);
  return true;
}

// Output that could not be written (a full disk, /dev/full) is an error: a result cut short
// with exit code 0 would pass for a whole one. Flushes stdout (std::cout and C stdio) first.
void check_stdout() {
  std::cout.flush();
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (failed) throw mona::DataError(std::string("standard output: write failed: ") + std::strerror(errno));
}

// UTF-8's byte-order mark, which some editors put at the start of a text file: not a symbol.
void strip_byte_order_mark(std::string& line) {
  if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
}

// Reads input lines: the positional arguments, or stdin for none or "-".
template <class F>
void for_each_input(const std::vector<std::string>& args, F&& f) {
  // `where`: "line 3" of stdin, or "argument 3".
  auto handle = [&](const std::string& raw, const std::string& where) {
    const std::string line = trim(raw);
    if (line.empty()) {
      std::cerr << "mona: skipping empty input (" << where << ")\n";
      return;
    }
    f(line);
  };
  if (args.empty() || (args.size() == 1 && args[0] == "-")) {
    std::string line;
    int64_t n = 0;
    while (std::getline(std::cin, line)) {
      if (n == 0) strip_byte_order_mark(line);
      handle(line, "line " + std::to_string(++n));
    }
    // std::cin reads through C stdio (synchronised): a read error (a closed descriptor, a
    // directory) is no end of input.
    if (std::ferror(stdin)) throw mona::DataError(std::string("standard input: read failed: ") + std::strerror(errno));
  } else {
    int64_t n = 0;
    for (const auto& a : args) handle(a, "argument " + std::to_string(++n));
  }
}

mona::nn::SearchOptions search_options(const TrainedModel& t, int64_t beam) {
  mona::nn::SearchOptions s = t.config.decode;
  if (beam >= 0) s.beam = beam;
  return s;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// Options that count something (--beam, --limit): integers >= 0.
const CLI::Validator kNonNegative = mona::tools::integer_in(0);

const char* const kSplitHelp = "input tokens: auto | chars | spaces";
const auto kSplitModes = CLI::IsMember({"auto", "chars", "spaces"});

// ---------------------------------------------------------------------------------------
// Stop signals of mona train
//
// SIGINT / SIGTERM during training: the first asks the trainer to save last.ckpt and stop
// (it polls the flag between steps); the handler then restores the default action, so a
// second signal ends the process at once. Two signals may reach two threads' handlers at
// the same moment, so "first" is decided by an atomic exchange, and a handler that comes
// second ends the process itself (default action, raised again). A signal ignored when
// mona started (e.g. SIGINT for a background job of a script) stays ignored.
volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_handled_int = 0, g_handled_term = 0;
std::atomic<int> g_stopping{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_stop_signal(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  if (g_stopping.exchange(1) != 0) {  // not the first: end now, as the default action does
    sigaction(sig, &dfl, nullptr);
    ::raise(sig);
    return;
  }
  g_stop_signal = sig;
  static const char msg[] =
      "\nmona: stopping: saving the run after this step (signal again to end at once)\n";
  const ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  if (g_handled_int) sigaction(SIGINT, &dfl, nullptr);
  if (g_handled_term) sigaction(SIGTERM, &dfl, nullptr);
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    (sig == SIGINT ? g_handled_int : g_handled_term) = 1;
    sigaction(sig, &sa, nullptr);
  }
}

const char* signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

// ---------------------------------------------------------------------------------------
// mona [--threads N] SUBCOMMAND: the program's own options (before or after the subcommand)

struct GlobalArgs {
  int64_t threads = 0;
  CLI::Option* threads_opt = nullptr;
};

void add_global(CLI::App& app, GlobalArgs& a) {
  a.threads_opt = app.add_option(
      "--threads", a.threads,
      "threads, >= 1: training trains that many shards of each batch in parallel, eval decodes "
      "that many inputs at once, decode, stream and transcribe run operators on that many; more than "
      "the machine's hardware threads are clamped to them (default: the config's train.threads for "
      "training, 2 for eval, 1 otherwise)")
      ->check(mona::tools::integer_in(1));  // a bad count is a usage error (exit 2), as --beam -1 is
}

// --threads when given (clamped to the machine's, with a notice on stderr); 0 when not given.
int64_t requested_threads(const GlobalArgs& a) {
  if (a.threads_opt->count() == 0) return 0;
  return mona::train::usable_threads(a.threads, "--threads", &std::cerr);
}

// ---------------------------------------------------------------------------------------
// mona train CONFIG [--set key=value]... [--resume | --overwrite]

struct TrainArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  bool resume = false, overwrite = false;
};

CLI::App* add_train(CLI::App& app, TrainArgs& a) {
  auto* cmd = app.add_subcommand("train", "train a model from a YAML configuration");
  cmd->add_option("CONFIG", a.config_path, "YAML configuration file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", a.overrides, "override a setting: key.path=value (repeatable)");
  auto* resume_opt = cmd->add_flag(
      "--resume", a.resume, "continue from OUTPUT_DIR/last.ckpt (the model options must be the checkpoint's)");
  cmd->add_flag("--overwrite", a.overwrite,
                "start afresh in an OUTPUT_DIR that holds a run, replacing its checkpoints, log and plots "
                "(without it, or --resume, such a directory is refused)")
      ->excludes(resume_opt);
  return cmd;
}

// `threads`: --threads (0: the configuration's train.threads).
int run_train(const TrainArgs& a, int64_t threads) {
  mona::train::Config c = mona::train::load_config(a.config_path, a.overrides);
  if (threads > 0) c.train.threads = threads;
  mona::train::Trainer trainer(c);
  mona::train::RunOptions options;
  options.resume = a.resume;
  options.overwrite = a.overwrite;
  options.progress_is_tty = mona::io::Progress::stderr_is_tty();
  options.stop = &g_stop_signal;
  install_stop_handlers();
  const auto r = trainer.run(options, std::cerr);
  if (r.stopped != 0) {
    std::cerr << "mona: interrupted by " << signal_name(r.stopped) << " at step " << r.steps
              << ": the run is saved in " << r.last_checkpoint
              << "; continue it with the same command and --resume\n";
    return 128 + r.stopped;
  }
  std::ostringstream best;  // best_token_error_rate is empty when there was no dev set
  if (r.best_token_error_rate) {
    best << "best dev token error rate " << *r.best_token_error_rate;
  } else {
    best << "no dev set";
  }
  std::cout << "trained " << r.steps << " steps in " << r.minutes << " min"
            << (r.early_stopped ? " (early stop)" : "") << "; " << best.str()
            << "\nbest checkpoint: " << r.best_checkpoint
            << "\nlast checkpoint: " << r.last_checkpoint << "\n";
  return 0;
}

// ---------------------------------------------------------------------------------------
// mona eval CHECKPOINT DATA [--beam N] [--limit N] [--expected] [--json]

struct EvalArgs {
  std::string checkpoint, data_path;
  int64_t beam = -1, limit = 0;
  bool expected = false, as_json = false;
  std::vector<std::string> overrides;  // decode.* only
};

CLI::App* add_eval(CLI::App& app, EvalArgs& a) {
  auto* cmd = app.add_subcommand("eval", "decode a TSV file (audio models: a manifest) and report token/sequence error rates and, for greedy online decoding, the streaming latency (average proportion, average lagging; for a manifest X.tsv with word times X.words.tsv beside it, the emission delay after each word's end in ms; with voices X.voices.tsv beside it, the error rate per voice group)");
  cmd->add_option("CHECKPOINT", a.checkpoint, "checkpoint file")->required()->check(CLI::ExistingFile);
  cmd->add_option("DATA", a.data_path, "TSV file: input tokens <TAB> output tokens; for an audio model a manifest: audio path <TAB> transcript")->required()->check(CLI::ExistingFile);
  cmd->add_option("--beam", a.beam, "beam width (0: greedy; default: the checkpoint's decode.beam)")->check(kNonNegative);
  cmd->add_option("--limit", a.limit, "decode at most N inputs (0: all)")->check(kNonNegative);
  cmd->add_flag("--expected", a.expected, "decode with the soft expected alignment instead of hard online attention");
  cmd->add_flag("--json", a.as_json, "print one JSON object");
  cmd->add_option("--set", a.overrides,
                  "override a decode setting of the checkpoint: decode.key=value (repeatable), e.g. "
                  "decode.eos_only_at_last_entry=false");
  return cmd;
}

// `threads`: inputs decoded at once (train::evaluate).
int run_eval(const EvalArgs& a, int64_t threads) {
  TrainedModel t = TrainedModel::load(a.checkpoint);
  t.config = mona::train::with_decode_overrides(t.config, a.overrides, a.checkpoint + ":config");
  const auto sets = mona::data::group_references(mona::train::read_examples(t.config, a.data_path));
  mona::detail::check(!sets.empty(), "DATA: ", a.data_path, " holds no examples (expected lines ",
                      t.takes_audio() ? "\"audio path<TAB>transcript\")" : "\"input tokens<TAB>output tokens\")");
  if (!t.takes_audio()) {  // decoded with <unk> in their place (TrainedModel::input_tensor): said, not hidden
    std::vector<const std::vector<std::string>*> inputs;
    for (const auto& set : sets) inputs.push_back(&set.input);
    const OutsideVocabulary o = outside_vocabulary(t.input_vocab, inputs);
    if (o.sequences > 0) {
      std::cerr << "mona: eval: " << o.sequences << " of " << sets.size() << " inputs of " << a.data_path
                << " hold symbols outside the model's input vocabulary (" << o.examples
                << "); they are decoded with <unk> in their place\n";
    }
  }
  const auto search = search_options(t, a.beam);
  mona::train::EvalProgress shown;  // on stderr: stdout holds the result
  shown.out = &std::cerr;
  shown.is_tty = mona::io::Progress::stderr_is_tty();
  // latency is measured for greedy online decoding only (see EvalResult::latency)
  const bool greedy_online = !a.expected && search.beam == 0;
  // Word times (mona/data/manifest.h) beside an audio manifest: the emission delay after each word.
  const std::string times_path = t.takes_audio() && greedy_online ? mona::data::word_times_path(a.data_path) : "";
  const mona::data::WordTimes word_times = times_path.empty() ? mona::data::WordTimes{} : mona::data::read_word_times(times_path);
  // Voices (mona/data/manifest.h) beside an audio manifest: the error rates per voice group.
  const std::string voices_path = t.takes_audio() ? mona::data::voices_path(a.data_path) : "";
  const mona::data::VoiceGroups groups = voices_path.empty() ? mona::data::VoiceGroups{} : mona::data::read_voice_groups(voices_path);
  // Both side files are checked against the manifest before decoding, so that a bad file
  // costs nothing: every utterance needs its word times and its voice.
  for (const auto& set : sets) {
    mona::detail::check_data(times_path.empty() || word_times.count(set.input.at(0)) == 1, times_path,
                             ": no word times for audio file ", set.input.at(0));
    if (!times_path.empty()) {  // the words listed are the transcript's, in its order
      const auto& listed = word_times.at(set.input.at(0));
      const auto& transcript = set.references.at(0);
      size_t k = 0;
      while (k < listed.size() && k < transcript.size() && listed[k].word == transcript[k]) ++k;
      mona::detail::check_data(k == listed.size() && k == transcript.size(), times_path, ": the words listed for ",
                               set.input.at(0), " are not its transcript: word ", k + 1, " is ",
                               k < listed.size() ? "'" + listed[k].word + "'" : std::string("missing"),
                               " where the transcript has ",
                               k < transcript.size() ? "'" + transcript[k] + "'" : std::string("none"));
    }
    mona::detail::check_data(voices_path.empty() || groups.count(set.input.at(0)) == 1, voices_path,
                             ": no voice for audio file ", set.input.at(0));
  }
  {  // references the model cannot produce (said once the side files passed their checks):
     // they count as errors whatever it decodes
    std::vector<const std::vector<std::string>*> references;
    for (const auto& set : sets) {
      for (const auto& reference : set.references) references.push_back(&reference);
    }
    const OutsideVocabulary o = outside_vocabulary(t.output_vocab, references);
    if (o.sequences > 0) {
      std::cerr << "mona: eval: " << o.sequences << " of " << references.size() << " references of " << a.data_path
                << " hold tokens outside the model's output vocabulary (" << o.examples
                << "); the model cannot emit them, so they count as errors\n";
    }
  }
  const auto r = mona::train::evaluate(t, sets, search, a.expected, a.limit, shown,
                                       times_path.empty() ? nullptr : &word_times, threads);
  std::map<std::string, mona::io::ErrorCounts> by_group;
  if (!voices_path.empty()) {
    for (const auto& s : r.scored) by_group[groups.at(sets[s.set_index].input.at(0))].add(s.counts);
  }
  if (a.as_json) {
    std::cout << "{\"inputs\": " << r.inputs << ", \"token_error_rate\": " << r.counts.token_error_rate()
              << ", \"sequence_error_rate\": " << r.counts.sequence_error_rate()
              << ", \"inputs_per_second\": " << r.inputs_per_second() << ", \"seconds\": " << r.seconds
              << ", \"threads\": " << r.threads << ", \"decode_seconds\": " << r.decode_seconds;
    if (t.takes_audio()) std::cout << ", \"audio_seconds\": " << r.audio_seconds << ", \"real_time_factor\": " << r.real_time_factor();
    if (greedy_online) {  // null when no output token was emitted at all
      auto value = [&](double v) { return r.latency.sequences > 0 ? std::to_string(v) : std::string("null"); };
      std::cout << ", \"average_proportion\": " << value(r.latency.average_proportion())
                << ", \"average_lagging\": " << value(r.latency.average_lagging())
                << ", \"early_token_share\": " << value(r.latency.early_token_share());
    }
    if (!times_path.empty()) {  // null when no word was recognised
      auto value = [&](double v) { return r.word_delays.ms.empty() ? std::string("null") : std::to_string(v); };
      std::cout << ", \"word_delay_ms_mean\": " << value(r.word_delays.mean())
                << ", \"word_delay_ms_p90\": " << value(r.word_delays.quantile(0.9))
                << ", \"word_delay_words\": " << r.word_delays.ms.size();
    }
    if (!voices_path.empty()) {  // e.g. "by_voice_group": {"espeak-ng": {"inputs": 73, "token_error_rate": 0.083}, ...}
      nlohmann::json rates = nlohmann::json::object();
      for (const auto& [group, c] : by_group) rates[group] = {{"inputs", c.sequences}, {"token_error_rate", c.token_error_rate()}};
      std::cout << ", \"by_voice_group\": " << rates.dump();
    }
    std::cout << "}\n";
  } else {
    std::printf("inputs %lld  token error rate %.2f%%  sequence error rate %.2f%%  %.1f inputs/s (%lld at once)\n",
                static_cast<long long>(r.inputs), 100 * r.counts.token_error_rate(),
                100 * r.counts.sequence_error_rate(), r.inputs_per_second(), static_cast<long long>(r.threads));
    if (t.takes_audio()) std::printf("real-time factor %.4f per stream (%.1f s for %.1f s of audio, features included)\n",
                                     r.real_time_factor(), r.decode_seconds, r.audio_seconds);
    if (greedy_online && r.latency.sequences > 0) {
      std::printf("latency: average proportion %.3f  average lagging %.2f %s  %.1f%% of tokens "
                  "emitted before the end of input\n",
                  r.latency.average_proportion(), r.latency.average_lagging(),
                  t.takes_audio() ? "feature frames" : "inputs", 100 * r.latency.early_token_share());
    }
    if (!times_path.empty() && r.word_delays.ms.empty()) {
      std::printf("emission delay after the word's end (%s): no word recognised\n", times_path.c_str());
    } else if (!times_path.empty()) {
      std::printf("emission delay after the word's end (%s): mean %.0f ms, 90th percentile %.0f ms over %zu "
                  "recognised words\n",
                  times_path.c_str(), r.word_delays.mean(), r.word_delays.quantile(0.9), r.word_delays.ms.size());
    }
    for (const auto& [group, c] : by_group) {
      std::printf("voice group %s (%s): %lld inputs, token error rate %.2f%%\n", group.c_str(), voices_path.c_str(),
                  static_cast<long long>(c.sequences), 100 * c.token_error_rate());
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// mona decode CHECKPOINT [INPUT...] [--beam N] [--expected] [--split MODE]

struct DecodeArgs {
  std::string checkpoint;
  std::vector<std::string> inputs;
  int64_t beam = -1;
  bool expected = false;
  std::string split = "auto";
};

CLI::App* add_decode(CLI::App& app, DecodeArgs& a) {
  auto* cmd = app.add_subcommand("decode", "symbol models: decode inputs given as arguments or lines on stdin "
                                          "(audio models: mona transcribe)");
  cmd->add_option("CHECKPOINT", a.checkpoint, "checkpoint file")->required()->check(CLI::ExistingFile);
  cmd->add_option("INPUT", a.inputs, "inputs (none or '-': read lines from stdin)");
  cmd->add_option("--beam", a.beam, "beam width (0: greedy; default: the checkpoint's decode.beam)")
      ->check(kNonNegative);
  cmd->add_flag("--expected", a.expected, "decode with the soft expected alignment");
  cmd->add_option("--split", a.split, kSplitHelp)->check(kSplitModes);
  return cmd;
}

// Inputs skipped (encode_line named each): exit code 1 after the others are done.
int skipped_inputs(int64_t skipped) {
  if (skipped == 0) return 0;
  std::cerr << "mona: " << skipped << (skipped == 1 ? " input" : " inputs") << " skipped (see above)\n";
  return 1;
}

// Prints "INPUT<TAB>OUTPUT TOKENS" per input.
int run_decode(const DecodeArgs& a) {
  const TrainedModel t = TrainedModel::load(a.checkpoint);
  mona::detail::check(!t.takes_audio(), "decode: ", a.checkpoint,
                      " is an audio model: transcribe audio files with mona transcribe (or mona stream --audio)");
  const auto search = search_options(t, a.beam);
  mona::stream::Recognizer rec(t.model, search);
  int64_t skipped = 0;
  for_each_input(a.inputs, [&](const std::string& line) {
    std::vector<std::string> tokens;
    std::vector<int64_t> ids;
    if (!encode_line(t, line, a.split, tokens, ids)) {
      ++skipped;
      return;
    }
    const std::vector<int64_t> out = a.expected
                                         ? mona::train::decode_with_expected_alignment(t, ids, search).tokens
                                         : rec.recognize(torch::tensor(ids, torch::kLong)).tokens;
    std::cout << line << "\t" << join(t.decode_output(out)) << std::endl;
    check_stdout();
  });
  return skipped_inputs(skipped);
}

// ---------------------------------------------------------------------------------------
// mona stream CHECKPOINT [INPUT...] [--split MODE]

// Raw PCM's channel count at most: WAV's own limit is 65535, but mixing so many down to one
// is no use a stream has, and a count read wrong (a byte swapped) would allocate gigabytes.
constexpr int kMaxChannels = 1024;

struct StreamArgs {
  std::string checkpoint;
  std::vector<std::string> inputs;
  std::string split = "auto";
  std::string audio;             // audio models: a file, or "-" for stdin
  int rate = 16000, channels = 1;  // raw PCM on stdin
  double chunk_ms = 10;
  std::string format = "auto";   // stdin: auto (WAV if it starts with RIFF, else raw) | wav | raw
  bool long_form = false;        // decode.eos_only_after_input, or eos_only_at_last_entry (p_eos models)
  std::vector<const CLI::Option*> audio_only;  // the options above but --audio: refused for symbol models
  const CLI::Option *rate_opt = nullptr, *channels_opt = nullptr, *format_opt = nullptr;  // stdin only
};

CLI::App* add_stream(CLI::App& app, StreamArgs& a) {
  auto* cmd = app.add_subcommand("stream", "read inputs (audio models: samples) and print tokens as they are emitted");
  cmd->add_option("CHECKPOINT", a.checkpoint, "checkpoint file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--split", a.split, kSplitHelp)->check(kSplitModes);
  cmd->add_option("INPUT", a.inputs,
                  "inputs (none or '-': read lines from stdin; symbol models take a line once it is whole, "
                  "then feed its symbols one at a time)");
  cmd->add_option("--audio", a.audio,
                  "audio models: an audio file (WAV, FLAC, OGG), or '-' for PCM on stdin (WAV, or raw s16le "
                  "at --rate and --channels)");
  a.rate_opt = cmd->add_option("--rate", a.rate,
                               "raw PCM on stdin: sample rate in Hz (default 16000; a WAV header on stdin gives "
                               "its own, which a --rate given must match)")
                   ->check(mona::tools::integer_in(1, std::numeric_limits<int>::max()));
  a.channels_opt = cmd->add_option("--channels", a.channels,
                                   "raw PCM on stdin: interleaved channels, mixed down to mono (default 1; a WAV "
                                   "header on stdin gives its own, which a --channels given must match)")
                       ->check(mona::tools::integer_in(1, kMaxChannels));
  a.audio_only.push_back(a.rate_opt);
  a.audio_only.push_back(a.channels_opt);
  a.audio_only.push_back(cmd->add_option("--chunk-ms", a.chunk_ms,
                                         "audio: milliseconds of audio per accept_waveform call, at most one minute")
                             ->check(mona::tools::number_in(0, 60000)));
  a.format_opt = cmd->add_option("--format", a.format,
                                 "audio on stdin: auto (WAV when it starts with RIFF, else raw s16le) | wav | raw")
                     ->check(CLI::IsMember({"auto", "wav", "raw"}));
  a.audio_only.push_back(a.format_opt);
  a.audio_only.push_back(cmd->add_flag(
      "--long-form", a.long_form,
      "no </s> before the input ends (decode.eos_only_after_input; for a model trained with 003's EOS "
      "frame, model.p_eos > 0, only once the attention reaches the last entry: decode.eos_only_at_last_entry): "
      "transcribe a stream of any length"));
  return cmd;
}

// Samples of an audio stream, read chunk by chunk: a file through libsndfile (read whole,
// then handed out in chunks as a live source would), or s16le PCM from stdin, raw or in a
// WAV container (its RIFF header parsed here: PCM, 16 bits), read as it arrives.
class AudioSource {
 public:
  explicit AudioSource(const StreamArgs& a) : rate_(a.rate), channels_(a.channels) {
    if (a.audio != "-") {
      for (const CLI::Option* o : {a.rate_opt, a.channels_opt, a.format_opt}) {  // else silently ignored
        mona::detail::check(o->count() == 0, o->get_name(), ": applies to audio on stdin (--audio -); the file ",
                            a.audio, " gives its own format, rate and channels in its header");
      }
      const mona::audio::Waveform w = mona::audio::read_audio(a.audio);
      file_ = w.samples;
      rate_ = w.sample_rate;
      channels_ = 1;
      name_ = a.audio;
      return;
    }
    name_ = "stdin";
    if (a.format == "raw") return;
    // auto: WAV when the first 4 bytes are "RIFF"; raw PCM otherwise, those bytes its first.
    std::string magic(4, '\0');
    std::cin.read(&magic[0], 4);
    magic.resize(static_cast<size_t>(std::cin.gcount()));
    if (magic != "RIFF") {
      mona::detail::check_data(a.format == "auto", "stdin: --format wav: expected a WAV header (RIFF), got ",
                               magic.empty() ? std::string("no bytes") : "\"" + printable(magic) + "\"");
      pending_ = magic;
      std::cin.clear(std::cin.rdstate() & ~std::ios::failbit);  // a short read is the end, not an error
      return;
    }
    skip(8);  // RIFF size, "WAVE"
    while (true) {  // chunks up to "data"
      std::string id(4, '\0');
      std::cin.read(&id[0], 4);
      const uint32_t size = read_u32();
      mona::detail::check_data(std::cin.good(), "stdin: WAV header ends before its data chunk");
      if (id == "data") {
        // The data's size, unless the writer did not know it (a live recording: arecord
        // writes 0x7fffff00, others 0 or 0xffffffff): then the audio runs to the end of input.
        if (size > 0 && size < kUnknownSize) data_left_ = size;
        break;
      }
      if (id == "fmt ") {
        uint16_t format = read_u16();
        channels_ = read_u16();
        rate_ = static_cast<int>(read_u32());
        skip(6);
        const uint16_t bits = read_u16();
        uint32_t read = 16;
        if (format == kExtensible && size >= 40) {  // the format is the first 2 bytes of SubFormat
          skip(8);  // cbSize, wValidBitsPerSample, dwChannelMask
          format = read_u16();
          read = 26;
        }
        mona::detail::check_data(std::cin.good() && size >= read, "stdin: WAV header ends inside its fmt chunk");
        mona::detail::check_data(format == 1 && bits == 16 && channels_ > 0 && rate_ > 0,
                                 "stdin: WAV: only 16-bit PCM is read from a pipe (format ", format, ", ", bits,
                                 " bits); convert it, or give it as a file with --audio FILE");
        // A --rate or --channels given for this stream must be what its header says.
        mona::detail::check_data(a.rate_opt->count() == 0 || a.rate == rate_, "stdin: the WAV header gives ", rate_,
                                 " Hz, --rate ", a.rate, ": leave --rate out, or give the audio's rate");
        mona::detail::check_data(a.channels_opt->count() == 0 || a.channels == channels_, "stdin: the WAV header gives ",
                                 channels_, channels_ == 1 ? " channel" : " channels", ", --channels ", a.channels,
                                 ": leave --channels out, or give the audio's channels");
        skip(size - read + (size & 1));
      } else {
        skip(size + (size & 1));
      }
    }
  }
  int sample_rate() const { return rate_; }
  int channels() const { return channels_; }
  // Raw PCM on stdin: the bytes at its end that made no whole sample frame (2 bytes per channel).
  size_t dropped_bytes() const { return dropped_bytes_; }
  const std::string& name() const { return name_; }
  // Up to n mono samples (fewer at the end; none when the source is exhausted).
  std::vector<float> read(size_t n) {
    if (!file_.empty() || name_ != "stdin") {
      const size_t k = std::min(n, file_.size() - position_);
      std::vector<float> out(file_.begin() + static_cast<std::ptrdiff_t>(position_),
                             file_.begin() + static_cast<std::ptrdiff_t>(position_ + k));
      position_ += k;
      return out;
    }
    std::vector<int16_t> raw(n * static_cast<size_t>(channels_));
    size_t want = raw.size() * 2;
    if (data_left_ >= 0) want = std::min(want, static_cast<size_t>(data_left_));
    char* bytes = reinterpret_cast<char*>(raw.data());
    size_t got = std::min(want, pending_.size());  // the bytes auto-detection read
    std::copy(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(got), bytes);
    pending_.erase(0, got);
    if (got < want) {
      std::cin.read(bytes + got, static_cast<std::streamsize>(want - got));
      if (std::ferror(stdin)) throw mona::DataError(std::string("stdin: read failed: ") + std::strerror(errno));
      got += static_cast<size_t>(std::cin.gcount());
    }
    if (data_left_ >= 0) data_left_ -= static_cast<int64_t>(got);
    const size_t frame_bytes = 2 * static_cast<size_t>(channels_);
    const size_t frames = got / frame_bytes;
    // A short read is the end of stdin (read() waits for all n otherwise): bytes past the
    // last whole sample frame are dropped, and run_stream_audio says so.
    dropped_bytes_ += got % frame_bytes;
    std::vector<float> out(frames);
    for (size_t f = 0; f < frames; ++f) {
      float sum = 0;
      for (int c = 0; c < channels_; ++c) sum += raw[f * static_cast<size_t>(channels_) + static_cast<size_t>(c)];
      out[f] = sum / static_cast<float>(channels_) / 32768.0f;
    }
    return out;
  }

 private:
  static void skip(uint32_t n) { std::cin.ignore(n); }
  static uint16_t read_u16() {
    unsigned char b[2] = {0, 0};
    std::cin.read(reinterpret_cast<char*>(b), 2);
    return static_cast<uint16_t>(b[0] | (b[1] << 8));
  }
  static uint32_t read_u32() {
    unsigned char b[4] = {0, 0, 0, 0};
    std::cin.read(reinterpret_cast<char*>(b), 4);
    return static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) | (static_cast<uint32_t>(b[2]) << 16) |
           (static_cast<uint32_t>(b[3]) << 24);
  }
  static constexpr uint16_t kExtensible = 0xfffe;    // WAVE_FORMAT_EXTENSIBLE
  static constexpr uint32_t kUnknownSize = 0x7ffff000;  // data sizes from here on: not known
  // The bytes of a 4-byte magic as text, others as \xNN.
  static std::string printable(const std::string& b) {
    std::string out;
    for (const unsigned char c : b) {
      if (c >= 0x20 && c < 0x7f) {
        out += static_cast<char>(c);
      } else {
        char hex[5];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        out += hex;
      }
    }
    return out;
  }
  int rate_, channels_;
  std::string name_;
  std::vector<float> file_;
  size_t position_ = 0;
  size_t dropped_bytes_ = 0;
  std::string pending_;     // stdin bytes read before the samples (the magic of raw PCM)
  int64_t data_left_ = -1;  // WAV on stdin: bytes of its data chunk not yet read; -1: to the end
};

// Audio models: feeds the source chunk by chunk (Recognizer::accept_waveform), decodes after
// each chunk and prints each token when it is emitted: its time in the audio (the end of the
// frames its attention read), the audio received at emission, and the delay between the
// two. Then the transcript, the real-time factor and the mean and largest delay.
int run_stream_audio(const TrainedModel& t, const StreamArgs& a) {
  mona::nn::SearchOptions search = search_options(t, 0);
  if (a.long_form) {
    search.eos_only_after_input = true;
    // 003 sec. 4.2: a model that learned to end on the EOS frame ends only there.
    if (t.config.model.p_eos > 0) search.eos_only_at_last_entry = true;
  }
  mona::stream::Recognizer rec(t.model, search);
  AudioSource source(a);
  const size_t chunk = std::max<size_t>(1, static_cast<size_t>(a.chunk_ms * source.sample_rate() / 1000));
  auto s = rec.create_stream();
  size_t shown = 0;
  int64_t received = 0;
  std::vector<double> delays;
  double busy = 0;
  int64_t largest_held = 0;  // memory entries stored at once (bounded for the releasing mechanisms)
  auto show = [&](bool finished) {
    const auto r = rec.result(*s);
    const double now_ms = 1000.0 * static_cast<double>(received) / source.sample_rate();
    for (; shown < r.tokens.size(); ++shown) {
      const char* token = t.output_vocab.symbol(r.tokens[shown]).c_str();
      if (r.input_positions[shown] < 0) {  // no time in the audio, so no delay either
        std::printf("%s%s  at no input (the attention ran past the end)  emitted at %.0f ms\n",
                    finished ? "(end) " : "", token, now_ms);
      } else {
        const double delay = now_ms - r.times_ms[shown];
        delays.push_back(delay);
        std::printf("%s%s  at %.0f ms  emitted at %.0f ms  delay %.0f ms\n", finished ? "(end) " : "", token,
                    r.times_ms[shown], now_ms, delay);
      }
      std::fflush(stdout);
    }
  };
  while (true) {
    const std::vector<float> samples = source.read(chunk);
    if (samples.empty()) break;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      rec.accept_waveform(*s, samples, source.sample_rate());
    } catch (const mona::ArgumentError& e) {  // the source's rate (or samples): named
      throw mona::ArgumentError(source.name() + ": " + e.what());
    }
    while (rec.is_ready(*s)) rec.decode(*s);
    busy += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    received += static_cast<int64_t>(samples.size());
    largest_held = std::max(largest_held, s->memory_held());
    show(false);
  }
  if (source.dropped_bytes() > 0) {
    std::cerr << "mona: " << source.name() << ": the last " << source.dropped_bytes()
              << (source.dropped_bytes() == 1 ? " byte makes" : " bytes make") << " no whole sample frame ("
              << source.channels() << (source.channels() == 1 ? " channel" : " channels")
              << " of 16 bits) and " << (source.dropped_bytes() == 1 ? "was" : "were") << " dropped\n";
  }
  // No samples is an utterance of no audio, decoded as transcribe and recognize_waveform
  // decode it; said on stderr, since on stdin it is more often a recorder that failed.
  if (received == 0) std::cerr << "mona: " << source.name() << ": no audio samples\n";
  const auto t0 = std::chrono::steady_clock::now();
  rec.input_finished(*s);
  while (rec.is_ready(*s)) rec.decode(*s);
  busy += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  largest_held = std::max(largest_held, s->memory_held());  // the frames the end of input flushed
  show(true);
  const double audio_seconds = static_cast<double>(received) / source.sample_rate();
  double mean = 0, worst = 0;
  for (double d : delays) {
    mean += d / static_cast<double>(delays.size());
    worst = std::max(worst, d);
  }
  std::printf("= %s\n", join(t.decode_output(rec.result(*s).tokens)).c_str());
  std::string speed = "no audio";
  if (audio_seconds > 0 && busy > 0) {
    const double rtf = busy / audio_seconds;
    char text[96];
    std::snprintf(text, sizeof text, "real-time factor %.4f (%.3gx %s than real time)", rtf,
                  rtf < 1 ? 1 / rtf : rtf, rtf < 1 ? "faster" : "slower");
    speed = text;
  }
  std::string delay = "no token with a time in the audio";
  if (!delays.empty()) {
    char text[96];
    std::snprintf(text, sizeof text, "emission delay mean %.0f ms, max %.0f ms", mean, worst);
    delay = text;
  }
  std::printf("%s: %.2f s of audio, %s, %s, memory entries held at most %lld of %lld\n", source.name().c_str(),
              audio_seconds, speed.c_str(), delay.c_str(), static_cast<long long>(largest_held),
              static_cast<long long>(s->memory_size()));
  return 0;
}

// Greedy online decoding, one input element at a time (stream::recognize_incrementally):
// per input its line, "read K 'token'" after each element, "emit TOKEN at ..." for each
// token as it appears ("(end) emit" after the end of the input), and "= OUTPUT TOKENS".
int run_stream(const StreamArgs& a) {
  const TrainedModel t = TrainedModel::load(a.checkpoint);
  if (t.takes_audio()) {
    mona::detail::check(!a.audio.empty() && a.inputs.empty(), "stream: ", a.checkpoint,
                        " is an audio model: give --audio FILE or --audio - (PCM on stdin), not text inputs");
    return run_stream_audio(t, a);
  }
  mona::detail::check(a.audio.empty(), "--audio: ", a.checkpoint, " takes ", t.config.model.input_kind,
                      ", not audio");
  for (const CLI::Option* o : a.audio_only) {  // options that would be silently ignored
    mona::detail::check(o->count() == 0, o->get_name(), ": ", a.checkpoint, " takes ", t.config.model.input_kind,
                        ", not audio (", o->get_name(), " is an option of audio streams)");
  }
  mona::stream::Recognizer rec(t.model, search_options(t, 0));
  int64_t skipped = 0;
  for_each_input(a.inputs, [&](const std::string& line) {
    std::vector<std::string> tokens;
    std::vector<int64_t> ids;
    if (!encode_line(t, line, a.split, tokens, ids)) {
      ++skipped;
      return;
    }
    std::cout << line << "\n";
    size_t shown = 0;
    auto show = [&](int64_t read, bool finished, const mona::stream::StreamResult& so_far) {
      if (!finished) std::cout << "  read " << read << " '" << tokens[static_cast<size_t>(read - 1)] << "'" << std::endl;
      for (; shown < so_far.tokens.size(); ++shown) {
        const int64_t pos = so_far.input_positions[shown];
        std::cout << "  " << (finished ? "(end) " : "") << "emit " << t.output_vocab.symbol(so_far.tokens[shown])
                  << "  at "
                  << (pos < 0 ? std::string("no input (the attention ran past the end)")
                      : pos >= static_cast<int64_t>(tokens.size())
                          ? std::string("the end of input")
                          : "input " + std::to_string(pos + 1) + " '" + tokens[static_cast<size_t>(pos)] + "'")
                  << std::endl;
      }
    };
    const auto r = mona::stream::recognize_incrementally(rec, torch::tensor(ids, torch::kLong), show);
    std::cout << "  = " << join(t.decode_output(r.result.tokens)) << std::endl;
    check_stdout();
  });
  return skipped_inputs(skipped);
}

// ---------------------------------------------------------------------------------------
// mona transcribe CHECKPOINT FILE... [--beam N] [--json]

struct TranscribeArgs {
  std::string checkpoint;
  std::vector<std::string> files;
  int64_t beam = -1;
  bool as_json = false;
};

CLI::App* add_transcribe(CLI::App& app, TranscribeArgs& a) {
  auto* cmd = app.add_subcommand("transcribe", "audio models: transcribe audio files, one line per file (a file that cannot be read "
                                              "is named on stderr and skipped: exit code 1 after the others)");
  cmd->add_option("CHECKPOINT", a.checkpoint, "checkpoint file")->required()->check(CLI::ExistingFile);
  cmd->add_option("FILE", a.files, "audio files (WAV, FLAC, OGG; any rate, mixed down to mono)")->required();
  cmd->add_option("--beam", a.beam, "beam width (0: greedy; default: the checkpoint's decode.beam)")->check(kNonNegative);
  cmd->add_flag("--json", a.as_json, "one JSON object per file: file, text, tokens, times_ms (when each token's "
                "frames end in the audio, in ms; null for a token emitted after the attention ran past the end)");
  return cmd;
}

// "FILE<TAB>TRANSCRIPT" per file, or its JSON object; the waveform goes through the
// streaming path at once (Recognizer::recognize_waveform).
int run_transcribe(const TranscribeArgs& a) {
  const TrainedModel t = TrainedModel::load(a.checkpoint);
  mona::detail::check(t.takes_audio(), "transcribe: ", a.checkpoint, " takes ", t.config.model.input_kind,
                      ", not audio (use mona decode)");
  mona::stream::Recognizer rec(t.model, search_options(t, a.beam));
  int64_t skipped = 0;
  for (const auto& file : a.files) {
    mona::stream::StreamResult r;
    try {  // a file that cannot be read (missing, corrupt, NaN samples) is named and skipped
      const mona::audio::Waveform w = mona::audio::read_audio(file);
      r = rec.recognize_waveform(w.samples, w.sample_rate);
    } catch (const mona::Error& e) {  // the file's own: DataError, or its rate (ArgumentError)
      std::cerr << "mona: skipping " << file << ": " << first_line(e.what()) << "\n";
      ++skipped;
      continue;
    }
    const auto words = t.decode_output(r.tokens);
    if (a.as_json) {
      nlohmann::json times = nlohmann::json::array();  // null: a token with no input position
      for (size_t k = 0; k < r.times_ms.size(); ++k) {
        times.push_back(r.input_positions[k] < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.times_ms[k]));
      }
      nlohmann::json j{{"file", file}, {"text", join(words)}, {"tokens", words}, {"times_ms", times}};
      std::cout << j.dump() << std::endl;
    } else {
      std::cout << file << "\t" << join(words) << std::endl;
    }
    check_stdout();
  }
  return skipped_inputs(skipped);
}

// ---------------------------------------------------------------------------------------
// mona plot CHECKPOINT INPUT [--reference TOKENS] [--output FILE] [--split MODE]

struct PlotArgs {
  std::string checkpoint, input, reference, output = "alignment.png";
  std::string split = "auto";
};

CLI::App* add_plot(CLI::App& app, PlotArgs& a) {
  auto* cmd = app.add_subcommand("plot", "write the attention of a checkpoint on one input as a PNG heatmap");
  cmd->add_option("CHECKPOINT", a.checkpoint, "checkpoint file")->required()->check(CLI::ExistingFile);
  cmd->add_option("INPUT", a.input, "input (audio models: an audio file)")->required();
  cmd->add_option("--reference", a.reference,
                  "output tokens to force, all in the model's output vocabulary (default: the model's own decoding)");
  cmd->add_option("--output,-o", a.output, "PNG file to write")->capture_default_str();
  cmd->add_option("--split", a.split, kSplitHelp)->check(kSplitModes);
  return cmd;
}

// Writes the teacher-forced expected attention of the input against --reference (default:
// the model's greedy online decoding) and prints the file's name.
int run_plot(const PlotArgs& a) {
  const TrainedModel t = TrainedModel::load(a.checkpoint);
  std::vector<std::string> tokens;
  const std::string line = trim(a.input);
  mona::detail::check(!line.empty(), "plot: INPUT is empty");
  if (t.takes_audio()) {  // INPUT is an audio file
    tokens = {line};
  } else {
    tokens = split_input(line, a.split);
    const auto unknown_input = t.input_vocab.unknown_symbols(tokens);
    if (!unknown_input.empty()) {
      mona::detail::fail("INPUT \"", line, "\": ", unknown_input.size() == 1 ? "a symbol" : "symbols",
                         " outside the model's input vocabulary: ", quoted_list(unknown_input));
    }
    const auto markers = markers_in(tokens);
    if (!markers.empty()) mona::detail::fail("INPUT \"", line, "\": markers the model places itself: ", quoted_list(markers));
  }
  std::vector<std::string> ref = mona::data::tokenize(a.reference);
  const auto unknown = t.output_vocab.unknown_symbols(ref);
  if (!unknown.empty()) {
    mona::detail::fail("--reference \"", a.reference, "\": ", unknown.size() == 1 ? "a token" : "tokens",
                       " outside the model's output vocabulary: ", quoted_list(unknown));
  }
  const auto ref_markers = markers_in(ref);
  if (!ref_markers.empty()) {
    mona::detail::fail("--reference \"", a.reference, "\": markers the model places itself: ", quoted_list(ref_markers),
                       " (the plot adds </s> after the reference)");
  }
  if (ref.empty()) {
    mona::stream::Recognizer rec(t.model, search_options(t, 0));
    ref = t.decode_output(rec.recognize(t.input_tensor(tokens)).tokens);
  }
  const mona::data::Example ex{tokens, ref};
  const auto w = mona::train::alignment_weights(t, ex);
  auto out_labels = ref;
  out_labels.push_back(mona::data::kReservedSymbols[mona::data::kEos]);
  const auto in_labels = mona::train::memory_labels(t, tokens);
  mona::detail::check(!in_labels.empty(), "plot: INPUT \"", line, "\": the model's memory of it holds no entry",
                      t.takes_audio() ? " (audio shorter than one frame)" : "", ": nothing to plot");
  mona::io::write_alignment_png(a.output, w, static_cast<int64_t>(out_labels.size()),
                                static_cast<int64_t>(in_labels.size()), in_labels, out_labels,
                                t.config.model.attention + ": " + line);
  std::cout << a.output << "\n";
  return 0;
}

// ---------------------------------------------------------------------------------------
// Parsing and dispatch

// Parses the command line; returns the exit code when parsing ends the program (help, or
// an error reported as one line on stderr), nothing when a subcommand is to run.
std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {  // one line: what is wrong, and where to look
    std::string what = first_line(e.what());
    if (app.get_subcommands().empty()) {  // a first word that is no subcommand: say so
      for (const auto& word : app.remaining()) {
        if (word.empty() || word[0] == '-') continue;
        std::string names;
        for (const auto* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
        what = "unknown subcommand '" + word + "' (expected one of: " + names + ")";
        break;
      }
    }
    std::cerr << "mona: error: " << what << " (see mona --help)\n";
    return 2;  // a usage error, as for most Unix tools (CLI11's own codes are its internals)
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mona: monotonic attention sequence-to-sequence models: train, evaluate, decode, stream"};
  app.require_subcommand(1);
  // Subcommands made after this pass the options they do not know to `app`, so --threads
  // may also follow the subcommand (`mona eval --threads 2 CKPT FILE`).
  app.fallthrough();
  GlobalArgs global;
  TrainArgs train;
  EvalArgs eval;
  DecodeArgs decode;
  StreamArgs stream;
  TranscribeArgs transcribe;
  PlotArgs plot;
  add_global(app, global);
  const CLI::App* train_cmd = add_train(app, train);
  const CLI::App* eval_cmd = add_eval(app, eval);
  const CLI::App* decode_cmd = add_decode(app, decode);
  const CLI::App* stream_cmd = add_stream(app, stream);
  const CLI::App* transcribe_cmd = add_transcribe(app, transcribe);
  const CLI::App* plot_cmd = add_plot(app, plot);
  for (CLI::App* cmd : app.get_subcommands({})) {  // the program's own option, taken here too
    cmd->footer("Also --threads N, before or after the subcommand (see mona --help).");
  }
  if (const auto code = parse(app, argc, argv)) return *code;

  try {  // every error: one line on stderr, exit code 1
    const int64_t threads = requested_threads(global);
    if (*train_cmd) return run_train(train, threads);  // the trainer sets its threads
    // Decoding. eval: inputs at once, by default one per core up to 2 (the G2P recipe's model
    // 2.1x the inputs per second of one thread on two cores). One input at a time (decode,
    // stream, transcribe, plot): operator threads, by default 1: a second one bought
    // nothing for the G2P model and made the speech model's stream 1.3-1.7x slower (bench/notes.md).
    const unsigned cores = std::thread::hardware_concurrency();
    const int64_t eval_threads = threads > 0 ? threads : (cores == 1 ? 1 : 2);
    mona::nn::set_threads(threads > 0 ? threads : 1);
    int code = 0;
    if (*eval_cmd) code = run_eval(eval, eval_threads);
    if (*decode_cmd) code = run_decode(decode);
    if (*stream_cmd) code = run_stream(stream);
    if (*transcribe_cmd) code = run_transcribe(transcribe);
    if (*plot_cmd) code = run_plot(plot);
    check_stdout();
    return code;
  } catch (const c10::Error& e) {
    std::cerr << "mona: error: " << first_line(e.what_without_backtrace()) << "\n";
    return 1;
  } catch (const std::exception& e) {  // mona::ArgumentError and DataError among them
    std::cerr << "mona: error: " << first_line(e.what()) << "\n";
    return 1;
  }
  return 0;
}
