// bench/features: throughput of mona::audio's log-mel filterbank (issue 19: at least 500x
// faster than real time on one core). FbankOptions' defaults (80 mel bins at 16 kHz,
// Kaldi's 25 ms / 10 ms frames, dither 0), on 10 s of a speech-like test signal (a gliding
// tone with harmonics, amplitude modulated, plus noise; the cost does not depend on the
// content):
//   offline   compute_fbank on the whole signal
//   online    OnlineFbank fed 10 ms chunks (160 samples), frames taken after each chunk
// The speed is x_realtime = seconds of audio / CPU seconds (one thread: the fbank code uses
// none of its own). Writes one CSV row per mode (the minimum over the repetitions), with the
// options and the chunk it ran (chunk_ms 0: the whole signal at once), which the report
// reads.
//
// Usage: mona_bench_features [--quick] [--csv=FILE] [--reps=N] [gbench flags]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common.h"
#include "mona/audio/fbank.h"

namespace {

mona::bench::Flags g_config("features.csv");

constexpr int kRate = 16000;
constexpr int kChunkMs = 10;  // the online mode's chunk

const std::vector<float>& signal(double seconds) {
  static std::map<double, std::vector<float>> cache;
  auto& x = cache[seconds];
  if (x.empty()) {
    std::mt19937_64 gen(1);
    std::normal_distribution<double> noise(0.0, 0.01);
    const size_t n = static_cast<size_t>(seconds * kRate);
    x.resize(n);
    double phase = 0;
    for (size_t i = 0; i < n; ++i) {
      const double t = static_cast<double>(i) / kRate;
      phase += 2 * M_PI * (150 + 50 * std::sin(2 * M_PI * 0.7 * t)) / kRate;
      const double env = 0.5 + 0.5 * std::sin(2 * M_PI * 3 * t);
      x[i] = static_cast<float>(0.2 * env * (std::sin(phase) + 0.5 * std::sin(3 * phase)) + noise(gen));
    }
  }
  return x;
}

struct Point {
  std::string mode;
  double audio_s = 0;
  int64_t frames = 0, bins = 0;
  int chunk_ms = 0;  // 0: the whole signal in one call
};
std::map<std::string, Point> g_points;

mona::audio::FbankOptions options() {
  mona::audio::FbankOptions o;  // the defaults: 80 bins, 16 kHz, 25 / 10 ms, dither 0
  o.sample_rate = kRate;
  return o;
}

void bm_offline(benchmark::State& state) {
  const double seconds = g_config.quick ? 1.0 : 10.0;
  const std::vector<float>& x = signal(seconds);
  const mona::audio::FbankOptions o = options();
  int64_t frames = 0;
  for (auto _ : state) {
    const mona::audio::Features f = mona::audio::compute_fbank(o, x);
    frames = f.num_frames;
    benchmark::DoNotOptimize(f.data.data());
  }
  state.counters["x_realtime"] =
      benchmark::Counter(seconds, benchmark::Counter::kIsIterationInvariantRate);
  g_points["offline"] = {"offline", seconds, frames, o.num_bins(), 0};
}

void bm_online(benchmark::State& state) {
  const double seconds = g_config.quick ? 1.0 : 10.0;
  const std::vector<float>& x = signal(seconds);
  const mona::audio::FbankOptions o = options();
  const size_t chunk = kRate * kChunkMs / 1000;
  int64_t frames = 0;
  for (auto _ : state) {
    mona::audio::OnlineFbank f(o);
    frames = 0;
    for (size_t pos = 0; pos < x.size(); pos += chunk) {
      f.accept_waveform(x.data() + pos, std::min(chunk, x.size() - pos));
      const mona::audio::Features part = f.take_frames();
      frames += part.num_frames;
      benchmark::DoNotOptimize(part.data.data());
    }
    f.input_finished();
    frames += f.take_frames().num_frames;
  }
  state.counters["x_realtime"] =
      benchmark::Counter(seconds, benchmark::Counter::kIsIterationInvariantRate);
  g_points["online"] = {"online", seconds, frames, o.num_bins(), kChunkMs};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = mona::bench::parse_flags(argc, argv, g_config, /*takes_threads=*/false);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  for (auto [name, fn] : {std::pair{"fbank/offline", &bm_offline}, std::pair{"fbank/online", &bm_online}}) {
    auto* b = benchmark::RegisterBenchmark(name, fn)->Unit(benchmark::kMillisecond);
    if (g_config.quick) b->Iterations(2);
    mona::bench::repeat_min(b, g_config.reps);
  }
  mona::bench::MinRunReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::ostringstream csv;
  const mona::audio::FbankOptions o = options();
  csv << "mode,audio_s,frames,bins,sample_rate,frame_length_ms,frame_shift_ms,dither,chunk_ms,threads,reps,cpu_ns,"
         "real_ns,x_realtime\n";
  csv.precision(6);
  size_t rows = 0;
  for (const auto& r : reporter.runs) {
    const std::string name = r.run_name.function_name;
    const auto it = g_points.find(name == "fbank/offline" ? "offline" : "online");
    if (it == g_points.end()) continue;
    const Point& p = it->second;
    const double cpu_ns = mona::bench::MinRunReporter::cpu_ns(r);
    csv << p.mode << ',' << p.audio_s << ',' << p.frames << ',' << p.bins << ',' << o.sample_rate << ','
        << o.frame_length_ms << ',' << o.frame_shift_ms << ',' << o.dither << ',' << p.chunk_ms << ",1,"
        << g_config.reps << ',' << cpu_ns << ',' << mona::bench::MinRunReporter::real_ns(r) << ','
        << p.audio_s * 1e9 / cpu_ns << '\n';
    ++rows;
  }
  return mona::bench::write_csv("mona_bench_features", g_config.csv, csv.str(), rows);
}
