// mona::audio::spec_augment: seeded determinism, masks within the option bounds (found
// back from the zeros they leave), nothing when disabled, and the option checks.
#include <gtest/gtest.h>

#include <algorithm>

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
  const std::string s = SpecAugmentOptions().to_string();
  for (const char* part : {"num_freq_masks=2", "max_freq_mask_bins=27", "num_time_masks=2",
                           "max_time_mask_frames=40", "max_time_mask_fraction=0.2"}) {
    EXPECT_NE(s.find(part), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace mona::audio
