// mona::audio::GlobalCmvn against a brute-force two-pass mean / standard deviation, the
// floor on the standard deviation, apply(), from() and the argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "mona/audio/cmvn.h"
#include "util/temp_dir.h"

namespace mona::audio {
namespace {

Features random_features(int64_t frames, int64_t bins, std::mt19937_64& gen) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  Features f;
  f.num_frames = frames;
  f.num_bins = bins;
  for (int64_t t = 0; t < frames; ++t) {
    for (int64_t b = 0; b < bins; ++b) {
      f.data.push_back(-12.0f + 0.1f * static_cast<float>(b) + (0.5f + 0.05f * b) * n(gen));
    }
  }
  return f;
}

TEST(GlobalCmvn, MatchesBruteForceStatistics) {
  std::mt19937_64 gen(1);
  std::vector<Features> utts;
  for (int64_t frames : {17, 1, 250, 0, 93}) utts.push_back(random_features(frames, 5, gen));
  GlobalCmvn cmvn;
  EXPECT_TRUE(cmvn.empty());
  for (const Features& f : utts) cmvn.accumulate(f);
  cmvn.finalize();
  EXPECT_FALSE(cmvn.empty());
  EXPECT_EQ(cmvn.num_bins(), 5);
  EXPECT_EQ(cmvn.frames_seen(), 17 + 1 + 250 + 93);
  // Two passes in long double over every frame pooled.
  for (int64_t b = 0; b < 5; ++b) {
    long double sum = 0, n = 0;
    for (const Features& f : utts)
      for (int64_t t = 0; t < f.num_frames; ++t) sum += f.row(t)[b], n += 1;
    const long double mean = sum / n;
    long double var = 0;
    for (const Features& f : utts)
      for (int64_t t = 0; t < f.num_frames; ++t) var += (f.row(t)[b] - mean) * (f.row(t)[b] - mean);
    const long double sd = std::sqrt(var / n);
    // Double sums of ~360 float values: agreement to ~1e-13 relative; 1e-10 leaves margin.
    EXPECT_NEAR(cmvn.mean()[b], static_cast<double>(mean), 1e-10);
    EXPECT_NEAR(1.0 / cmvn.inv_std()[b], static_cast<double>(sd), 1e-10);
  }
  // After apply, the pooled frames have mean 0 and standard deviation 1 per bin (float32
  // outputs: 1e-5).
  std::vector<double> s(5, 0), s2(5, 0);
  int64_t n = 0;
  for (Features f : utts) {
    cmvn.apply(f);
    for (int64_t t = 0; t < f.num_frames; ++t, ++n)
      for (int64_t b = 0; b < 5; ++b) s[b] += f.row(t)[b], s2[b] += f.row(t)[b] * f.row(t)[b];
  }
  for (int64_t b = 0; b < 5; ++b) {
    EXPECT_NEAR(s[b] / n, 0.0, 1e-5);
    EXPECT_NEAR(s2[b] / n, 1.0, 1e-5);
  }
}

TEST(GlobalCmvn, ConstantBinUsesTheFloor) {
  Features f;
  f.num_frames = 3;
  f.num_bins = 2;
  f.data = {4, 1, 4, 2, 4, 3};
  GlobalCmvn c;
  c.accumulate(f);
  c.finalize(1e-3);
  EXPECT_EQ(c.mean()[0], 4.0);
  EXPECT_EQ(c.inv_std()[0], 1e3);
  EXPECT_DOUBLE_EQ(c.mean()[1], 2.0);
  EXPECT_DOUBLE_EQ(c.inv_std()[1], 1.0 / std::sqrt(2.0 / 3.0));
  c.apply(f);
  EXPECT_EQ(f.data[0], 0.0f);
  EXPECT_FLOAT_EQ(f.data[1], static_cast<float>(-1.0 / std::sqrt(2.0 / 3.0)));
}

TEST(GlobalCmvn, FromAndErrors) {
  GlobalCmvn c = GlobalCmvn::from({1.0, 2.0}, {0.5, 4.0});
  EXPECT_EQ(c.num_bins(), 2);
  EXPECT_EQ(c.frames_seen(), 0);
  Features f;
  f.num_frames = 1;
  f.num_bins = 2;
  f.data = {3.0f, 2.5f};
  c.apply(f);
  EXPECT_EQ(f.data, (std::vector<float>{1.0f, 2.0f}));

  Features three;
  three.num_frames = 1;
  three.num_bins = 3;
  three.data = {1, 2, 3};
  EXPECT_ERROR_CONTAINS(c.apply(three), "3 bins", "2");
  EXPECT_ERROR_CONTAINS(c.accumulate(three), "3 bins", "2");
  GlobalCmvn fresh;
  EXPECT_ERROR_CONTAINS(fresh.apply(three), "finalize");
  EXPECT_ERROR_CONTAINS(fresh.finalize(), "no frames");
  fresh.accumulate(three);
  EXPECT_ERROR_CONTAINS(fresh.finalize(0), "min_std", "0");
  EXPECT_ERROR_CONTAINS(GlobalCmvn::from({}, {}), "empty");
  EXPECT_ERROR_CONTAINS(GlobalCmvn::from({1, 2}, {1}), "2 bins", "1");
  EXPECT_ERROR_CONTAINS(GlobalCmvn::from({1}, {0}), "inv_std[0]", "0");
  EXPECT_ERROR_CONTAINS(GlobalCmvn::from({NAN}, {1}), "mean[0]", "nan");
  Features broken = three;
  broken.data.pop_back();
  EXPECT_ERROR_CONTAINS(fresh.accumulate(broken), "data holds 2");
  // A NaN used to give its bin a NaN mean and the floor's 1 / min_std (finalize clamps the
  // NaN variance at 0), statistics from() refuses; refused, adding nothing.
  Features nan_frame = three;
  nan_frame.data[2] = NAN;
  EXPECT_ERROR_CONTAINS(fresh.accumulate(nan_frame), "frame 0, bin 2 = nan: expected finite values");
  EXPECT_EQ(fresh.frames_seen(), 1);
}

}  // namespace
}  // namespace mona::audio
