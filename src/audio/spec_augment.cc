// SpecAugment's time warp and masks (mona/audio/spec_augment.h).
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

void check_data(const Features& f, const char* fn) {
  MONA_CHECK(f.num_frames >= 0 && f.num_bins >= 0 &&
                 f.data.size() == static_cast<size_t>(f.num_frames * f.num_bins),
             fn, ": features: data holds ", f.data.size(), " values, expected num_frames * num_bins = ",
             f.num_frames, " * ", f.num_bins);
}

// Frames [src, src + m) of `in` resampled onto frames [dst, dst + n) of `out` (n, m >= 1;
// time_warp's interpolation).
void resample_frames(const Features& in, int64_t src, int64_t m, Features& out, int64_t dst, int64_t n) {
  const double scale = static_cast<double>(m) / static_cast<double>(n);
  for (int64_t k = 0; k < n; ++k) {
    const double x = std::max(0.0, (static_cast<double>(k) + 0.5) * scale - 0.5);
    const int64_t i0 = std::min(static_cast<int64_t>(x), m - 1);
    const int64_t i1 = std::min(i0 + 1, m - 1);
    const float w1 = static_cast<float>(x - static_cast<double>(i0));
    const float w0 = 1.0f - w1;
    const float* a = in.row(src + i0);
    const float* b = in.row(src + i1);
    float* o = out.row(dst + k);
    for (int64_t j = 0; j < in.num_bins; ++j) o[j] = w0 * a[j] + w1 * b[j];
  }
}

}  // namespace

bool SpecAugmentOptions::enabled() const {
  const bool warp = max_time_warp_frames > 0;
  const bool freq = num_freq_masks > 0 && max_freq_mask_bins > 0;
  const bool time = num_time_masks > 0 && max_time_mask_frames > 0 && max_time_mask_fraction > 0;
  return warp || freq || time;
}

void SpecAugmentOptions::validate() const {
  MONA_CHECK(max_time_warp_frames >= 0,
             "SpecAugmentOptions: max_time_warp_frames: expected >= 0, got ", max_time_warp_frames);
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
  return detail::message("SpecAugmentOptions(max_time_warp_frames=", max_time_warp_frames,
                         ", num_freq_masks=", num_freq_masks,
                         ", max_freq_mask_bins=", max_freq_mask_bins,
                         ", num_time_masks=", num_time_masks,
                         ", max_time_mask_frames=", max_time_mask_frames,
                         ", max_time_mask_fraction=", max_time_mask_fraction, ")");
}

void time_warp(Features& f, int64_t center, int64_t warped) {
  check_data(f, "time_warp");
  MONA_CHECK(center > 0 && center < f.num_frames, "time_warp: center: expected a frame in (0, num_frames = ",
             f.num_frames, "), got ", center);
  MONA_CHECK(warped > 0 && warped < f.num_frames, "time_warp: warped: expected a frame in (0, num_frames = ",
             f.num_frames, "), got ", warped);
  if (center == warped) return;
  const Features in = f;
  resample_frames(in, 0, center, f, 0, warped);
  resample_frames(in, center, f.num_frames - center, f, warped, f.num_frames - warped);
}

void spec_augment(Features& f, const SpecAugmentOptions& opts, core::Rng& rng,
                  const std::vector<float>& mask_values) {
  opts.validate();
  check_data(f, "spec_augment");
  MONA_CHECK(mask_values.empty() || static_cast<int64_t>(mask_values.size()) == f.num_bins,
             "spec_augment: mask_values: expected none or num_bins = ", f.num_bins, " values, got ",
             mask_values.size());
  if (!opts.enabled() || f.num_frames == 0 || f.num_bins == 0) return;
  // The time warp (W = 0, no draws, for short utterances or none asked for).
  const int64_t W = std::min<int64_t>(opts.max_time_warp_frames, (f.num_frames - 2) / 2);
  if (W > 0) {
    const int64_t center = W + 1 + uniform_int(rng, f.num_frames - 2 * W - 2);
    const int64_t w = uniform_int(rng, 2 * W) - W;
    time_warp(f, center, center + w);
  }
  // Cells [first, first + n) of row t set to the mask value.
  const auto mask = [&](int64_t t, int64_t first, int64_t n) {
    float* row = f.row(t);
    if (mask_values.empty()) {
      std::fill(row + first, row + first + n, 0.0f);
    } else {
      std::copy(mask_values.begin() + first, mask_values.begin() + first + n, row + first);
    }
  };
  for (int i = 0; i < opts.num_freq_masks; ++i) {
    const int64_t width = uniform_int(rng, std::min<int64_t>(opts.max_freq_mask_bins, f.num_bins));
    const int64_t first = uniform_int(rng, f.num_bins - width);
    for (int64_t t = 0; t < f.num_frames; ++t) mask(t, first, width);
  }
  const int64_t max_t = std::min<int64_t>(
      opts.max_time_mask_frames,
      static_cast<int64_t>(std::floor(opts.max_time_mask_fraction * static_cast<double>(f.num_frames))));
  for (int i = 0; i < opts.num_time_masks; ++i) {
    const int64_t width = uniform_int(rng, max_t);
    const int64_t first = uniform_int(rng, f.num_frames - width);
    for (int64_t t = first; t < first + width; ++t) mask(t, 0, f.num_bins);
  }
}

}  // namespace mona::audio
