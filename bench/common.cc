// The benchmark programs' shared parts; see bench/common.h.
#include "common.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "mona/io/files.h"

namespace mona::bench {

std::vector<char*> parse_flags(int argc, char** argv, Flags& flags, bool takes_threads) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") flags.quick = true;
    else if (a.rfind("--csv=", 0) == 0) flags.csv = a.substr(6);
    else if (a.rfind("--reps=", 0) == 0) flags.reps = std::stoi(a.substr(7));
    else if (takes_threads && a.rfind("--threads=", 0) == 0) flags.threads = std::stoi(a.substr(10));
    else rest.push_back(argv[i]);
  }
  if (flags.quick) flags.reps = 1;
  return rest;
}

void repeat_min(benchmark::internal::Benchmark* b, int reps) {
  if (reps <= 1) return;
  b->Repetitions(reps)->ReportAggregatesOnly(true)->ComputeStatistics(
      "min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
}

void MinRunReporter::ReportRuns(const std::vector<Run>& reported) {
  benchmark::ConsoleReporter::ReportRuns(reported);
  for (const Run& r : reported) {
    if (r.error_occurred) continue;
    const bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
    const bool min = r.run_type == Run::RT_Aggregate && r.aggregate_name == "min";
    if (single || min) runs.push_back(r);
  }
}

double MinRunReporter::cpu_ns(const Run& r) {
  return r.GetAdjustedCPUTime() * 1e9 / benchmark::GetTimeUnitMultiplier(r.time_unit);
}

double MinRunReporter::real_ns(const Run& r) {
  return r.GetAdjustedRealTime() * 1e9 / benchmark::GetTimeUnitMultiplier(r.time_unit);
}

double MinRunReporter::counter(const Run& r, const char* name) {
  const auto c = r.counters.find(name);
  return c == r.counters.end() ? 0.0 : static_cast<double>(c->second);
}

int write_csv(const char* program, const std::string& path, const std::string& text,
              std::size_t rows) {
  if (rows == 0) {  // --benchmark_list_tests, or a filter that matched nothing
    std::printf("%s: nothing measured; %s not written\n", program, path.c_str());
    return 0;
  }
  try {
    io::write_file_atomic(path, text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  std::printf("%s: wrote %zu rows to %s\n", program, rows, path.c_str());
  return 0;
}

}  // namespace mona::bench
