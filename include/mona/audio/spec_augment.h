// mona/audio/spec_augment.h: SpecAugment's time warping and frequency and time masking
// (Park et al. 2019, "SpecAugment: a simple data augmentation method for ASR"), for training
// only, in the paper's order: warp, then frequency masks, then time masks.
//
// Time warping (sec. 2 of the paper) moves a point of the time axis and stretches the
// frames on either side of it to fit: with W = min(max_time_warp_frames,
// floor((num_frames - 2) / 2)), a frame `center` is drawn uniformly in {W + 1, ...,
// num_frames - W - 1} (the paper's open interval (W, num_frames - W)) and a distance w
// uniformly in {-W, ..., W}; time_warp(f, center, center + w) then resamples frames
// [0, center) onto [0, center + w) and frames [center, num_frames) onto [center + w,
// num_frames). The paper warps with TensorFlow's sparse_image_warp; this is the piecewise
// linear form toolkits use instead (linear interpolation along time, every bin alike). No
// warp for W = 0 (utterances under 4 frames) or w = 0. Off by default
// (max_time_warp_frames = 0); the paper's LibriSpeech policies use W = 80.
//
// Each frequency mask picks a width f uniformly in {0, ..., max_freq_mask_bins} (capped at
// the number of bins) and a first bin f0 uniformly in {0, ..., num_bins - f}, and sets bins
// [f0, f0 + f) of every frame to the mask value. Each time mask picks a width t uniformly in
// {0, ..., T_max}, T_max = min(max_time_mask_frames, floor(max_time_mask_fraction *
// num_frames)), and a first frame uniformly in {0, ..., num_frames - t}, and sets every bin
// of frames [t0, t0 + t) to the mask value. Masks may overlap.
//
// The mask value is 0 or, given, one value per bin. 0 is the mean of features after global
// CMVN (mona/audio/cmvn.h), and the paper masks with the mean; the trainer passes the mean
// its model normalises the features with, per bin, as it augments them before that. A
// use_energy column counts as one more bin.
//
// Defaults: two frequency masks of at most 27 bins, as the paper's LibriSpeech policies
// (F = 27, m_F = 2 in "LD"); two time masks of at most 40 frames (0.4 s at a 10 ms shift)
// and at most 20% of the utterance, narrower than the paper's T = 100 so that short
// utterances keep most of their frames.
//
// Randomness comes only from the core::Rng passed in: the same seed gives the same warp and
// masks, and options without a warp draw what they drew before warping existed.
// Errors: mona::ArgumentError from validate() (called by spec_augment) naming the field and
// the value. Threads: spec_augment and time_warp touch only their arguments.
#pragma once

#include <string>
#include <vector>

#include "mona/audio/fbank.h"
#include "mona/core/rng.h"

namespace mona::audio {

struct SpecAugmentOptions {
  int max_time_warp_frames = 0;         ///< W, the farthest a point of time moves, in frames, >= 0
  int num_freq_masks = 2;               ///< frequency masks per utterance, >= 0
  int max_freq_mask_bins = 27;          ///< widest frequency mask, in bins, >= 0
  int num_time_masks = 2;               ///< time masks per utterance, >= 0
  int max_time_mask_frames = 40;        ///< widest time mask, in frames, >= 0
  double max_time_mask_fraction = 0.2;  ///< and at most this fraction of the frames, [0, 1]

  /// True when the warp or some mask can change the features.
  bool enabled() const;
  /// ArgumentError naming the field and its value when it is out of range.
  void validate() const;
  /// Printable form, "SpecAugmentOptions(name=value, ...)".
  std::string to_string() const;
};

/// Warps and masks `f` in place (see the file comment). Masked cells take `mask_values`
/// [num_bins] (one value per bin), or 0 when it is empty. Does nothing, drawing nothing
/// from `rng`, when !opts.enabled() or `f` has no frames or bins. Throws
/// mona::ArgumentError when `opts` is out of range (SpecAugmentOptions::validate), when
/// f.data does not hold num_frames * num_bins values (naming both) or when mask_values is
/// neither empty nor num_bins long.
void spec_augment(Features& f, const SpecAugmentOptions& opts, core::Rng& rng,
                  const std::vector<float>& mask_values = {});

/// The time warp with its points given: frames [0, center) resampled onto [0, warped) and
/// frames [center, num_frames) onto [warped, num_frames), each piece by linear interpolation
/// along time with half-frame sample positions (output frame k of a piece of n frames made
/// from m reads position (k + 1/2) m / n - 1/2 of the m, clamped to [0, m - 1]: the
/// convention of torch.nn.functional.interpolate(mode="linear", align_corners=False)).
/// center == warped leaves `f` as it is. Throws mona::ArgumentError naming the argument and
/// its value unless 0 < center < num_frames and 0 < warped < num_frames, or when f.data
/// does not hold num_frames * num_bins values.
void time_warp(Features& f, int64_t center, int64_t warped);

}  // namespace mona::audio
