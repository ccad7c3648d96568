#include "mona/io/log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "mona/core/error.h"
#include "util/temp_dir.h"

using mona::test::TempDir;
using mona::io::JsonlLog;
using mona::io::Progress;
using mona::io::ProgressOptions;

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST(JsonlLog, WritesOneFlushedRecordPerLine) {
  TempDir dir;
  const std::string path = dir.file("train.jsonl");
  {
    JsonlLog log(path, /*append=*/false);
    log.write({{"step", 1}, {"loss", 2.5}});
    // Flushed: visible before the log is closed.
    EXPECT_EQ(mona::test::read_raw(path), "{\"loss\":2.5,\"step\":1}\n");
    log.write({{"step", 2}, {"loss", std::numeric_limits<double>::quiet_NaN()},
               {"note", std::string("bad \xff utf8")}});
  }
  const auto lines = lines_of(mona::test::read_raw(path));
  ASSERT_EQ(lines.size(), 2u);
  const auto rec = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(rec["step"], 2);
  EXPECT_TRUE(rec["loss"].is_null());
  EXPECT_EQ(rec["note"], "bad \xEF\xBF\xBD utf8");
}

TEST(JsonlLog, AppendKeepsAndTruncateDropsOldRecords) {
  TempDir dir;
  const std::string path = dir.file("l.jsonl");
  mona::test::write_raw(path, "{\"old\":true}\n");
  JsonlLog(path, true).write({{"new", 1}});
  EXPECT_EQ(mona::test::read_raw(path), "{\"old\":true}\n{\"new\":1}\n");
  JsonlLog(path, false).write({{"fresh", 1}});
  EXPECT_EQ(mona::test::read_raw(path), "{\"fresh\":1}\n");
}

TEST(JsonlLog, OpenErrorNamesPath) {
  TempDir dir;
  const std::string path = dir.file("no/dir/log.jsonl");
  EXPECT_ERROR_CONTAINS(JsonlLog(path, true), "log " + path, "cannot open");
}

TEST(Progress, Formatting) {
  EXPECT_EQ(Progress::format_duration(0), "0:00:00");
  EXPECT_EQ(Progress::format_duration(65), "0:01:05");
  EXPECT_EQ(Progress::format_duration(3 * 3600 + 7), "3:00:07");
  EXPECT_EQ(Progress::format_duration(-1), "--:--:--");
  EXPECT_EQ(Progress::format_duration(std::nan("")), "--:--:--");
  EXPECT_EQ(Progress::format_rate(950), "950");
  EXPECT_EQ(Progress::format_rate(3210), "3.21k");
  EXPECT_EQ(Progress::format_rate(1.5e6), "1.50M");
}

TEST(Progress, TerminalRedrawsOneLine) {
  std::ostringstream out;
  double now = 100;
  Progress p(1024, out, /*is_tty=*/true);
  p.set_clock([&] { return now; });
  p.update(0, 2.0, 0);
  now = 10;  // (clock only matters relative to the first update)
  now = 110;
  p.update(512, 1.23456, 3210);  // 512 steps in 10 s -> 512 left take 10 s
  const std::string s = out.str();
  EXPECT_EQ(s.find('\n'), std::string::npos) << "a terminal line must not end before finish()";
  const auto last = s.rfind('\r');
  ASSERT_NE(last, std::string::npos);
  EXPECT_EQ(s.substr(last),
            "\r[##########..........]  512/1024  50.0%  loss 1.2346  3.21k tok/s  ETA 0:00:10"
            "\x1b[K");
  // Redraws are throttled: an update 0.01 s later prints nothing.
  now = 110.01;
  p.update(513, 1.2, 3000);
  EXPECT_EQ(out.str(), s);
  p.finish();
  const std::string f = out.str();
  ASSERT_EQ(f.back(), '\n');
  EXPECT_NE(f.find("513/1024"), std::string::npos);
  EXPECT_EQ(std::count(f.begin(), f.end(), '\n'), 1);
  p.finish();  // idempotent
  EXPECT_EQ(out.str(), f);
}

TEST(Progress, PlainLinesAtMostEveryNSteps) {
  std::ostringstream out;
  double now = 0;
  Progress p(100, out, /*is_tty=*/false);
  p.set_clock([&] { return now; });
  ProgressOptions o;
  o.plain_every_seconds = 0;  // only the step interval
  o.plain_every_steps = 25;
  p.set_options(o);
  for (int64_t step = 1; step <= 100; ++step) {
    now = step * 0.5;
    p.update(step, 10.0 / step, 1000);
  }
  p.finish();  // last step already printed: nothing more
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 5u) << out.str();  // step 1 (first), 26, 51, 76, 100 (last)
  EXPECT_EQ(lines[0],
            "step 1/100 (1.0%)  loss 10.0000  1.00k tok/s  elapsed 0:00:01  ETA --:--:--");
  EXPECT_EQ(lines[1],
            "step 26/100 (26.0%)  loss 0.3846  1.00k tok/s  elapsed 0:00:13  ETA 0:00:37");
  EXPECT_EQ(lines[4].rfind("step 100/100 (100.0%)", 0), 0u);
  EXPECT_NE(lines[4].find("ETA 0:00:00"), std::string::npos);
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
  EXPECT_EQ(out.str().find('\x1b'), std::string::npos);
}

