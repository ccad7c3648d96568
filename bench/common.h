// bench/common.h: what the benchmark programs (decode, train, features, streams) share:
// their flags, the run a CSV row reports (the minimum over repetitions), and writing the
// CSV atomically (mona/io/files.h: temporary file, then rename).
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>
#include <vector>

namespace mona::bench {

/// The flags every benchmark program takes.
struct Flags {
  explicit Flags(std::string default_csv) : csv(std::move(default_csv)) {}
  bool quick = false;  ///< --quick: small sizes, one repetition (the smoke test's run)
  std::string csv;     ///< --csv=FILE: where the rows go
  int reps = 3;        ///< --reps=N: repetitions per benchmark, the minimum reported
  int threads = 1;     ///< --threads=N (programs that take it)
};

/// Takes --quick, --csv=FILE, --reps=N and, when `takes_threads`, --threads=N out of the
/// command line into `flags` (--quick sets reps to 1); returns the rest, argv[0] first, for
/// benchmark::Initialize. Throws std::invalid_argument for a non-numeric N.
std::vector<char*> parse_flags(int argc, char** argv, Flags& flags, bool takes_threads);

/// Runs `b` `reps` times with only the aggregates reported, the minimum ("min") among them;
/// nothing when reps <= 1.
void repeat_min(benchmark::internal::Benchmark* b, int reps);

/// How many times --reps the points a report's verdicts read run (bench/decode and
/// bench/train, each its verdict_point): they cost little, and on this shared VM a
/// disturbance can outlast five repetitions spread over the run, so the minimum over more of
/// them is the one taken from a quiet moment, for numerator and denominator alike.
inline constexpr int kVerdictRepsFactor = 4;

/// Console output as usual; `runs` keeps, per benchmark, the run a CSV row reports: the
/// run itself when the benchmark had one repetition, else its "min" aggregate.
class MinRunReporter : public benchmark::ConsoleReporter {
 public:
  std::vector<Run> runs;
  void ReportRuns(const std::vector<Run>& reported) override;
  /// CPU and wall time per iteration of `r`, in nanoseconds.
  static double cpu_ns(const Run& r);
  static double real_ns(const Run& r);
  /// The user counter `name` of `r` (0 when absent).
  static double counter(const Run& r, const char* name);
};

/// Writes `text` to `path` atomically and prints "<program>: wrote <rows> rows to <path>";
/// on failure prints the error (naming the path) and returns 1, else 0. With rows = 0
/// (--benchmark_list_tests, or a filter that matched nothing) writes nothing, so that an
/// earlier run's file is never replaced by an empty one, and says so.
int write_csv(const char* program, const std::string& path, const std::string& text,
              std::size_t rows);

}  // namespace mona::bench
