// mona/audio/cmvn.h: global cepstral mean and variance normalisation (CMVN) of features.
//
// One mean and one standard deviation per feature bin, estimated once over the training
// set (all frames of all utterances pooled) and applied to every utterance afterwards,
// training and decoding alike:  y[t, b] = (x[t, b] - mean[b]) * inv_std[b].
// Global statistics, unlike per-utterance CMVN, need no look at the future of a stream, so
// they suit online recognition; a model stores them with its weights.
//
// Estimation: population statistics (divide by the number of frames n),
//   mean[b] = (1/n) sum_t x[t, b],   var[b] = (1/n) sum_t (x[t, b] - mean[b])^2,
//   inv_std[b] = 1 / max(sqrt(var[b]), min_std),
// accumulated in double around a shift (the first frame seen) so that the sums do not
// cancel when the mean is large against the spread. Units are the features' (log energy for
// fbank), so min_std is in those units.
//
// Errors: mona::ArgumentError on a bin-count mismatch between frames, statistics and
// features (naming both counts), finalize() with no frames, apply() before finalize(),
// from() with empty, unequal-length, non-finite or non-positive values.
// Threads: const members (apply, mean, inv_std) may be called from many threads at once.
#pragma once

#include <cstdint>
#include <vector>

#include "mona/audio/fbank.h"

namespace mona::audio {

class GlobalCmvn {
 public:
  /// Adds every frame of `f` to the statistics (the first call fixes num_bins()). Throws
  /// mona::ArgumentError, adding nothing, for data of the wrong size, a bin count other than
  /// num_bins(), or a NaN or infinite value (naming its frame and bin).
  void accumulate(const Features& f);
  /// Computes mean() and inv_std() from the frames accumulated so far; min_std floors the
  /// standard deviation (a constant bin is scaled by 1 / min_std, not divided by zero).
  void finalize(double min_std = 1e-5);

  /// Per-bin mean and 1 / standard deviation (empty before finalize() or from()).
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& inv_std() const { return inv_std_; }

  /// (x - mean) * inv_std for every frame of `f`, in place.
  void apply(Features& f) const;

  /// Statistics given directly (e.g. read back from a checkpoint).
  static GlobalCmvn from(std::vector<double> mean, std::vector<double> inv_std);

  /// True until finalize() or from() has given statistics to apply.
  bool empty() const { return mean_.empty(); }
  /// Feature bins (0 before the first accumulate() or from()).
  int64_t num_bins() const { return num_bins_; }
  /// Frames accumulated (0 for statistics made by from()).
  int64_t frames_seen() const { return frames_; }

 private:
  int64_t num_bins_ = 0;
  int64_t frames_ = 0;
  std::vector<double> shift_, sum_, sum_sq_;  // around shift_: sum (x - shift), (x - shift)^2
  std::vector<double> mean_, inv_std_;
};

}  // namespace mona::audio
