// mona/audio/fbank.h: Kaldi's log-mel filterbank ("fbank") features, computed online:
// samples accepted in chunks of any size give the frames of the whole-signal computation
// bit for bit.
//
// Conventions are Kaldi's compute-fbank-feats as torchaudio.compliance.kaldi.fbank
// implements them (tests/audio/test_fbank_reference.cc compares with torchaudio on real
// recordings). For frame t (0-based) of a signal x[0 .. N-1] at sample_rate Hz, with
// L = window_size() and S = window_shift() samples:
//
//   1. extract   w[s] = x[start(t) + s], s = 0 .. L-1, where start(t) = t S when snip_edges,
//                else t S + S/2 - L/2 (integer division), indices outside [0, N) reflected
//                into it (i < 0 -> -i - 1, i >= N -> 2N - 1 - i, repeated until inside);
//   2. dither    w[s] += dither * g, g standard normal (only when dither > 0);
//   3. DC        w[s] -= mean(w)                                      (remove_dc_offset);
//   4. energy    E = sum w[s]^2 here when raw_energy;
//   5. pre-emphasis, right to left: w[s] -= preemphasis * w[s-1], and
//                w[0] -= preemphasis * w[0] (Kaldi's convention for the first sample);
//   6. window    w[s] *= win[s] (povey: (0.5 - 0.5 cos(2 pi s / (L-1)))^0.85; hamming,
//                hanning, rectangular, blackman as in Kaldi), then zero-padded to
//                P = padded_window_size() (the next power of two when round_to_power_of_two);
//                E = sum w^2 here instead when raw_energy is false;
//   7. spectrum  X = rfft(w) (FFTW), power |X_k|^2 (use_power) or magnitude |X_k|;
//   8. mel       m_b = sum_{k < P/2} W[b, k] * power_k, W the triangles of Kaldi's mel
//                scale mel(f) = 1127 ln(1 + f / 700): num_mel_bins + 2 points equally spaced
//                in mel between low_freq and high_freq; the Nyquist bin k = P/2 has weight 0;
//   9. log       log(max(m_b, FLT_EPSILON)) when use_log_fbank (FLT_EPSILON = 2^-23, the
//                floor torchaudio and Kaldi use); the energy, when use_energy, is
//                log(max(E, FLT_EPSILON)) floored at log(energy_floor) if energy_floor > 0,
//                and comes first in the row.
// Everything is computed in double; the output is float.
//
// Sample scale: the features are computed on the samples as given. mona's waveforms are in
// [-1, 1] (mona/audio/audio_file.h), so its log energies are those of Kaldi / torchaudio on
// int16-scaled input minus 2 ln 32768 = 20.79. Both scales work for training (CMVN removes
// the offset); to compare with a tool that reads int16 values, scale the samples by 32768
// or its output back. energy_floor and dither are in the same scale as the samples: Kaldi's
// dither = 1 (one int16 step) is dither = 1 / 32768 here.
//
// Frame counts (num_frames): snip_edges: 1 + (N - L) / S frames when N >= L, else 0;
// otherwise (N + S/2) / S frames (integer division). A signal shorter than one frame gives
// zero frames, never an error.
//
// Dither noise is drawn frame after frame, L normal draws per frame from mona::core::Rng
// seeded with `dither_seed` (Box-Muller), so it depends on the frame index only, never on
// how the samples were chunked: OnlineFbank reproduces compute_fbank exactly, dither on.
// It is not Kaldi's random stream (no two tools share one); with dither 0 there is none.
//
// Errors: mona::ArgumentError from FbankOptions::validate (called by every constructor),
// naming the field and the value (or, for too many mel bins, the options and the first mel
// bin that covers no FFT bin); from accept_waveform after input_finished, or a null
// pointer with n > 0.
// Threads: an OnlineFbank is used by one thread at a time; distinct objects and
// compute_fbank run in parallel freely (FFTW plans are made once per FFT size under a mutex,
// and executing them is thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mona::audio {

/// Options of the filterbank; Kaldi's option names in brackets. Defaults are Kaldi's
/// compute-fbank-feats defaults except num_mel_bins (80; Kaldi 23) and dither (0; Kaldi 1,
/// and see the file comment for its scale).
struct FbankOptions {
  int sample_rate = 16000;          ///< Hz, of the samples given [--sample-frequency]
  double frame_length_ms = 25;      ///< ms per frame [--frame-length]
  double frame_shift_ms = 10;       ///< ms between frame starts [--frame-shift]
  double dither = 0;                ///< standard deviation of added Gaussian noise, in the
                                    ///< samples' scale; 0 = none [--dither]
  double preemphasis = 0.97;        ///< pre-emphasis coefficient in [0, 1]
                                    ///< [--preemphasis-coefficient]
  bool remove_dc_offset = true;     ///< subtract each frame's mean [--remove-dc-offset]
  std::string window = "povey";     ///< povey, hamming, hanning, rectangular or blackman
                                    ///< [--window-type]
  double blackman_coeff = 0.42;     ///< the blackman window's constant [--blackman-coeff]
  bool round_to_power_of_two = true;  ///< zero-pad each frame to a power of two for the
                                      ///< FFT [--round-to-power-of-two]
  int num_mel_bins = 80;            ///< number of triangular mel bins, >= 3 [--num-mel-bins]
  double low_freq = 20;             ///< Hz, low edge of the first mel bin [--low-freq]
  double high_freq = 0;             ///< Hz, high edge of the last bin; <= 0 means
                                    ///< Nyquist + high_freq (Kaldi's convention) [--high-freq]
  double energy_floor = 0;          ///< floor on the energy E (not its log), in the
                                    ///< samples' scale squared; 0 = none [--energy-floor]
  bool use_energy = false;          ///< prepend the log energy to each row [--use-energy]
  bool use_log_fbank = true;        ///< log of the mel energies [--use-log-fbank]
  bool use_power = true;            ///< power spectrum (else magnitude) [--use-power]
  bool snip_edges = true;           ///< only frames that fit in the signal (else reflect at
                                    ///< the edges, frames every shift) [--snip-edges]
  bool raw_energy = true;           ///< energy before pre-emphasis and window [--raw-energy]

