// mona/audio/audio_file.h: audio in. Reads WAV, FLAC and OGG/Vorbis files (libsndfile) and
// raw 16-bit PCM (a file or any std::istream, e.g. stdin), mixes the channels down to one
// and, when asked, resamples to the model's rate (libsoxr, mona/audio/resample.h).
//
// Why here: every front end of mona (training on a manifest of recordings, `mona
// transcribe`, `mona stream --audio`) starts from a Waveform, so a file that cannot be
// read is refused in one place with one kind of message.
//
// Samples: float, mono, in [-1, 1] full scale (a 16-bit sample s becomes s / 32768, which
// is libsndfile's own integer-to-float convention); a floating-point file's values are
// returned as stored, and may lie beyond 1. Channels are mixed down by their mean.
// sample_rate is in Hz (samples per second).
//
// Errors:
//   mona::DataError naming the file (or stream name) and the problem: missing, a
//     directory or unreadable, empty, not an audio format libsndfile knows, truncated (a header that
//     promises more frames than the file holds, an odd byte or a partial multi-channel frame
//     at the end of raw PCM), a file with no channels or a rate <= 0.
//   mona::ArgumentError for bad arguments: sample_rate or channels <= 0.
// A valid file with no samples (or fewer than one frame of the feature extractor) is not
// an error: it gives an empty Waveform, and features of it have zero frames.
//
// Threads: the functions share no state; call them from any thread.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "mona/audio/resample.h"

namespace mona::audio {

/// A mono signal: `samples` in [-1, 1], `sample_rate` in Hz.
struct Waveform {
  std::vector<float> samples;
  int sample_rate = 0;

  /// Duration in seconds (0 when sample_rate is 0).
  double seconds() const {
    return sample_rate > 0 ? static_cast<double>(samples.size()) / sample_rate : 0.0;
  }
};

/// Reads a WAV, FLAC or OGG file (anything libsndfile reads), mixed down to mono (the mean
/// of the channels), at the file's own rate. A NaN or infinite sample (a float file can
/// hold them) is refused naming the file, the sample and its time.
Waveform read_audio(const std::string& path);

/// Same, resampled to `sample_rate` Hz with libsoxr (mona::audio::resample); no resampling
/// when the file is already at that rate. ArgumentError when sample_rate <= 0.
Waveform read_audio(const std::string& path, int sample_rate);

/// Raw signed 16-bit little-endian PCM, `channels` interleaved, at `sample_rate` Hz, read
/// to the end of `in`. `name` names the stream in error messages (e.g. "-" for stdin).
/// A trailing partial frame (odd byte count, or fewer than `channels` samples) is a
/// DataError: the stream was cut.
Waveform read_pcm_s16le(std::istream& in, const std::string& name, int sample_rate,
                        int channels);

/// The same from a file.
Waveform read_pcm_s16le(const std::string& path, int sample_rate, int channels);

/// Writes `samples` (mono, [-1, 1], clipped beyond) as a 16-bit PCM WAV file at
/// `sample_rate` Hz, encoded by libsndfile and written atomically (mona/io/files.h: a
/// temporary file renamed into place), so an interrupted write leaves no broken file.
/// Throws mona::ArgumentError for sample_rate <= 0 or a NaN sample, mona::DataError naming
/// `path` when it cannot be written.
void write_wav(const std::string& path, const std::vector<float>& samples, int sample_rate);

}  // namespace mona::audio
