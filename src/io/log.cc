// JSONL log and progress display (mona/io/log.h).
#include "mona/io/log.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "mona/core/error.h"

namespace mona::io {

using detail::check;
using detail::check_data;
using detail::fail;

JsonlLog::JsonlLog(const std::string& path, bool append) : path_(path) {
  out_.open(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  check_data(out_.is_open(), "log ", path, ": cannot open for ", append ? "appending" : "writing");
}

void JsonlLog::write(const nlohmann::json& record) {
  out_ << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out_.flush();
  check_data(out_.good(), "log ", path_, ": write failed");
}

Progress::Progress(int64_t total_steps, std::ostream& out, bool is_tty)
    : total_(total_steps), out_(out), tty_(is_tty) {
  check(total_steps >= 0, "Progress: total_steps: expected >= 0 (0: unknown), got ",
        total_steps);
  now_ = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  start_time_ = now_();
}

bool Progress::stdout_is_tty() { return ::isatty(STDOUT_FILENO) == 1; }
bool Progress::stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

void Progress::set_options(const ProgressOptions& options) {
  check(options.tty_redraw_seconds >= 0, "ProgressOptions.tty_redraw_seconds: expected >= 0, got ",
        options.tty_redraw_seconds);
  check(options.plain_every_seconds >= 0,
        "ProgressOptions.plain_every_seconds: expected >= 0, got ", options.plain_every_seconds);
  check(options.plain_every_steps >= 0, "ProgressOptions.plain_every_steps: expected >= 0, got ",
        options.plain_every_steps);
  check(options.bar_width >= 1 && options.bar_width <= 200,
        "ProgressOptions.bar_width: expected in [1, 200], got ", options.bar_width);
  options_ = options;
}

void Progress::set_clock(std::function<double()> now_seconds) {
  check(static_cast<bool>(now_seconds), "Progress::set_clock: expected a callable, got empty");
  now_ = std::move(now_seconds);
  start_time_ = now_();
}

void Progress::set_time_budget(double seconds) {
  check(std::isfinite(seconds) && seconds >= 0,
        "Progress::set_time_budget: seconds: expected a finite number >= 0 (0: none), got ",
        seconds);
  time_budget_ = seconds;
}

std::string Progress::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--:--";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                static_cast<long long>((s / 60) % 60), static_cast<long long>(s % 60));
  return buf;
}

std::string Progress::format_rate(double v) {
  char buf[64];
  if (!std::isfinite(v)) return "-";
  if (std::fabs(v) >= 999.5e3) {
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  } else if (std::fabs(v) >= 999.5) {
    std::snprintf(buf, sizeof buf, "%.2fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

std::string Progress::status_text(bool with_bar) const {
  std::ostringstream os;
  const double elapsed = now_time_ - start_time_;
  // The step budget: fraction done and ETA from the step rate (-1: not measured yet).
  double eta = -1;
  if (total_ > 0 && step_ > first_step_ && now_time_ > first_time_) {
    const double rate = static_cast<double>(step_ - first_step_) / (now_time_ - first_time_);
    eta = static_cast<double>(std::max<int64_t>(total_ - step_, 0)) / rate;
  }
  if (total_ > 0 && step_ >= total_) eta = 0;
  double frac =
      total_ > 0 ? std::min(1.0, std::max(0.0, static_cast<double>(step_) / total_)) : 0.0;
  // The time budget, when it ends first (or the step rate is unknown).
  bool by_time = false;
  if (time_budget_ > 0) {
    const double time_left = std::max(0.0, time_budget_ - elapsed);
    if (total_ == 0 || eta < 0 || time_left < eta) {
      by_time = true;
      eta = time_left;
      frac = std::min(1.0, std::max(0.0, elapsed / time_budget_));
    }
  }
  const bool known = total_ > 0 || by_time;
  char loss[32];
  std::snprintf(loss, sizeof loss, "%.4f", loss_);
  char pct[16];
  std::snprintf(pct, sizeof pct, "%.1f%%", 100.0 * frac);
  const std::string rate =
      counting_ ? format_rate(elapsed > 0 ? static_cast<double>(step_) / elapsed : 0) + " " +
                      options_.unit + "/s"
                : "loss " + std::string(loss) + "  " + format_rate(tokens_per_second_) + " tok/s";
  const std::string count = counting_ ? std::to_string(step_) : "step " + std::to_string(step_);
  if (!options_.label.empty()) os << options_.label << ' ';
  if (with_bar) {
    if (known) {
      const int filled = static_cast<int>(std::floor(frac * options_.bar_width));
      os << '[' << std::string(filled, '#') << std::string(options_.bar_width - filled, '.') << "]  ";
    }
    if (by_time) {
      os << count << "  " << pct << " of " << format_duration(time_budget_);
    } else if (total_ > 0) {
      os << step_ << '/' << total_ << "  " << pct;
    } else {
      os << count;
    }
    os << "  " << rate;
    if (known) os << "  ETA " << format_duration(eta);
  } else {
    os << count;
    if (by_time) {
      os << " (" << pct << " of " << format_duration(time_budget_) << ')';
    } else if (total_ > 0) {
      os << '/' << total_ << " (" << pct << ')';
    }
    os << "  " << rate << "  elapsed " << format_duration(elapsed);
    if (known) os << "  ETA " << format_duration(eta);
  }
  return os.str();
}

void Progress::print(bool final) {
  if (tty_) {
    out_ << '\r' << status_text(true) << "\x1b[K";
    if (final) out_ << '\n';
  } else {
    out_ << status_text(false) << '\n';
  }
  out_.flush();
  printed_current_ = true;
  last_print_time_ = now_time_;
  last_print_step_ = step_;
}

void Progress::update(int64_t step, double loss, double tokens_per_second) {
  if (finished_) return;
  counting_ = false;
  loss_ = loss;
  tokens_per_second_ = tokens_per_second;
  advance(step);
}

void Progress::update_count(int64_t done) {
  if (finished_) return;
  counting_ = true;
  advance(done);
}

void Progress::advance(int64_t step) {
  const double now = now_();
  const bool first = !have_update_;
  if (first) {
    first_step_ = step;
    first_time_ = now;
  }
  have_update_ = true;
  step_ = step;
  now_time_ = now;
  printed_current_ = false;
  const bool last = total_ > 0 && step >= total_;
  bool due = first || last;
  if (tty_) {
    due = due || now - last_print_time_ >= options_.tty_redraw_seconds;
  } else {
    if (options_.plain_every_seconds > 0 &&
        now - last_print_time_ >= options_.plain_every_seconds) {
      due = true;
    }
    if (options_.plain_every_steps > 0 && step - last_print_step_ >= options_.plain_every_steps) {
      due = true;
    }
  }
  if (due) print(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!have_update_) return;
  now_time_ = now_();  // the final state as of now (elapsed, a time budget's share)
  if (tty_) {
    print(true);  // redraw the final state and end the line
  } else if (!printed_current_) {
    print(true);
  }
}

}  // namespace mona::io