  /// Samples per frame L = int(sample_rate * frame_length_ms / 1000) (truncated, as Kaldi).
  int64_t window_size() const;
  /// Samples between frame starts S = int(sample_rate * frame_shift_ms / 1000).
  int64_t window_shift() const;
  /// FFT length P: the next power of two >= L when round_to_power_of_two, else L.
  int64_t padded_window_size() const;
  /// Values per frame: num_mel_bins, plus one when use_energy.
  int64_t num_bins() const { return num_mel_bins + (use_energy ? 1 : 0); }
  /// Kaldi's frame count for a whole signal of `num_samples` samples (file comment).
  int64_t num_frames(int64_t num_samples) const;
  /// The first sample of frame `frame` (0-based), start(t) of the file comment (step 1):
  /// frame * S when snip_edges, else frame * S + S/2 - L/2 (integer division; negative for
  /// the first frames, whose window reaches before the signal and is reflected into it).
  int64_t frame_start(int64_t frame) const;
  /// Where frame `frame` (0-based) ends, in milliseconds from the start of the signal: one
  /// past its last sample, frame_start(frame) + L samples, times 1000 / sample_rate. With
  /// snip_edges false the last frames end past the signal (their windows are reflected), by
  /// at most L - L/2 samples. The one formula for frame times (stream::StreamResult::times_ms,
  /// train::EvalResult's word delays and audio seconds).
  double frame_end_ms(int64_t frame) const;
  /// ArgumentError naming the field and its value when an option is out of range, or the
  /// options and the first empty mel bin when the options leave a mel bin without an FFT
  /// bin (num_mel_bins too many for the FFT length and band, e.g. 128 at 8 kHz with the
  /// default frames): whatever OnlineFbank's constructor would refuse, validate() refuses.
  void validate() const;
  /// Printable form, "FbankOptions(name=value, ...)", one name=value per field.
  std::string to_string() const;
};

/// Frames of features, row-major [num_frames, num_bins].
struct Features {
  int64_t num_frames = 0;
  int64_t num_bins = 0;
  std::vector<float> data;

  const float* row(int64_t t) const { return data.data() + t * num_bins; }
  float* row(int64_t t) { return data.data() + t * num_bins; }
  bool empty() const { return num_frames == 0; }
};

/// The features of a whole signal: OnlineFbank fed `samples` at once, then finished.
Features compute_fbank(const FbankOptions& opts, const std::vector<float>& samples,
                       uint64_t dither_seed = 0);

/// Streaming filterbank: accepts samples in chunks of any size and computes each frame as
/// soon as its samples have arrived (snip_edges = false: the last frames, whose windows
/// reach past the end, once input_finished() says where the end is).
class OnlineFbank {
 public:
  explicit OnlineFbank(const FbankOptions& opts, uint64_t dither_seed = 0);
  ~OnlineFbank();
  OnlineFbank(OnlineFbank&&) noexcept;
  OnlineFbank& operator=(OnlineFbank&&) noexcept;
  OnlineFbank(const OnlineFbank&) = delete;
  OnlineFbank& operator=(const OnlineFbank&) = delete;

  /// Appends `n` samples (at options().sample_rate) and computes the frames they complete.
  /// Throws mona::ArgumentError after input_finished(), for null samples, and for a sample
  /// that is NaN or infinite (naming its index).
  void accept_waveform(const float* samples, size_t n);
  /// The signal has ended: computes the remaining frames. Further accept_waveform calls
  /// are an ArgumentError until reset().
  void input_finished();
  /// Frames computed so far (taken or not).
  int64_t num_frames_ready() const;
  /// The frames computed since the last call, which are then forgotten.
  Features take_frames();
  /// Samples kept for frames still to come: at most about one window plus the last chunk.
  int64_t num_samples_held() const;
  /// Samples accepted since construction or reset().
  int64_t num_samples_accepted() const;
  bool is_finished() const;
  /// Back to the state after construction (the dither noise restarts from its seed).
  void reset();
  const FbankOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mona::audio
