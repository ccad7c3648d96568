// mona/audio/spec_augment.h: SpecAugment's frequency and time masking (Park et al. 2019,
// "SpecAugment: a simple data augmentation method for ASR"), for training only.
//
// Each frequency mask picks a width f uniformly in {0, ..., max_freq_mask_bins} (capped at
// the number of bins) and a first bin f0 uniformly in {0, ..., num_bins - f}, and sets bins
// [f0, f0 + f) of every frame to 0. Each time mask picks a width t uniformly in
// {0, ..., T_max}, T_max = min(max_time_mask_frames, floor(max_time_mask_fraction *
// num_frames)), and a first frame uniformly in {0, ..., num_frames - t}, and sets every bin
// of frames [t0, t0 + t) to 0. Masks may overlap. Time warping is not implemented.
//
// Masked values are set to 0, which is the mean: apply SpecAugment after global CMVN
// (mona/audio/cmvn.h), when 0 is the average feature value, as the paper does by masking
// with the mean. A use_energy column counts as one more bin.
//
// Defaults: two frequency masks of at most 27 bins, as the paper's LibriSpeech policies
// (F = 27, m_F = 2 in "LD"); two time masks of at most 40 frames (0.4 s at a 10 ms shift)
// and at most 20% of the utterance, narrower than the paper's T = 100 so that short
// utterances keep most of their frames.
//
// Randomness comes only from the core::Rng passed in: the same seed gives the same masks.
// Errors: mona::ArgumentError from validate() (called by spec_augment) naming the field and
// the value. Threads: spec_augment touches only its arguments.
#pragma once

#include <string>

#include "mona/audio/fbank.h"
#include "mona/core/rng.h"

namespace mona::audio {

struct SpecAugmentOptions {
  int num_freq_masks = 2;               ///< frequency masks per utterance, >= 0
  int max_freq_mask_bins = 27;          ///< widest frequency mask, in bins, >= 0
  int num_time_masks = 2;               ///< time masks per utterance, >= 0
  int max_time_mask_frames = 40;        ///< widest time mask, in frames, >= 0
  double max_time_mask_fraction = 0.2;  ///< and at most this fraction of the frames, [0, 1]

  /// True when some mask can have a nonzero width.
  bool enabled() const;
  /// ArgumentError naming the field and its value when it is out of range.
  void validate() const;
  /// Printable form, "SpecAugmentOptions(name=value, ...)".
  std::string to_string() const;
};

/// Masks `f` in place (see the file comment). Does nothing, drawing nothing from `rng`,
/// when !opts.enabled() or `f` has no frames. Throws mona::ArgumentError when `opts` is out
/// of range (SpecAugmentOptions::validate) or when f.data does not hold num_frames *
/// num_bins values (naming both).
void spec_augment(Features& f, const SpecAugmentOptions& opts, core::Rng& rng);

}  // namespace mona::audio
