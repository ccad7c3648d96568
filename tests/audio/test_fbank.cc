// mona::audio::OnlineFbank and FbankOptions: chunking independence (bit for bit, both
// snip_edges values, dither on and off), bounded memory, frame counts, short signals, the
// option checks and the printable form. The values themselves are checked against
// torchaudio in test_fbank_reference.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>

#include "mona/audio/fbank.h"
#include "util/temp_dir.h"

namespace mona::audio {
namespace {

std::vector<float> test_signal(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = 0.5f * static_cast<float>(std::sin(0.05 * static_cast<double>(i))) + u(gen);
  }
  return x;
}

// Feeds `x` in random chunks (sizes 1 .. max_chunk, a third of them 1 sample), taking the
// frames at random moments; checks the bound on held samples as it goes.
Features stream(const FbankOptions& opts, const std::vector<float>& x, uint64_t dither_seed,
                std::mt19937_64& gen, size_t max_chunk, int64_t* max_held = nullptr) {
  OnlineFbank f(opts, dither_seed);
  Features all;
  all.num_bins = opts.num_bins();
  auto take = [&] {
    const Features part = f.take_frames();
    EXPECT_EQ(part.num_bins, opts.num_bins());
    all.data.insert(all.data.end(), part.data.begin(), part.data.end());
    all.num_frames += part.num_frames;
  };
  std::uniform_int_distribution<size_t> size(1, max_chunk);
  std::uniform_int_distribution<int> coin(0, 2);
  size_t pos = 0;
  while (pos < x.size()) {
    const size_t n = std::min(x.size() - pos, coin(gen) == 0 ? size_t{1} : size(gen));
    f.accept_waveform(x.data() + pos, n);
    pos += n;
    // At most one window plus the chunk just given (plus a shift of slack).
    const int64_t bound = opts.window_size() + opts.window_shift() + static_cast<int64_t>(n);
    EXPECT_LE(f.num_samples_held(), bound) << "after " << pos << " samples";
    if (max_held) *max_held = std::max(*max_held, f.num_samples_held());
    // Every frame whose window has arrived is ready.
    if (opts.snip_edges) {
      EXPECT_EQ(f.num_frames_ready(), opts.num_frames(static_cast<int64_t>(pos)));
    }
    if (coin(gen) == 0) take();
  }
  f.input_finished();
  take();
  EXPECT_EQ(f.num_samples_held(), 0);
  return all;
}

TEST(OnlineFbank, AnyChunkingGivesTheWholeSignalFramesBitForBit) {
  const std::vector<float> x = test_signal(16000 + 137, 1);
  std::mt19937_64 gen(7);
  for (bool snip : {true, false}) {
    for (double dither : {0.0, 1e-3}) {
      FbankOptions opts;
      opts.snip_edges = snip;
      opts.dither = dither;
      opts.use_energy = true;
      const Features whole = compute_fbank(opts, x, 99);
      ASSERT_EQ(whole.num_frames, opts.num_frames(static_cast<int64_t>(x.size())));
      for (size_t max_chunk : {size_t{1}, size_t{7}, size_t{160}, size_t{4000}}) {
        SCOPED_TRACE("snip_edges " + std::to_string(snip) + " dither " + std::to_string(dither) +
                     " chunks up to " + std::to_string(max_chunk));
        const Features s = stream(opts, x, 99, gen, max_chunk);
        ASSERT_EQ(s.num_frames, whole.num_frames);
        ASSERT_EQ(s.data.size(), whole.data.size());
        for (size_t i = 0; i < s.data.size(); ++i) {
          ASSERT_EQ(s.data[i], whole.data[i]) << "value " << i;  // bit for bit: same arithmetic
        }
      }
    }
  }
}

TEST(OnlineFbank, DitherIsSeededAndChangesTheFeatures) {
  const std::vector<float> x = test_signal(8000, 2);
  FbankOptions opts;
  opts.dither = 1e-2;
  const Features a = compute_fbank(opts, x, 1), b = compute_fbank(opts, x, 1),
                 c = compute_fbank(opts, x, 2);
  opts.dither = 0;
  const Features d = compute_fbank(opts, x, 1);
  EXPECT_EQ(a.data, b.data);
  EXPECT_NE(a.data, c.data);
  EXPECT_NE(a.data, d.data);
}

TEST(OnlineFbank, ResetStartsAgain) {
  const std::vector<float> x = test_signal(5000, 3);
  FbankOptions opts;
  opts.dither = 1e-3;
  OnlineFbank f(opts, 5);
  f.accept_waveform(x.data(), x.size());
  f.input_finished();
  const Features first = f.take_frames();
  EXPECT_ERROR_CONTAINS(f.accept_waveform(x.data(), 1), "after input_finished");
  f.reset();
  // A sample that is no number would make every frame whose window holds it NaN.
  std::vector<float> broken(x.begin(), x.begin() + 400);
  broken[250] = INFINITY;
  f.accept_waveform(broken.data(), 200);
  EXPECT_ERROR_CONTAINS(f.accept_waveform(broken.data() + 200, 200),
                        "OnlineFbank::accept_waveform: samples[50] = inf (sample 250 of the signal)");
  f.reset();
  EXPECT_EQ(f.num_frames_ready(), 0);
  f.accept_waveform(x.data(), x.size());
  f.input_finished();
  EXPECT_EQ(f.take_frames().data, first.data);
}

TEST(OnlineFbank, MemoryStaysBoundedOnALongStream) {
  // One minute at 16 kHz in 10 ms chunks: never more than a window and a chunk held.
  FbankOptions opts;
  for (bool snip : {true, false}) {
    opts.snip_edges = snip;
    OnlineFbank f(opts);
    const std::vector<float> chunk = test_signal(160, 4);
    int64_t max_held = 0;
    for (int i = 0; i < 6000; ++i) {
      f.accept_waveform(chunk.data(), chunk.size());
      max_held = std::max(max_held, f.num_samples_held());
      if (i % 10 == 0) f.take_frames();
    }
    EXPECT_LE(max_held, opts.window_size() + 160);
    EXPECT_EQ(f.num_samples_accepted(), 960000);
    f.input_finished();
    EXPECT_EQ(f.num_frames_ready(), opts.num_frames(960000));
  }
}

TEST(Fbank, FrameCountsFollowKaldi) {
  FbankOptions o;  // 400-sample window, 160-sample shift
  EXPECT_EQ(o.window_size(), 400);
  EXPECT_EQ(o.window_shift(), 160);
  EXPECT_EQ(o.padded_window_size(), 512);
  EXPECT_EQ(o.num_frames(0), 0);
  EXPECT_EQ(o.num_frames(399), 0);
  EXPECT_EQ(o.num_frames(400), 1);
  EXPECT_EQ(o.num_frames(559), 1);
  EXPECT_EQ(o.num_frames(560), 2);
  o.snip_edges = false;  // (N + 80) / 160
  EXPECT_EQ(o.num_frames(0), 0);
  EXPECT_EQ(o.num_frames(79), 0);
  EXPECT_EQ(o.num_frames(80), 1);
  EXPECT_EQ(o.num_frames(240), 2);
  o.sample_rate = 22050;  // int(551.25), int(220.5)
  EXPECT_EQ(o.window_size(), 551);
  EXPECT_EQ(o.window_shift(), 220);
  EXPECT_EQ(o.padded_window_size(), 1024);
}

TEST(Fbank, ShortSignalsGiveZeroOrReflectedFrames) {
  FbankOptions o;
  for (size_t n : {size_t{0}, size_t{1}, size_t{79}, size_t{399}}) {
    const Features f = compute_fbank(o, test_signal(n, 5));
    EXPECT_EQ(f.num_frames, 0) << n;
    EXPECT_TRUE(f.data.empty());
    EXPECT_EQ(f.num_bins, 80);
  }
  // snip_edges = false: 100 samples give one frame, reflected several times over (Kaldi's
  // extract_window); finite values, and the same streamed one sample at a time.
  o.snip_edges = false;
  const std::vector<float> x = test_signal(100, 6);
  const Features f = compute_fbank(o, x);
  ASSERT_EQ(f.num_frames, 1);
  for (float v : f.data) EXPECT_TRUE(std::isfinite(v));
  OnlineFbank s(o);
  for (float v : x) s.accept_waveform(&v, 1);
  EXPECT_EQ(s.num_frames_ready(), 0);
  s.input_finished();
  EXPECT_EQ(s.take_frames().data, f.data);
}

TEST(Fbank, SilenceHitsTheFloor) {
  FbankOptions o;
  o.use_energy = true;
  const Features f = compute_fbank(o, std::vector<float>(1000, 0.0f));
  ASSERT_GT(f.num_frames, 0);
  const float floor = static_cast<float>(std::log(static_cast<double>(FLT_EPSILON)));
  for (float v : f.data) EXPECT_EQ(v, floor);
  o.energy_floor = 1e-3;
  const Features g = compute_fbank(o, std::vector<float>(1000, 0.0f));
  EXPECT_EQ(g.row(0)[0], static_cast<float>(std::log(1e-3)));
  EXPECT_EQ(g.row(0)[1], floor);
}

TEST(Fbank, SineConcentratesInItsMelBin) {
  // A 1 kHz tone: the strongest mel bin is the one whose centre is nearest 1 kHz.
  FbankOptions o;
  std::vector<float> x(16000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * static_cast<float>(std::sin(2 * M_PI * 1000.0 * i / 16000.0));
  const Features f = compute_fbank(o, x);
  const double mel_lo = 1127 * std::log(1 + 20 / 700.0), mel_hi = 1127 * std::log(1 + 8000 / 700.0);
  const double delta = (mel_hi - mel_lo) / 81;
  int nearest = 0;
  for (int b = 0; b < 80; ++b) {
    const double c = 700 * (std::exp((mel_lo + (b + 1) * delta) / 1127) - 1);
    const double cn = 700 * (std::exp((mel_lo + (nearest + 1) * delta) / 1127) - 1);
    if (std::fabs(c - 1000) < std::fabs(cn - 1000)) nearest = b;
  }
  const float* row = f.row(f.num_frames / 2);
  EXPECT_EQ(std::max_element(row, row + 80) - row, nearest);
}

TEST(FbankOptions, ValidateNamesTheFieldAndValue) {
  auto bad = [](auto change, const char* field, const char* value) {
    FbankOptions o;
    change(o);
    EXPECT_ERROR_CONTAINS(o.validate(), field, value);
    EXPECT_ERROR_CONTAINS(OnlineFbank{o}, field, value);
  };
  bad([](FbankOptions& o) { o.sample_rate = 0; }, "sample_rate", "0");
  bad([](FbankOptions& o) { o.frame_length_ms = -1; }, "frame_length_ms", "-1");
  bad([](FbankOptions& o) { o.frame_length_ms = 0.1; }, "frame_length_ms", "0.1");
  bad([](FbankOptions& o) { o.frame_shift_ms = 0; }, "frame_shift_ms", "0");
  // Durations whose sample counts overflowed int64 (a shift of -9223372036854775808 samples).
  bad([](FbankOptions& o) { o.frame_shift_ms = 1e300; }, "frame_shift_ms: expected a value in (0, 1e6]", "1e+300");
  bad([](FbankOptions& o) { o.frame_length_ms = 1e300; }, "frame_length_ms: expected a value in (0, 1e6]", "1e+300");
  bad([](FbankOptions& o) { o.dither = INFINITY; }, "dither: expected a finite value >= 0", "inf");
  bad([](FbankOptions& o) { o.dither = -0.5; }, "dither", "-0.5");
  bad([](FbankOptions& o) { o.preemphasis = 1.5; }, "preemphasis", "1.5");
  bad([](FbankOptions& o) { o.window = "kaiser"; }, "window", "kaiser");
  bad([](FbankOptions& o) { o.num_mel_bins = 2; }, "num_mel_bins", "2");
  bad([](FbankOptions& o) { o.low_freq = 9000; }, "low_freq", "9000");
  bad([](FbankOptions& o) { o.high_freq = 9000; }, "high_freq", "9000");
  bad([](FbankOptions& o) { o.high_freq = -7990; }, "high_freq", "-7990");
  bad([](FbankOptions& o) { o.energy_floor = -1; }, "energy_floor", "-1");
  bad([](FbankOptions& o) { o.round_to_power_of_two = false; o.frame_length_ms = 25.0625; },
      "round_to_power_of_two", "401");
  // Too many bins for the FFT: a mel bin with no FFT bin in it.
  FbankOptions o;
  o.num_mel_bins = 400;
  EXPECT_ERROR_CONTAINS(OnlineFbank{o}, "num_mel_bins = 400", "covers no FFT bin");
  EXPECT_ERROR_CONTAINS(o.validate(), "num_mel_bins = 400", "mel bin 0 covers no FFT bin");
  FbankOptions ok;
  EXPECT_NO_THROW(ok.validate());
}

TEST(FbankOptions, ValidateRefusesWhatTheFilterbankRefuses) {
  // 128 mel bins at 8 kHz (a 256-point FFT, 20 .. 4000 Hz): the low bins are narrower than
  // an FFT bin and bin 4 is the first with no FFT bin under it. validate() used to accept
  // these options and only the filterbank refused them.
  FbankOptions o;
  o.sample_rate = 8000;
  o.num_mel_bins = 128;
  const char* parts[] = {"FbankOptions: num_mel_bins = 128 is too many for an FFT of 256 points",
                         "sample_rate = 8000 Hz", "low_freq = 20 Hz", "4000 Hz",
                         "mel bin 4 covers no FFT bin"};
  EXPECT_ERROR_CONTAINS(o.validate(), parts[0], parts[1], parts[2], parts[3], parts[4]);
  EXPECT_ERROR_CONTAINS(OnlineFbank{o}, parts[0], parts[1], parts[2], parts[3], parts[4]);
  EXPECT_ERROR_CONTAINS(compute_fbank(o, std::vector<float>(400, 0.f)), parts[4]);
  // Every bin count the filterbank accepts, validate() accepts, and the reverse: 95 is the
  // most at 8 kHz with these frames.
  o.num_mel_bins = 95;
  EXPECT_NO_THROW(o.validate());
  EXPECT_NO_THROW(OnlineFbank{o});
  o.num_mel_bins = 96;
  EXPECT_ERROR_CONTAINS(o.validate(), "num_mel_bins = 96", "mel bin 3 covers no FFT bin");
  EXPECT_ERROR_CONTAINS(OnlineFbank{o}, "num_mel_bins = 96", "mel bin 3 covers no FFT bin");
}

TEST(FbankOptions, PrintsEveryField) {
  FbankOptions o;
  const std::string s = o.to_string();
  for (const char* f :
       {"sample_rate=16000", "frame_length_ms=25", "frame_shift_ms=10", "dither=0",
        "preemphasis=0.97", "remove_dc_offset=true", "window=povey", "blackman_coeff=0.42",
        "round_to_power_of_two=true", "num_mel_bins=80", "low_freq=20", "high_freq=0",
        "energy_floor=0", "use_energy=false", "use_log_fbank=true", "use_power=true",
        "snip_edges=true", "raw_energy=true"}) {
    EXPECT_NE(s.find(f), std::string::npos) << f << " not in " << s;
  }
}

TEST(OnlineFbank, NullSamplesAreRefused) {
  OnlineFbank f{FbankOptions()};
  EXPECT_ERROR_CONTAINS(f.accept_waveform(nullptr, 3), "samples", "null");
  EXPECT_NO_THROW(f.accept_waveform(nullptr, 0));
}

}  // namespace
}  // namespace mona::audio