TEST(Progress, PlainLinesAtMostEveryNSeconds) {
  std::ostringstream out;
  double now = 0;
  Progress p(0, out, /*is_tty=*/false);  // unknown total
  p.set_clock([&] { return now; });
  ProgressOptions o;
  o.plain_every_seconds = 10;
  p.set_options(o);
  for (int64_t step = 1; step <= 30; ++step) {
    now = step;  // one step per second
    p.update(step, 1.0, 50);
  }
  p.finish();  // step 30 not printed yet: printed now
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 4u) << out.str();  // 1, 11, 21, 30
  EXPECT_EQ(lines[0], "step 1  loss 1.0000  50 tok/s  elapsed 0:00:01");
  EXPECT_EQ(lines[1], "step 11  loss 1.0000  50 tok/s  elapsed 0:00:11");
  EXPECT_EQ(lines[2].rfind("step 21 ", 0), 0u);
  EXPECT_EQ(lines[3].rfind("step 30 ", 0), 0u);
  EXPECT_EQ(lines[3].find("ETA"), std::string::npos);
}

TEST(Progress, BadArguments) {
  std::ostringstream out;
  EXPECT_ERROR_CONTAINS(Progress(-1, out, false), "total_steps", "-1");
  Progress p(10, out, false);
  ProgressOptions o;
  o.plain_every_steps = -2;
  EXPECT_ERROR_CONTAINS(p.set_options(o), "plain_every_steps", "-2");
  p.finish();  // no update: prints nothing
  EXPECT_EQ(out.str(), "");
}

// Issue 17 item 13: an 8-minute run of at most 100,000 steps showed "step 7252/100000
// (7.3%) ETA 0:57:36"; the display follows whichever budget ends first.
TEST(Progress, TimeBudgetThatEndsFirstDrivesPercentageAndEta) {
  std::ostringstream out;
  double now = 0;
  Progress p(100000, out, /*is_tty=*/false);
  p.set_clock([&] { return now; });
  p.set_time_budget(480);
  now = 0.04;
  p.update(1, 2.0, 1000);  // no step rate yet: the time budget
  now = 300;
  p.update(7252, 1.23456, 3210);  // 30 s passed: printed
  now = 481;
  p.update(11626, 1.0, 3210);
  p.finish();
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_EQ(lines[0], "step 1 (0.0% of 0:08:00)  loss 2.0000  1.00k tok/s  elapsed 0:00:00  ETA 0:08:00");
  EXPECT_EQ(lines[1], "step 7252 (62.5% of 0:08:00)  loss 1.2346  3.21k tok/s  elapsed 0:05:00  ETA 0:03:00");
  EXPECT_EQ(lines[2], "step 11626 (100.0% of 0:08:00)  loss 1.0000  3.21k tok/s  elapsed 0:08:01  ETA 0:00:00");

  // On a terminal the bar fills with the time.
  std::ostringstream tty;
  now = 0;
  Progress q(100000, tty, /*is_tty=*/true);
  q.set_clock([&] { return now; });
  q.set_time_budget(480);
  now = 0.04;
  q.update(1, 2.0, 1000);
  now = 300;
  q.update(7252, 1.23456, 3210);
  const std::string s = tty.str();
  EXPECT_EQ(s.substr(s.rfind('\r')),
            "\r[############........]  step 7252  62.5% of 0:08:00  loss 1.2346  3.21k tok/s  ETA 0:03:00\x1b[K");
}

TEST(Progress, StepBudgetThatEndsFirstKeepsTheStepDisplay) {
  std::ostringstream out;
  double now = 0;
  Progress p(1000, out, /*is_tty=*/false);
  p.set_clock([&] { return now; });
  p.set_time_budget(3600);
  now = 0;
  p.update(0, 2.0, 1000);
  now = 50;  // 10 steps/s: the steps end in 50 s, the hour much later
  p.update(500, 1.0, 1000);
  p.finish();  // step 500 was printed (30 s passed): nothing more
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  EXPECT_EQ(lines[0], "step 0 (0.0% of 1:00:00)  loss 2.0000  1.00k tok/s  elapsed 0:00:00  ETA 1:00:00");
  EXPECT_EQ(lines[1], "step 500/1000 (50.0%)  loss 1.0000  1.00k tok/s  elapsed 0:00:50  ETA 0:00:50");
  EXPECT_ERROR_CONTAINS(p.set_time_budget(-1), "set_time_budget", "-1");
}

TEST(Progress, CountingShowsDoneOfTotalWithLabelRateAndEta) {
  std::ostringstream tty;
  double now = 0;
  Progress p(300, tty, /*is_tty=*/true);
  p.set_clock([&] { return now; });
  ProgressOptions o;
  o.label = "eval";
  p.set_options(o);
  now = 0.4;
  p.update_count(30);
  now = 2;
  p.update_count(150);  // 75 inputs/s since the start; 150 left at that rate
  const std::string s = tty.str();
  EXPECT_EQ(s.substr(s.rfind('\r')),
            "\reval [##########..........]  150/300  50.0%  75 inputs/s  ETA 0:00:02\x1b[K");

  std::ostringstream plain;
  now = 0;
  Progress q(300, plain, /*is_tty=*/false);
  q.set_clock([&] { return now; });
  o.label = "dev eval (step 500)";
  q.set_options(o);
  for (int64_t k = 1; k <= 300; ++k) {
    now = k * 0.01;
    q.update_count(k);
  }
  q.finish();
  const auto lines = lines_of(plain.str());
  ASSERT_EQ(lines.size(), 2u) << plain.str();  // the first and the last
  EXPECT_EQ(lines[0], "dev eval (step 500) 1/300 (0.3%)  100 inputs/s  elapsed 0:00:00  ETA --:--:--");
  EXPECT_EQ(lines[1], "dev eval (step 500) 300/300 (100.0%)  100 inputs/s  elapsed 0:00:03  ETA 0:00:00");
}
