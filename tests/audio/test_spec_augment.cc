// mona::audio::spec_augment: seeded determinism, masks within the option bounds (found
// back from the zeros they leave), the mask values, the time warp's draws within the paper's
// bounds (found back by trying every warp), nothing when disabled, and the option checks.
// time_warp's interpolation is compared with LibTorch's in tests/train/test_time_warp.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <vector>

#include "mona/audio/spec_augment.h"
#include "util/temp_dir.h"

namespace mona::audio {
namespace {

// Nonzero features (1 + index), so that every zero is a mask.
Features ones(int64_t frames, int64_t bins) {
  Features f;
  f.num_frames = frames;
  f.num_bins = bins;
  for (int64_t i = 0; i < frames * bins; ++i) f.data.push_back(1.0f + static_cast<float>(i));
  return f;
}

TEST(SpecAugment, SameSeedSameMasks) {
  SpecAugmentOptions o;
  Features a = ones(300, 80), b = ones(300, 80), c = ones(300, 80);
  core::Rng r1(5), r2(5), r3(6);
  spec_augment(a, o, r1);
  spec_augment(b, o, r2);
  spec_augment(c, o, r3);
  EXPECT_EQ(a.data, b.data);
  EXPECT_NE(a.data, c.data);
}

TEST(SpecAugment, MasksStayWithinTheBounds) {
  SpecAugmentOptions o;
  o.num_freq_masks = 1;
  o.num_time_masks = 1;
  o.max_freq_mask_bins = 10;
  o.max_time_mask_frames = 30;
  o.max_time_mask_fraction = 0.1;  // 100 frames: at most 10
  core::Rng rng(1);
  int64_t widest_f = 0, widest_t = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Features f = ones(100, 40);
    spec_augment(f, o, rng);
    // Bins zero in every frame, and frames zero in every bin: one run each.
    std::vector<int64_t> zero_bins, zero_frames;
    for (int64_t b = 0; b < 40; ++b) {
      bool all = true;
      for (int64_t t = 0; t < 100; ++t) all = all && f.row(t)[b] == 0.0f;
      if (all) zero_bins.push_back(b);
    }
    for (int64_t t = 0; t < 100; ++t) {
      bool all = true;
      for (int64_t b = 0; b < 40; ++b) all = all && f.row(t)[b] == 0.0f;
      if (all) zero_frames.push_back(t);
    }
    ASSERT_LE(zero_bins.size(), 10u);
    ASSERT_LE(zero_frames.size(), 10u);
    if (!zero_bins.empty()) {
      ASSERT_EQ(zero_bins.back() - zero_bins.front() + 1, static_cast<int64_t>(zero_bins.size()));
    }
    if (!zero_frames.empty()) {
      ASSERT_EQ(zero_frames.back() - zero_frames.front() + 1, static_cast<int64_t>(zero_frames.size()));
    }
    // Every zero is in a masked bin or frame.
    for (int64_t t = 0; t < 100; ++t)
      for (int64_t b = 0; b < 40; ++b)
        if (f.row(t)[b] == 0.0f) {
          const bool in_bin = std::find(zero_bins.begin(), zero_bins.end(), b) != zero_bins.end();
          const bool in_frame = std::find(zero_frames.begin(), zero_frames.end(), t) != zero_frames.end();
          ASSERT_TRUE(in_bin || in_frame) << t << " " << b;
        }
    widest_f = std::max<int64_t>(widest_f, zero_bins.size());
    widest_t = std::max<int64_t>(widest_t, zero_frames.size());
  }
  // Over 300 draws the widest masks reach their bounds (each width has probability 1/11).
  EXPECT_EQ(widest_f, 10);
  EXPECT_EQ(widest_t, 10);
}

// No masks, only the warp: every output is time_warp(in, center, center + w) for a center in
// {W + 1, ..., T - W - 1} and |w| <= W, found by trying every (center, warped) pair; over the
// trials both extreme distances and both extreme centers occur.
TEST(SpecAugment, TheWarpIsOneThePaperAllows) {
  SpecAugmentOptions o;
  o.max_time_warp_frames = 4;
  o.num_freq_masks = 0;
  o.num_time_masks = 0;
  ASSERT_TRUE(o.enabled());
  constexpr int64_t T = 20, W = 4;
  // Random values: no two warps give the same frames (a ramp such as ones() could).
  Features in = ones(T, 3);
  core::Rng values(17);
  for (float& v : in.data) v = static_cast<float>(values.uniform());
  core::Rng rng(3);
  std::set<int64_t> distances, centers;
  for (int trial = 0; trial < 400; ++trial) {
    Features f = in;
    spec_augment(f, o, rng);
    if (f.data == in.data) {  // w = 0
      distances.insert(0);
      continue;
    }
    int found = 0;
    for (int64_t c = 1; c < T; ++c) {
      for (int64_t warped = 1; warped < T; ++warped) {
        Features g = in;
        time_warp(g, c, warped);
        if (g.data != f.data) continue;
        ++found;
        ASSERT_GE(c, W + 1);
        ASSERT_LE(c, T - W - 1);
        ASSERT_LE(std::abs(warped - c), W);
        distances.insert(warped - c);
        centers.insert(c);
      }
    }
    ASSERT_EQ(found, 1) << "trial " << trial;  // distinct rows: one warp makes each output
  }
  EXPECT_EQ(distances.size(), static_cast<size_t>(2 * W + 1));  // -4 .. 4, each 1/9 a trial
  EXPECT_EQ(*centers.begin(), W + 1);
  EXPECT_EQ(*centers.rbegin(), T - W - 1);
}

// W is capped at floor((T - 2) / 2): a 3-frame utterance is not warped (nothing drawn), a
// 4-frame one moves its center 2 by at most 1 frame.
TEST(SpecAugment, ShortUtterancesAreWarpedLess) {
  SpecAugmentOptions o;
  o.max_time_warp_frames = 80;
  o.num_freq_masks = 0;
  o.num_time_masks = 0;
  core::Rng rng(1), untouched(1);
  Features three = ones(3, 2);
  spec_augment(three, o, rng);
  EXPECT_EQ(three.data, ones(3, 2).data);
  EXPECT_EQ(rng.next(), untouched.next());
  Features in = ones(4, 2);
  core::Rng values(5);
  for (float& v : in.data) v = static_cast<float>(values.uniform());
  std::set<int64_t> seen;
  for (int trial = 0; trial < 50; ++trial) {
    Features four = in;
    spec_augment(four, o, rng);
    bool one_of = false;
    for (int64_t warped : {1, 2, 3}) {
      Features g = in;
      time_warp(g, 2, warped);
      if (g.data == four.data) {
        one_of = true;
        seen.insert(warped);
      }
    }
    ASSERT_TRUE(one_of) << "trial " << trial;
  }
  EXPECT_EQ(seen.size(), 3u);  // each 1/3 a trial
}

TEST(SpecAugment, MaskedCellsTakeTheMaskValues) {
  SpecAugmentOptions o;  // two frequency and two time masks
  const std::vector<float> mean = {-1.5f, -2.5f, -3.5f, -4.5f, -5.5f};
  core::Rng a(9), b(9);
  Features zeros = ones(60, 5), means = ones(60, 5);
  spec_augment(zeros, o, a);
  spec_augment(means, o, b, mean);
  // The same draws: a cell is masked in one exactly where it is in the other.
  int64_t masked = 0;
  for (int64_t t = 0; t < 60; ++t) {
    for (int64_t j = 0; j < 5; ++j) {
      if (zeros.row(t)[j] == 0.0f) {
        ++masked;
        ASSERT_EQ(means.row(t)[j], mean[static_cast<size_t>(j)]);
      } else {
        ASSERT_EQ(means.row(t)[j], zeros.row(t)[j]);
      }
    }
  }
  EXPECT_GT(masked, 0);
  Features f = ones(10, 5);
  const std::vector<float> two = {1.0f, 2.0f};
  EXPECT_ERROR_CONTAINS(spec_augment(f, o, a, two), "mask_values", "5", "2");
}

TEST(TimeWarp, ItsPointsAreChecked) {
  Features f = ones(10, 2);
  time_warp(f, 4, 4);
  EXPECT_EQ(f.data, ones(10, 2).data);
  EXPECT_ERROR_CONTAINS(time_warp(f, 0, 3), "center", "0");
  EXPECT_ERROR_CONTAINS(time_warp(f, 10, 3), "center", "10");
  EXPECT_ERROR_CONTAINS(time_warp(f, 3, 0), "warped", "0");
  EXPECT_ERROR_CONTAINS(time_warp(f, 3, 12), "warped", "12");
  f.data.pop_back();
  EXPECT_ERROR_CONTAINS(time_warp(f, 3, 4), "time_warp", "19");
}

TEST(SpecAugment, DisabledOrEmptyChangesNothing) {
  SpecAugmentOptions off;
  off.num_freq_masks = 0;
  off.num_time_masks = 0;
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(SpecAugmentOptions().enabled());
  Features f = ones(50, 20);
  const Features before = f;
  core::Rng rng(1), untouched(1);
  spec_augment(f, off, rng);
  EXPECT_EQ(f.data, before.data);
  EXPECT_EQ(rng.next(), untouched.next());  // nothing drawn
  Features empty;
  empty.num_bins = 80;
  spec_augment(empty, SpecAugmentOptions(), rng);
  EXPECT_TRUE(empty.data.empty());
  // A one-frame utterance: the 20% cap leaves no time mask.
  SpecAugmentOptions time_only;
  time_only.num_freq_masks = 0;
  Features one = ones(1, 20);
  spec_augment(one, time_only, rng);
  EXPECT_EQ(one.data, ones(1, 20).data);
}

TEST(SpecAugmentOptions, ValidateAndPrint) {
  SpecAugmentOptions o;
  o.num_freq_masks = -1;
  EXPECT_ERROR_CONTAINS(o.validate(), "num_freq_masks", "-1");
  o = SpecAugmentOptions();
  o.max_time_mask_fraction = 1.5;
  EXPECT_ERROR_CONTAINS(o.validate(), "max_time_mask_fraction", "1.5");
  Features f = ones(10, 10);
  core::Rng rng(1);
  EXPECT_ERROR_CONTAINS(spec_augment(f, o, rng), "max_time_mask_fraction");
  o = SpecAugmentOptions();
  o.max_freq_mask_bins = -3;
  EXPECT_ERROR_CONTAINS(o.validate(), "max_freq_mask_bins", "-3");
  o = SpecAugmentOptions();
  o.max_time_warp_frames = -2;
  EXPECT_ERROR_CONTAINS(o.validate(), "max_time_warp_frames", "-2");
  const std::string s = SpecAugmentOptions().to_string();
  for (const char* part : {"max_time_warp_frames=0", "num_freq_masks=2", "max_freq_mask_bins=27", "num_time_masks=2",
                           "max_time_mask_frames=40", "max_time_mask_fraction=0.2"}) {
    EXPECT_NE(s.find(part), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace mona::audio
