// SpecAugment masks (mona/audio/spec_augment.h).
#include "mona/audio/spec_augment.h"

#include <algorithm>
#include <cmath>

#include "mona/core/error.h"

namespace mona::audio {
namespace {

// Uniform integer in {0, ..., n}.
int64_t uniform_int(core::Rng& rng, int64_t n) {
  const int64_t v = static_cast<int64_t>(rng.uniform() * static_cast<double>(n + 1));
  return std::min(v, n);
}

}  // namespace

bool SpecAugmentOptions::enabled() const {
  const bool freq = num_freq_masks > 0 && max_freq_mask_bins > 0;
  const bool time = num_time_masks > 0 && max_time_mask_frames > 0 && max_time_mask_fraction > 0;
  return freq || time;
}

void SpecAugmentOptions::validate() const {
  MONA_CHECK(num_freq_masks >= 0, "SpecAugmentOptions: num_freq_masks: expected >= 0, got ",
             num_freq_masks);
  MONA_CHECK(max_freq_mask_bins >= 0,
             "SpecAugmentOptions: max_freq_mask_bins: expected >= 0, got ", max_freq_mask_bins);
  MONA_CHECK(num_time_masks >= 0, "SpecAugmentOptions: num_time_masks: expected >= 0, got ",
             num_time_masks);
  MONA_CHECK(max_time_mask_frames >= 0,
             "SpecAugmentOptions: max_time_mask_frames: expected >= 0, got ",
             max_time_mask_frames);
  MONA_CHECK(max_time_mask_fraction >= 0 && max_time_mask_fraction <= 1,
             "SpecAugmentOptions: max_time_mask_fraction: expected [0, 1], got ",
             max_time_mask_fraction);
}

std::string SpecAugmentOptions::to_string() const {
  return detail::message("SpecAugmentOptions(num_freq_masks=", num_freq_masks,
                         ", max_freq_mask_bins=", max_freq_mask_bins,
                         ", num_time_masks=", num_time_masks,
                         ", max_time_mask_frames=", max_time_mask_frames,
                         ", max_time_mask_fraction=", max_time_mask_fraction, ")");
}

void spec_augment(Features& f, const SpecAugmentOptions& opts, core::Rng& rng) {
  opts.validate();
  MONA_CHECK(f.num_frames >= 0 && f.num_bins >= 0 &&
                 f.data.size() == static_cast<size_t>(f.num_frames * f.num_bins),
             "spec_augment: features: data holds ", f.data.size(),
             " values, expected num_frames * num_bins = ", f.num_frames, " * ", f.num_bins);
  if (!opts.enabled() || f.num_frames == 0 || f.num_bins == 0) return;
  for (int i = 0; i < opts.num_freq_masks; ++i) {
    const int64_t width = uniform_int(rng, std::min<int64_t>(opts.max_freq_mask_bins, f.num_bins));
    const int64_t first = uniform_int(rng, f.num_bins - width);
    for (int64_t t = 0; t < f.num_frames; ++t) {
      std::fill(f.row(t) + first, f.row(t) + first + width, 0.0f);
    }
  }
  const int64_t max_t = std::min<int64_t>(
      opts.max_time_mask_frames,
      static_cast<int64_t>(std::floor(opts.max_time_mask_fraction * static_cast<double>(f.num_frames))));
  for (int i = 0; i < opts.num_time_masks; ++i) {
    const int64_t width = uniform_int(rng, max_t);
    const int64_t first = uniform_int(rng, f.num_frames - width);
    std::fill(f.row(first), f.row(first) + width * f.num_bins, 0.0f);
  }
}

}  // namespace mona::audio
