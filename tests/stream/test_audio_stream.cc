// label: audio
// Streaming recognition from samples (Recognizer::accept_waveform): any chunking of the
// waveform, at the model's rate or another one, gives the offline result bit for bit for
// every online mechanism; token times are in ms of audio; the memory a stream holds stays
// bounded for the mechanisms that release it (stream/stream.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <random>

#include "mona/data/tokens.h"
#include "mona/stream/stream.h"
#include "util/test_util.h"
#include "util/tiny_task.h"

namespace mona::test {
namespace {

// A small audio model: 12 mel bins, untrained, init_r = 1 so that it emits plenty of tokens.
std::shared_ptr<nn::Seq2Seq> audio_model(const std::string& mechanism, int64_t time_reduction) {
  torch::manual_seed(5);
  nn::ModelOptions o = tiny_monotonic_options(mechanism);
  o.input_kind = "audio";
  o.features.num_mel_bins = 12;
  o.feature_dim = 12;
  o.conv_channels = 3;
  o.encoder_layers = 2;
  o.encoder_hidden = 24;
  o.time_reduction_layers = time_reduction;
  o.attention_options.init_r = 1.0;
  auto model = std::make_shared<nn::Seq2Seq>(o);
  // A normalisation that is not the identity, as a trained model has: log-mel energies of
  // [-1, 1] audio lie around -10.
  model->encoder->set_normalization(torch::full({12}, -8.0), torch::full({12}, 0.3));
  return model;
}

// Tones with noise: `seconds` of audio at `rate` Hz, seeded.
std::vector<float> test_signal(double seconds, int rate, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> noise(0, 0.02);
  std::vector<float> x(static_cast<size_t>(seconds * rate));
  for (size_t n = 0; n < x.size(); ++n) {
    const double t = static_cast<double>(n) / rate;
    const double f = 300 + 200 * std::floor(t / 0.15);  // a new tone every 150 ms
    x[n] = static_cast<float>(0.3 * std::sin(2 * M_PI * f * t) + noise(gen));
  }
  return x;
}

// Feeds `x` in random chunks of 1 .. max_chunk samples, decoding after each.
stream::StreamResult stream_in_chunks(const stream::Recognizer& rec, const std::vector<float>& x, int rate,
                                      size_t max_chunk, std::mt19937_64& gen) {
  auto s = rec.create_stream();
  std::uniform_int_distribution<size_t> size(1, max_chunk);
  for (size_t n = 0; n < x.size();) {
    const size_t k = std::min(size(gen), x.size() - n);
    rec.accept_waveform(*s, x.data() + n, k, rate);
    while (rec.is_ready(*s)) rec.decode(*s);
    n += k;
  }
  rec.input_finished(*s);
  while (rec.is_ready(*s)) rec.decode(*s);
  return rec.result(*s);
}

TEST(AudioStream, AnyChunkingAtAnyRateEqualsOfflineBitForBit) {
  int64_t compared = 0, tokens = 0;
  std::mt19937_64 gen(3);
  for (const std::string mech : {"monotonic", "mocha", "matcha", "sagmm-tr", "sagmm-fixed", "soft"}) {
    for (int64_t reduction : {0, 1}) {
      auto model = audio_model(mech, reduction);
      for (int64_t beam : {0, 2}) {
        nn::SearchOptions so;
        so.beam = beam;
        stream::Recognizer rec(model, so);
        for (int rate : {16000, 8000}) {  // 8 kHz goes through the streaming resampler
          const std::vector<float> x = test_signal(0.9, rate, static_cast<uint64_t>(rate));
          const auto offline = rec.recognize_waveform(x, rate);
          for (size_t max_chunk : {size_t{1}, size_t{37}, size_t{1600}}) {
            const auto online = stream_in_chunks(rec, x, rate, max_chunk, gen);
            const std::string what = mech + " reduction " + std::to_string(reduction) + " beam " +
                                     std::to_string(beam) + " rate " + std::to_string(rate) + " chunks <= " +
                                     std::to_string(max_chunk);
            EXPECT_EQ(online.tokens, offline.tokens) << what;
            EXPECT_EQ(online.memory_positions, offline.memory_positions) << what;
            EXPECT_EQ(online.times_ms, offline.times_ms) << what;
            EXPECT_EQ(online.score, offline.score) << what;
            ++compared;
            tokens += static_cast<int64_t>(offline.tokens.size());
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 6 * 2 * 2 * 2 * 3);
  EXPECT_GT(tokens, compared) << "the comparison must cover emitted tokens";
}

// The frames accept_waveform computes are those of audio::compute_fbank on the whole
// (resampled) signal: accept() of those frames gives the same result.
TEST(AudioStream, WaveformEqualsItsFbankFramesAndTimesAreInMillisecondsOfAudio) {
  auto model = audio_model("mocha", 1);
  stream::Recognizer rec(model, nn::SearchOptions{});
  const std::vector<float> x = test_signal(1.3, 16000, 9);
  const auto from_samples = rec.recognize_waveform(x, 16000);
  audio::Features f = audio::compute_fbank(model->options().features, x);
  const auto from_frames = rec.recognize(torch::from_blob(f.data.data(), {f.num_frames, f.num_bins}, torch::kFloat));
  EXPECT_EQ(from_samples.tokens, from_frames.tokens);
  EXPECT_EQ(from_samples.score, from_frames.score);
  ASSERT_FALSE(from_samples.tokens.empty());
  ASSERT_EQ(from_samples.times_ms.size(), from_samples.tokens.size());
  ASSERT_EQ(f.num_frames, 128);  // 1 + (20800 - 400) / 160
  for (size_t i = 0; i < from_samples.tokens.size(); ++i) {
    // Entry m of a model subsampling by 8 (two stride-2 convolutions, one reduction) keeps
    // front-end output 2m, whose receptive field ends at frame 8m + 3, capped at the last
    // frame, 127; frame k ends at k * 10 ms + 25 ms (snip_edges), within the 1300 ms of audio.
    const int64_t m = from_samples.memory_positions[i];
    const int64_t frame = std::min<int64_t>(8 * m + 3, 127);
    EXPECT_EQ(from_samples.input_positions[i], frame) << "token " << i << " entry " << m;
    EXPECT_DOUBLE_EQ(from_samples.times_ms[i], static_cast<double>(frame) * 10 + 25) << "token " << i << " entry " << m;
    EXPECT_EQ(from_frames.input_positions[i], frame) << "token " << i << " entry " << m;
  }
}

// FbankOptions::frame_end_ms, the one formula for the time of a frame, against a hand
// computation: frame t's window starts at t S (snip_edges) or t S + S/2 - L/2 (integer
// division) and is L samples long.
TEST(AudioStream, FrameEndIsTheEndOfTheFramesWindowInMilliseconds) {
  audio::FbankOptions o;  // 16 kHz, 25 ms / 10 ms: L = 400, S = 160
  EXPECT_EQ(o.frame_start(3), 480);
  EXPECT_DOUBLE_EQ(o.frame_end_ms(3), 55.0);    // (480 + 400) / 16
  EXPECT_DOUBLE_EQ(o.frame_end_ms(0), 25.0);
  o.snip_edges = false;
  EXPECT_EQ(o.frame_start(0), -120);            // 80 - 200
  EXPECT_EQ(o.frame_start(3), 360);             // 480 + 80 - 200
  EXPECT_DOUBLE_EQ(o.frame_end_ms(3), 47.5);    // (360 + 400) / 16
  EXPECT_DOUBLE_EQ(o.frame_end_ms(0), 17.5);    // (-120 + 400) / 16
  // An odd window: 22050 Hz, L = int(551.25) = 551, S = int(220.5) = 220. Frame 2 starts at
  // 440 + 110 - 275 = 275 and ends at 826 (not 440 + 110 + 551 / 2 = 825).
  o.sample_rate = 22050;
  EXPECT_EQ(o.frame_start(2), 275);
  EXPECT_DOUBLE_EQ(o.frame_end_ms(2), 1000.0 * 826 / 22050);
  o.snip_edges = true;
  EXPECT_DOUBLE_EQ(o.frame_end_ms(2), 1000.0 * (440 + 551) / 22050);
}

// With snip_edges false a stream's token times are frame_end_ms of their input positions,
// capped at the audio received (the last frames reach past it).
TEST(AudioStream, TimesWithoutSnipEdgesAreTheFramesEndsCappedAtTheAudio) {
  nn::ModelOptions o = audio_model("mocha", 1)->options();
  o.features.snip_edges = false;
  auto model = std::make_shared<nn::Seq2Seq>(o);
  model->encoder->set_normalization(torch::full({12}, -8.0), torch::full({12}, 0.3));
  stream::Recognizer rec(model, nn::SearchOptions{});
  const std::vector<float> x = test_signal(1.3, 16000, 9);
  const auto r = rec.recognize_waveform(x, 16000);
  ASSERT_FALSE(r.tokens.empty());
  ASSERT_EQ(r.times_ms.size(), r.tokens.size());
  const int64_t frames = o.features.num_frames(static_cast<int64_t>(x.size()));  // (20800 + 80) / 160 = 130
  ASSERT_EQ(frames, 130);
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const int64_t frame = std::min<int64_t>(8 * r.memory_positions[i] + 3, frames - 1);
    EXPECT_EQ(r.input_positions[i], frame) << "token " << i;
    // Frame k ends at (160 k + 80 - 200 + 400) / 16 = 10 k + 17.5 ms; the last, 129, at 1307.5.
    EXPECT_DOUBLE_EQ(r.times_ms[i], std::min(1300.0, static_cast<double>(frame) * 10 + 17.5)) << "token " << i;
  }
}

// Hard monotonic attention, MoChA and MAtChA release the entries before t_{i-1} (minus
// w - 1 for MoChA) after every decode: the memory's first readable entry follows the last
// choice exactly and the entries held stay within the amortised bound (checked on
// untrained models, whose attention wanders). Both hold whatever the model: a model whose
// attention advances about one entry per output then holds a few dozen entries on a long
// stream. Whether a trained model keeps up on inputs far longer than its training examples
// is the model's property, which moves with the training's rounding (so with the BLAS and
// kernel variant), and is not tested here.
void check_release(const std::shared_ptr<nn::Seq2Seq>& model, const std::vector<int64_t>& input,
                   const std::string& what, int64_t* checked) {
  stream::Recognizer rec(model, nn::SearchOptions{});
  const auto& a = model->options().attention_options;
  const int64_t w = model->options().attention == "mocha" ? a.chunk_size : 1;
  auto s = rec.create_stream();
  for (int64_t x : input) {
    rec.accept(*s, torch::tensor({x}, torch::kLong));
    while (rec.is_ready(*s)) rec.decode(*s);
    const auto r = rec.result(*s);
    if (r.final) break;
    const int64_t first = s->memory_first(), kept = s->memory_size() - first;
    if (!r.memory_positions.empty()) {
      EXPECT_EQ(first, std::max<int64_t>(0, r.memory_positions.back() - w + 1)) << what;
      ++*checked;
    }
    // Released entries move out once as many are dropped as kept (at least 16).
    EXPECT_LT(s->memory_held(), std::max<int64_t>(16, kept) + kept) << what;
  }
}

TEST(AudioStream, MemoryIsReleasedBehindTheAttention) {
  std::mt19937_64 gen(17);
  std::vector<int64_t> input;
  while (input.size() < 600) {
    const auto piece = tiny_task_input(gen, true);
    input.insert(input.end(), piece.begin(), piece.end());
  }
  for (const std::string mech : {"monotonic", "mocha", "matcha"}) {
    torch::manual_seed(2);
    nn::ModelOptions o = tiny_monotonic_options(mech);
    o.attention_options.init_r = 1.0;
    int64_t checked = 0;
    check_release(std::make_shared<nn::Seq2Seq>(o), input, mech + " untrained", &checked);
    EXPECT_GT(checked, 100) << mech;
  }
  // SAGMM-tr with the fixed window releases before gamma_{i-1} - (c - 1) / 2, with the
  // adaptive window (its variance bounded by gmm.max_variance) before the first position
  // above mu_{i-1} - r sqrt(max_variance); the result is that of offline decoding (which
  // releases too, but reads every entry a step asks for: a released one would throw).
  for (const std::string mech : {"sagmm-fixed", "sagmm-tr"}) {
    torch::manual_seed(2);
    nn::ModelOptions o = tiny_model_options(mech);
    o.attention_options.gmm.max_variance = 4.0;
    auto model = std::make_shared<nn::Seq2Seq>(o);
    stream::Recognizer rec(model, nn::SearchOptions{});
    auto s = rec.create_stream();
    for (int64_t x : input) {
      rec.accept(*s, torch::tensor({x}, torch::kLong));
      while (rec.is_ready(*s)) rec.decode(*s);
      const int64_t kept = s->memory_size() - s->memory_first();
      EXPECT_LT(s->memory_held(), std::max<int64_t>(16, kept) + kept) << mech;
    }
    EXPECT_GT(s->memory_first(), 100) << mech << ": its window moved on through " << input.size() << " entries";
    rec.input_finished(*s);
    while (rec.is_ready(*s)) rec.decode(*s);
    const auto offline = rec.recognize(torch::tensor(input, torch::kLong));
    EXPECT_EQ(rec.result(*s).tokens, offline.tokens) << mech;
    EXPECT_EQ(rec.result(*s).score, offline.score) << mech;
  }
}

// The encoder's front end keeps only the frames its convolutions still read.
TEST(AudioStream, FrontEndHoldsAFewFrames) {
  auto model = audio_model("monotonic", 0);
  stream::Recognizer rec(model, nn::SearchOptions{});
  auto s = rec.create_stream();
  const std::vector<float> x = test_signal(3.0, 16000, 2);
  int64_t largest = 0;
  for (size_t n = 0; n < x.size(); n += 160) {
    rec.accept_waveform(*s, x.data() + n, std::min<size_t>(160, x.size() - n), 16000);
    largest = std::max(largest, s->frames_held());
  }
  EXPECT_LE(largest, 6) << "3 s of audio = 298 frames";
}

// decode_streams: several streams fed in interleaved chunks of random sizes and advanced
// together give each stream's solo result. The batched LSTM steps take other matrix-product
// kernels than single rows, so the numbers agree to float32 rounding, not bit for bit: the
// scores (sums of ~10-40 log-probabilities, each from a network of a few hundred float32
// operations per step over ~100 steps) within 1e-4 (measured: equal with this machine's
// default OpenBLAS kernels, 4.8e-7 apart with OPENBLAS_CORETYPE=Haswell); tokens and
// positions equal (these
// untrained models' energies sit near 1, far from the decision threshold 0, and their
// logits are O(0.1) apart, so rounding cannot flip a choice).
TEST(AudioStream, DecodeStreamsEqualsEachStreamAlone) {
  std::mt19937_64 gen(8);
  int64_t tokens = 0;
  for (const std::string mech : {"mocha", "sagmm-tr"}) {
    for (int64_t reduction : {0, 1}) {
      auto model = audio_model(mech, reduction);
      stream::Recognizer rec(model, nn::SearchOptions{});
      std::vector<std::vector<float>> signals;
      for (int k = 0; k < 5; ++k) signals.push_back(test_signal(0.4 + 0.3 * k, 16000, 100 + static_cast<uint64_t>(k)));
      std::vector<std::unique_ptr<stream::Stream>> streams;
      std::vector<stream::Stream*> all;
      for (size_t k = 0; k < signals.size(); ++k) {
        streams.push_back(rec.create_stream());
        all.push_back(streams.back().get());
      }
      std::vector<size_t> position(signals.size(), 0);
      std::uniform_int_distribution<size_t> size(1, 2000);
      bool more = true;
      while (more) {
        more = false;
        for (size_t k = 0; k < signals.size(); ++k) {
          if (position[k] == signals[k].size()) {
            if (!all[k]->input_finished()) rec.input_finished(*all[k]);
            continue;
          }
          const size_t n = std::min(size(gen), signals[k].size() - position[k]);
          rec.accept_waveform(*all[k], signals[k].data() + position[k], n, 16000);
          position[k] += n;
          more = true;
        }
        rec.decode_streams(all);
      }
      rec.decode_streams(all);
      for (size_t k = 0; k < signals.size(); ++k) {
        const auto alone = rec.recognize_waveform(signals[k], 16000);
        const auto together = rec.result(*all[k]);
        const std::string what = mech + " reduction " + std::to_string(reduction) + " stream " + std::to_string(k);
        EXPECT_TRUE(together.final) << what;
        EXPECT_EQ(together.tokens, alone.tokens) << what;
        EXPECT_EQ(together.memory_positions, alone.memory_positions) << what;
        EXPECT_NEAR(together.score, alone.score, 1e-4) << what;
        tokens += static_cast<int64_t>(alone.tokens.size());
      }
    }
  }
  EXPECT_GT(tokens, 40);
  auto model = audio_model("mocha", 0);
  stream::Recognizer rec(model, nn::SearchOptions{});
  auto s = rec.create_stream();
  expect_error([&] { rec.decode_streams({s.get(), s.get()}); }, "streams[0] and streams[1] are the same stream");
}

// Long-form decoding: with eos_only_after_input, </s> is never chosen while input arrives,
// even by a model that wants nothing else (its </s> logit raised by 100), and is chosen
// once the input is finished.
TEST(AudioStream, EosOnlyAfterInputKeepsAStreamGoing) {
  for (int64_t beam : {0, 2}) {
    auto model = audio_model("mocha", 0);
    {
      torch::NoGradGuard no_grad;
      model->named_parameters()["decoder.output.bias"][data::kEos] += 100;
    }
    nn::SearchOptions so;
    so.beam = beam;
    const std::vector<float> x = test_signal(2.0, 16000, 4);
    EXPECT_TRUE(stream::Recognizer(model, so).recognize_waveform(x, 16000).tokens.empty()) << "beam " << beam;
    so.eos_only_after_input = true;
    stream::Recognizer rec(model, so);
    auto s = rec.create_stream();
    for (size_t n = 0; n < x.size(); n += 1600) {
      rec.accept_waveform(*s, x.data() + n, std::min<size_t>(1600, x.size() - n), 16000);
      while (rec.is_ready(*s)) rec.decode(*s);
      EXPECT_FALSE(rec.result(*s).final) << "beam " << beam << " after " << n + 1600 << " samples";
    }
    rec.input_finished(*s);
    while (rec.is_ready(*s)) rec.decode(*s);
    const auto r = rec.result(*s);
    EXPECT_TRUE(r.final) << "beam " << beam;
    EXPECT_GT(r.tokens.size(), 5u) << "beam " << beam;
  }
}

TEST(AudioStream, ErrorsNameTheArgument) {
  auto model = audio_model("monotonic", 0);
  stream::Recognizer rec(model, nn::SearchOptions{});
  auto s = rec.create_stream();
  const std::vector<float> x(100, 0.1f);
  expect_error([&] { rec.accept_waveform(*s, x, 0); }, "sample_rate: expected > 0 Hz, got 0");
  rec.accept_waveform(*s, x, 16000);
  expect_error([&] { rec.accept_waveform(*s, x, 8000); }, "this stream's samples came at 16000 Hz, now 8000 Hz");
  // A NaN sample used to be accepted and make every frame it reached NaN; named by the
  // caller's index, before any resampling.
  std::vector<float> broken = x;
  broken[37] = std::nanf("");
  expect_error([&] { rec.accept_waveform(*s, broken, 16000); },
               "Recognizer::accept_waveform: samples[37] = nan: expected finite samples");
  rec.input_finished(*s);
  expect_error([&] { rec.accept_waveform(*s, x, 16000); }, "input_finished() was already called");
  auto symbols = std::make_shared<nn::Seq2Seq>(tiny_monotonic_options("mocha"));
  stream::Recognizer text(symbols, nn::SearchOptions{});
  auto t = text.create_stream();
  expect_error([&] { text.accept_waveform(*t, x, 16000); }, "the model takes symbols, not audio");
}

}  // namespace
}  // namespace mona::test
