// mona::audio::resample and StreamResampler: a known sine keeps its frequency and amplitude
// (checked against the analytic signal, not against earlier output), the length follows the
// rate ratio, and any chunking of the input gives the same output bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "mona/audio/resample.h"
#include "util/temp_dir.h"

namespace mona::audio {
namespace {

std::vector<float> sine(size_t n, double hz, int rate, double amp) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(amp * std::sin(2 * M_PI * hz * i / rate));
  return x;
}

// Least-squares amplitude and phase of a sine of frequency hz in y[from, to), and the
// residual RMS: a resampled sine must be that sine (frequency kept) with the same amplitude.
struct Fit {
  double amp, rms_residual;
};
Fit fit_sine(const std::vector<float>& y, double hz, int rate, size_t from, size_t to) {
  double ss = 0, sc = 0, cc = 0, ys = 0, yc = 0;
  for (size_t i = from; i < to; ++i) {
    const double s = std::sin(2 * M_PI * hz * i / rate), c = std::cos(2 * M_PI * hz * i / rate);
    ss += s * s; sc += s * c; cc += c * c; ys += y[i] * s; yc += y[i] * c;
  }
  const double det = ss * cc - sc * sc;
  const double a = (ys * cc - yc * sc) / det, b = (yc * ss - ys * sc) / det;
  double r = 0;
  for (size_t i = from; i < to; ++i) {
    const double e = y[i] - a * std::sin(2 * M_PI * hz * i / rate) - b * std::cos(2 * M_PI * hz * i / rate);
    r += e * e;
  }
  return {std::hypot(a, b), std::sqrt(r / static_cast<double>(to - from))};
}

TEST(Resample, SineKeepsFrequencyAndAmplitude) {
  struct Case { int from, to; double hz; };
  for (const Case c : {Case{8000, 16000, 440}, Case{44100, 16000, 1000}, Case{16000, 8000, 3000},
                       Case{22050, 16000, 5000}}) {
    SCOPED_TRACE(std::to_string(c.from) + " -> " + std::to_string(c.to) + " Hz, " + std::to_string(c.hz) + " Hz tone");
    const std::vector<float> x = sine(static_cast<size_t>(c.from), c.hz, c.from, 0.5);  // 1 s
    const std::vector<float> y = resample(x, c.from, c.to);
    EXPECT_NEAR(static_cast<double>(y.size()), c.to, 2);
    // Away from the edges (the filter's start-up): the output is the same sine at the new
    // rate with the same amplitude (SOXR_HQ's pass band is flat to ~0.01 dB, 0.1%) and a
    // residual at the level of its 20-bit precision, far below the 1e-3 asked here.
    const Fit f = fit_sine(y, c.hz, c.to, y.size() / 10, y.size() * 9 / 10);
    EXPECT_NEAR(f.amp, 0.5, 0.5 * 2e-3);
    EXPECT_LT(f.rms_residual, 1e-3);
  }
}

TEST(Resample, AboveTheNewNyquistIsRemoved) {
  // 6 kHz at 16 kHz -> 8 kHz: above the 4 kHz Nyquist frequency, filtered out, not aliased
  // to 2 kHz.
  const std::vector<float> y = resample(sine(16000, 6000, 16000, 0.5), 16000, 8000);
  const Fit alias = fit_sine(y, 2000, 8000, 800, 7200);
  EXPECT_LT(alias.amp, 1e-3);
  double rms = 0;
  for (size_t i = 800; i < 7200; ++i) rms += y[i] * y[i];
  EXPECT_LT(std::sqrt(rms / 6400), 1e-3);
}

TEST(StreamResampler, AnyChunkingGivesTheSameOutputBitForBit) {
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> x(30011);
  for (float& v : x) v = u(gen);
  for (auto [from, to] : {std::pair{16000, 8000}, std::pair{8000, 16000}, std::pair{44100, 16000}}) {
    const std::vector<float> whole = resample(x, from, to);
    for (size_t max_chunk : {size_t{1}, size_t{13}, size_t{1024}, size_t{5000}}) {
      SCOPED_TRACE(std::to_string(from) + " -> " + std::to_string(to) + ", chunks up to " + std::to_string(max_chunk));
      StreamResampler r(from, to);
      std::uniform_int_distribution<size_t> size(1, max_chunk);
      std::vector<float> out;
      size_t pos = 0;
      while (pos < x.size()) {
        const size_t n = std::min(x.size() - pos, size(gen));
        const std::vector<float> part = r.accept(x.data() + pos, n);
        out.insert(out.end(), part.begin(), part.end());
        pos += n;
      }
      const std::vector<float> tail = r.finish();
      out.insert(out.end(), tail.begin(), tail.end());
      ASSERT_EQ(out.size(), whole.size());
      for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], whole[i]) << i;
    }
  }
}

TEST(StreamResampler, ResetAndErrors) {
  const std::vector<float> x = sine(4000, 300, 8000, 0.3);
  StreamResampler r(8000, 16000);
  std::vector<float> a = r.accept(x.data(), x.size());
  std::vector<float> t = r.finish();
  a.insert(a.end(), t.begin(), t.end());
  EXPECT_ERROR_CONTAINS(r.accept(x.data(), 1), "after finish");
  r.reset();
  std::vector<float> b = r.accept(x.data(), x.size());
  t = r.finish();
  b.insert(b.end(), t.begin(), t.end());
  EXPECT_EQ(a, b);
  EXPECT_ERROR_CONTAINS(StreamResampler(0, 16000), "from_rate", "0");
  EXPECT_ERROR_CONTAINS(StreamResampler(16000, -8000), "to_rate", "-8000");
  EXPECT_ERROR_CONTAINS(resample(x, 8000, 0), "to_rate", "0");
  StreamResampler s(8000, 16000);
  EXPECT_ERROR_CONTAINS(s.accept(nullptr, 5), "null");
  EXPECT_EQ(resample(x, 8000, 8000), x);
  // 1 Hz to 1 MHz sized a 4 GB buffer per block and ran for minutes.
  EXPECT_ERROR_CONTAINS(resample(std::vector<float>(10, 0.1f), 1, 1000000), "1 Hz to 1000000 Hz",
                        "at most 256 times the rate");
  EXPECT_TRUE(resample({}, 8000, 16000).empty());
}

}  // namespace
}  // namespace mona::audio
