// bench/streams: throughput of many concurrent audio streams (issue 19): S streams of 4 s of
// audio each, fed in interleaved 100 ms chunks through Recognizer::accept_waveform, advanced
// after every round either together (Recognizer::decode_streams: one batched LSTM step per
// layer for all streams) or one by one (decode() per stream, the single-stream path), for
// S = 1, 8 and 32. The model is a small streaming recogniser of the papers' shape, untrained
// (the cost does not depend on the weights, only on how often tokens are emitted, which
// init_r = -1 keeps moderate): 80 log-mel bins, the two-convolution front end (32 channels),
// 3 unidirectional LSTM layers of 256 with time reduction after the first, MoChA (w = 4),
// a 256-unit decoder, 64 output tokens (model() below; every CSV row carries these sizes and
// the chunk, which the report reads). One intra-op thread. The figure is x_realtime =
// seconds of audio of all streams / wall seconds: how many live streams one core serves.
//
// Usage: mona_bench_streams [--quick] [--csv=FILE] [--reps=N] [gbench flags]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common.h"
#include "mona/nn/threads.h"
#include "mona/stream/stream.h"

namespace {

mona::bench::Flags g_config("streams.csv");

constexpr int kRate = 16000;
constexpr double kSeconds = 4.0;
constexpr int kChunkMs = 100;
constexpr size_t kChunk = kRate * kChunkMs / 1000;

std::shared_ptr<mona::nn::Seq2Seq> model() {
  static std::shared_ptr<mona::nn::Seq2Seq> m;
  if (!m) {
    torch::manual_seed(1);
    mona::nn::ModelOptions o;
    o.input_kind = "audio";
    o.feature_dim = o.features.num_bins();
    o.conv_channels = 32;
    o.encoder_layers = 3;
    o.encoder_hidden = 256;
    o.time_reduction_layers = 1;
    o.decoder_embedding_dim = 64;
    o.decoder_hidden = 256;
    o.output_vocab = 64;
    o.attention = "mocha";
    o.attention_options.chunk_size = 4;
    o.attention_options.init_r = -1;
    m = std::make_shared<mona::nn::Seq2Seq>(o);
    m->encoder->set_normalization(torch::full({o.feature_dim}, -8.0), torch::full({o.feature_dim}, 0.3));
  }
  return m;
}

// Stream k's audio: a tone pattern of its own with noise.
const std::vector<float>& audio(int k) {
  static std::map<int, std::vector<float>> cache;
  auto& x = cache[k];
  if (x.empty()) {
    std::mt19937_64 gen(static_cast<uint64_t>(k) + 1);
    std::normal_distribution<double> noise(0.0, 0.02);
    x.resize(static_cast<size_t>(kSeconds * kRate));
    for (size_t n = 0; n < x.size(); ++n) {
      const double t = static_cast<double>(n) / kRate;
      const double f = 200 + 150 * ((static_cast<int>(t / 0.2) + k) % 7);
      x[n] = static_cast<float>(0.3 * std::sin(2 * M_PI * f * t) + noise(gen));
    }
  }
  return x;
}

struct Point {
  std::string mode;
  int streams = 0;
  int64_t tokens = 0;
};
std::map<std::string, Point> g_points;

void run(benchmark::State& state, bool together) {
  torch::set_num_threads(1);
  const int S = static_cast<int>(state.range(0));
  mona::stream::Recognizer rec(model(), mona::nn::SearchOptions{});
  int64_t tokens = 0;
  for (auto _ : state) {
    std::vector<std::unique_ptr<mona::stream::Stream>> owned;
    std::vector<mona::stream::Stream*> streams;
    for (int k = 0; k < S; ++k) {
      owned.push_back(rec.create_stream());
      streams.push_back(owned.back().get());
    }
    const size_t n = audio(0).size();
    for (size_t at = 0; at < n; at += kChunk) {
      const size_t len = std::min(kChunk, n - at);
      for (int k = 0; k < S; ++k) rec.accept_waveform(*streams[k], audio(k).data() + at, len, kRate);
      if (together) {
        rec.decode_streams(streams);
      } else {
        for (auto* s : streams) {
          while (rec.is_ready(*s)) rec.decode(*s);
        }
      }
    }
    for (auto* s : streams) rec.input_finished(*s);
    if (together) {
      rec.decode_streams(streams);
    } else {
      for (auto* s : streams) {
        while (rec.is_ready(*s)) rec.decode(*s);
      }
    }
    tokens = 0;
    for (auto* s : streams) tokens += static_cast<int64_t>(rec.result(*s).tokens.size());
  }
  state.counters["x_realtime"] = benchmark::Counter(S * kSeconds, benchmark::Counter::kIsIterationInvariantRate);
  const std::string mode = together ? "decode_streams" : "one_by_one";
  g_points[mode + "/" + std::to_string(S)] = {mode, S, tokens};
}

void bm_together(benchmark::State& state) { run(state, true); }
void bm_one_by_one(benchmark::State& state) { run(state, false); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = mona::bench::parse_flags(argc, argv, g_config, /*takes_threads=*/false);
  // One thread, as mona's programs run it (mona/nn/threads.h): ATen's team and OpenBLAS's own
  // pool on the calling thread, with the best OpenBLAS kernels.
  mona::nn::set_threads(1);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  for (auto [name, fn] : {std::pair{"streams/decode_streams", &bm_together}, std::pair{"streams/one_by_one", &bm_one_by_one}}) {
    auto* b = benchmark::RegisterBenchmark(name, fn)->Unit(benchmark::kMillisecond)->UseRealTime();
    if (g_config.quick) {
      b->Arg(1)->Arg(8)->Iterations(1);
    } else {
      b->Arg(1)->Arg(8)->Arg(32);
    }
    mona::bench::repeat_min(b, g_config.reps);
  }
  mona::bench::MinRunReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::ostringstream csv;
  // The model's sizes, in every row (one model for every point).
  const mona::nn::ModelOptions& o = model()->options();
  std::ostringstream sizes;
  sizes << o.features.num_bins() << ',' << o.conv_channels << ',' << o.encoder_layers << ',' << o.encoder_hidden << ','
        << o.time_reduction_layers << ',' << o.attention << ',' << o.attention_options.chunk_size << ','
        << o.decoder_hidden << ',' << o.output_vocab;
  csv << "mode,streams,stream_s,audio_s,chunk_ms,tokens,threads,reps,real_ns,x_realtime,bins,conv_channels,"
         "encoder_layers,encoder_hidden,time_reduction_layers,attention,chunk_size,decoder_hidden,output_vocab\n";
  csv.precision(6);
  size_t rows = 0;
  for (const auto& r : reporter.runs) {
    const std::string name = r.run_name.function_name;  // streams/<mode>
    const auto it = g_points.find(name.substr(name.find('/') + 1) + "/" + r.run_name.args);
    if (it == g_points.end()) continue;
    const Point& p = it->second;
    const double real_ns = mona::bench::MinRunReporter::real_ns(r);
    csv << p.mode << ',' << p.streams << ',' << kSeconds << ',' << p.streams * kSeconds << ',' << kChunkMs << ','
        << p.tokens << ",1," << g_config.reps << ',' << real_ns << ',' << p.streams * kSeconds * 1e9 / real_ns << ','
        << sizes.str() << '\n';
    ++rows;
  }
  return mona::bench::write_csv("mona_bench_streams", g_config.csv, csv.str(), rows);
}
