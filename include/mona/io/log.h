// mona/io/log.h: the JSONL training log and the progress display.
//
// JsonlLog writes one JSON object per line (https://jsonlines.org) and flushes after every
// line, so `tail -f` and a crash both see complete records. Invalid UTF-8 in strings is
// replaced by U+FFFD instead of throwing; non-finite numbers become null (JSON has no NaN).
//
// Progress shows training progress in one of two modes:
//
//   terminal (is_tty = true): one line redrawn in place ("\r" ... "\x1b[K"), at most every
//   `tty_redraw_seconds` and always for the last step, e.g.
//     [##########..........]  512/1024  50.0%  loss 1.2346  3.21k tok/s  ETA 0:01:05
//   finish() redraws the final state (as of its call) and ends the line with '\n'.
//
//   log file / pipe (is_tty = false): plain lines, each ending in '\n', no control
//   characters. A line is printed for the first update, then whenever `plain_every_seconds`
//   have passed since the last printed line or `plain_every_steps` steps have been made
//   since it (either condition; 0 disables it), and for the last step, e.g.
//     step 512/1024 (50.0%)  loss 1.2346  3.21k tok/s  elapsed 0:01:04  ETA 0:01:05
//   finish() prints the final state if it was not printed already.
//
// total_steps = 0 means unknown: no bar, percentage or ETA ("step 512  loss ...").
// The ETA is (total - step) / rate, the rate measured from the first update on (so a
// resumed run estimates from its own speed); "--:--:--" until it can be measured.
//
// A run with a wall-clock budget as well (set_time_budget(seconds), counted from the
// Progress's creation) ends with whichever budget runs out first, and the display follows
// that one: while the time budget would end first (or the step rate is not measured yet),
// the bar, percentage and ETA are elapsed / budget and budget - elapsed, and the step count
// has no total, e.g. for an 8-minute run of at most 100,000 steps:
//     [############........]  step 7252  62.5% of 0:08:00  loss 1.2346  3.21k tok/s  ETA 0:03:00
//     step 7252 (62.5% of 0:08:00)  loss 1.2346  3.21k tok/s  elapsed 0:05:00  ETA 0:03:00
// otherwise the step display above.
//
// Counting (update_count(done), e.g. inputs decoded by an evaluation) shows `done` out of
// the total, the rate in options().unit per second (from creation on), and the ETA, in the
// same two modes, after options().label:
//     eval [##########..........]  150/300  50.0%  75 inputs/s  ETA 0:00:02
//     eval 150/300 (50.0%)  75 inputs/s  elapsed 0:00:02  ETA 0:00:02
// Times come from a steady clock; tests can inject a fake one with set_clock().
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace mona::io {

class JsonlLog {
 public:
  /// Opens `path` for appending (append = true, e.g. on --resume) or truncates it.
  /// Throws mona::Error naming the path if it cannot be opened.
  explicit JsonlLog(const std::string& path, bool append);

  /// Writes `record` as one line and flushes. Throws mona::Error naming the path if the
  /// write fails (disk full, ...).
  void write(const nlohmann::json& record);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

struct ProgressOptions {
  double tty_redraw_seconds = 0.1;   ///< terminal: minimum time between redraws
  double plain_every_seconds = 30;   ///< plain: print when this much time has passed (0: off)
  int64_t plain_every_steps = 0;     ///< plain: print after this many steps (0: off)
  int bar_width = 20;                ///< terminal: characters inside the brackets
  std::string label;                 ///< printed first (e.g. "eval"); empty: nothing
  std::string unit = "inputs";       ///< update_count(): what is counted, for the rate
};

class Progress {
 public:
  /// total_steps >= 0 (0: unknown). Throws mona::Error if negative.
  Progress(int64_t total_steps, std::ostream& out, bool is_tty);

  /// True if standard output / standard error is a terminal (isatty).
  static bool stdout_is_tty();
  static bool stderr_is_tty();

  void set_options(const ProgressOptions& options);
  const ProgressOptions& options() const { return options_; }

  /// Replaces the clock (seconds, monotonic). For tests.
  void set_clock(std::function<double()> now_seconds);

  /// A wall-clock budget of `seconds` (> 0; 0: none) from creation (or set_clock()); see
  /// the file comment. Throws mona::Error if negative or not finite.
  void set_time_budget(double seconds);

  /// Reports that `step` steps are done, with the current loss and throughput.
  void update(int64_t step, double loss, double tokens_per_second);

  /// Reports that `done` items (options().unit) are done: the counting display.
  void update_count(int64_t done);

  /// Ends the display (see the file comment). Further calls do nothing.
  void finish();

  /// "0:01:05" (hours not padded); "--:--:--" for negative or non-finite seconds.
  static std::string format_duration(double seconds);

  /// Throughput with a k/M suffix: 950 -> "950", 3210 -> "3.21k", 1.5e6 -> "1.50M".
  static std::string format_rate(double per_second);

 private:
  std::string status_text(bool with_bar) const;
  void print(bool final);
  void advance(int64_t step);

  int64_t total_;
  std::ostream& out_;
  bool tty_;
  ProgressOptions options_;
  std::function<double()> now_;
  double start_time_ = 0;
  double time_budget_ = 0;
  bool counting_ = false;
  bool started_ = false;
  int64_t first_step_ = 0;
  double first_time_ = 0;
  int64_t step_ = 0;
  double loss_ = 0, tokens_per_second_ = 0, now_time_ = 0;
  bool have_update_ = false;
  bool printed_current_ = false;
  double last_print_time_ = 0;
  int64_t last_print_step_ = 0;
  bool finished_ = false;
};

}  // namespace mona::io
