// mona/audio/resample.h: sample-rate conversion with libsoxr (its "high quality" recipe,
// SOXR_HQ: 20-bit precision, pass band to 91% of the lower Nyquist frequency, linear phase).
//
// Two entry points, one code path: resample() converts a whole signal, StreamResampler
// converts a signal that arrives in pieces. resample(x) is StreamResampler fed x at once and
// finished, so the two agree bit for bit.
//
// Chunk independence: StreamResampler hands libsoxr input in blocks of a fixed size
// (kBlock samples) whatever the sizes the caller gives, so the sequence of libsoxr calls,
// and hence every output sample, is the same for any chunking of the same signal.
//
// Rates are in Hz, samples are mono floats (any scale; audio in mona is in [-1, 1]).
// Output length: about n * to_rate / from_rate samples once finished (libsoxr's count).
// Latency: accept() returns what libsoxr has ready; its filter holds back up to a few
// hundred samples, which finish() flushes.
//
// Errors: mona::ArgumentError for a rate <= 0, a to_rate above
// StreamResampler::kMaxUpsampling times from_rate, or a null pointer with n > 0;
// mona::DataError if libsoxr itself fails (its message is included).
// Threads: one StreamResampler per thread (it holds state); resample() may be called from
// any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mona::audio {

/// `samples` at `from_rate` Hz converted to `to_rate` Hz (libsoxr, high quality). Returns
/// a copy when the rates are equal.
std::vector<float> resample(const std::vector<float>& samples, int from_rate, int to_rate);

/// Streaming sample-rate conversion (see the file comment for chunk independence).
class StreamResampler {
 public:
  /// Number of input samples handed to libsoxr per call (internal block size).
  static constexpr size_t kBlock = 1024;
  /// to_rate / from_rate at most (8 kHz to 48 kHz is 6).
  static constexpr int64_t kMaxUpsampling = 256;

  StreamResampler(int from_rate, int to_rate);
  ~StreamResampler();
  StreamResampler(StreamResampler&&) noexcept;
  StreamResampler& operator=(StreamResampler&&) noexcept;
  StreamResampler(const StreamResampler&) = delete;
  StreamResampler& operator=(const StreamResampler&) = delete;

  /// Takes `n` more input samples; returns the output samples that became ready.
  std::vector<float> accept(const float* samples, size_t n);

  /// Ends the input: returns the remaining output (the filter's tail). After finish(),
  /// accept() is an ArgumentError until reset().
  std::vector<float> finish();

  /// Forgets everything: ready for a new signal at the same rates.
  void reset();

  int from_rate() const { return from_rate_; }
  int to_rate() const { return to_rate_; }

 private:
  struct Impl;
  void run_block(const float* in, size_t n, std::vector<float>& out);
  int from_rate_ = 0, to_rate_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mona::audio
