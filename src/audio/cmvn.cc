// Global mean and variance normalisation (mona/audio/cmvn.h).
#include "mona/audio/cmvn.h"

#include <algorithm>
#include <cmath>

#include "mona/core/error.h"

namespace mona::audio {

void GlobalCmvn::accumulate(const Features& f) {
  MONA_CHECK(f.num_frames >= 0 && f.num_bins >= 0 &&
                 f.data.size() == static_cast<size_t>(f.num_frames * f.num_bins),
             "GlobalCmvn::accumulate: features: data holds ", f.data.size(),
             " values, expected num_frames * num_bins = ", f.num_frames, " * ", f.num_bins);
  if (f.num_frames == 0) return;
  if (num_bins_ == 0) {
    MONA_CHECK(f.num_bins > 0, "GlobalCmvn::accumulate: features have 0 bins");
    num_bins_ = f.num_bins;
  }
  MONA_CHECK(f.num_bins == num_bins_, "GlobalCmvn::accumulate: features have ", f.num_bins,
             " bins, the statistics ", num_bins_);
  const size_t nb = static_cast<size_t>(num_bins_);
  // Checked before anything is added: a NaN would give its bin a NaN mean (and finalize()'s
  // variance, clamped at 0, would hide it), and from() refuses such statistics.
  const auto bad = std::find_if(f.data.begin(), f.data.end(), [](float x) { return !std::isfinite(x); });
  if (bad != f.data.end()) {
    const auto k = static_cast<int64_t>(bad - f.data.begin());
    mona::detail::fail("GlobalCmvn::accumulate: features: frame ", k / f.num_bins, ", bin ", k % f.num_bins, " = ",
                       *bad, ": expected finite values");
  }
  if (shift_.empty()) {
    shift_.assign(f.data.begin(), f.data.begin() + static_cast<std::ptrdiff_t>(nb));
    sum_.assign(nb, 0.0);
    sum_sq_.assign(nb, 0.0);
  }
  for (int64_t t = 0; t < f.num_frames; ++t) {
    const float* row = f.row(t);
    for (size_t b = 0; b < nb; ++b) {
      const double d = static_cast<double>(row[b]) - shift_[b];
      sum_[b] += d;
      sum_sq_[b] += d * d;
    }
  }
  frames_ += f.num_frames;
}

void GlobalCmvn::finalize(double min_std) {
  MONA_CHECK(std::isfinite(min_std) && min_std > 0,
             "GlobalCmvn::finalize: min_std: expected > 0, got ", min_std);
  MONA_CHECK(frames_ > 0, "GlobalCmvn::finalize: no frames accumulated");
  const size_t nb = static_cast<size_t>(num_bins_);
  const double n = static_cast<double>(frames_);
  mean_.assign(nb, 0.0);
  inv_std_.assign(nb, 0.0);
  for (size_t b = 0; b < nb; ++b) {
    const double m = sum_[b] / n;  // mean of (x - shift)
    const double var = std::max(0.0, sum_sq_[b] / n - m * m);
    mean_[b] = shift_[b] + m;
    inv_std_[b] = 1.0 / std::max(std::sqrt(var), min_std);
  }
}

void GlobalCmvn::apply(Features& f) const {
  MONA_CHECK(!empty(), "GlobalCmvn::apply: no statistics (call finalize() or from() first)");
  MONA_CHECK(f.num_bins == num_bins_, "GlobalCmvn::apply: features have ", f.num_bins,
             " bins, the statistics ", num_bins_);
  MONA_CHECK(f.data.size() == static_cast<size_t>(f.num_frames * f.num_bins),
             "GlobalCmvn::apply: features: data holds ", f.data.size(),
             " values, expected num_frames * num_bins = ", f.num_frames, " * ", f.num_bins);
  const size_t nb = static_cast<size_t>(num_bins_);
  for (int64_t t = 0; t < f.num_frames; ++t) {
    float* row = f.row(t);
    for (size_t b = 0; b < nb; ++b) {
      row[b] = static_cast<float>((static_cast<double>(row[b]) - mean_[b]) * inv_std_[b]);
    }
  }
}

GlobalCmvn GlobalCmvn::from(std::vector<double> mean, std::vector<double> inv_std) {
  MONA_CHECK(!mean.empty(), "GlobalCmvn::from: mean is empty");
  MONA_CHECK(mean.size() == inv_std.size(), "GlobalCmvn::from: mean has ", mean.size(),
             " bins, inv_std ", inv_std.size());
  for (size_t b = 0; b < mean.size(); ++b) {
    MONA_CHECK(std::isfinite(mean[b]), "GlobalCmvn::from: mean[", b, "] = ", mean[b],
               ": expected finite");
    MONA_CHECK(std::isfinite(inv_std[b]) && inv_std[b] > 0, "GlobalCmvn::from: inv_std[", b,
               "] = ", inv_std[b], ": expected finite and > 0");
  }
  GlobalCmvn c;
  c.num_bins_ = static_cast<int64_t>(mean.size());
  c.mean_ = std::move(mean);
  c.inv_std_ = std::move(inv_std);
  return c;
}

}  // namespace mona::audio
