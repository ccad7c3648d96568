// Uses the installed mona::audio: 16-bit PCM in, resampled 8 -> 16 kHz, log-mel frames out;
// checks the frame count (Kaldi's, for the resampled length) and that a 1 kHz tone's
// strongest mel bin lies near 1 kHz. Exits 1 on a mismatch.
#include <mona/audio/audio_file.h>
#include <mona/audio/fbank.h>
#include <mona/core/error.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

int main() {
  std::string pcm;  // 0.5 s of a 1 kHz tone at 8 kHz, s16le
  for (int i = 0; i < 4000; ++i) {
    const auto v = static_cast<int16_t>(std::lround(10000 * std::sin(2 * M_PI * 1000.0 * i / 8000)));
    pcm += static_cast<char>(v & 0xff);
    pcm += static_cast<char>((v >> 8) & 0xff);
  }
  std::istringstream in(pcm);
  mona::audio::Waveform w = mona::audio::read_pcm_s16le(in, "tone", 8000, 1);
  w.samples = mona::audio::resample(w.samples, 8000, 16000);
  mona::audio::FbankOptions opts;
  const mona::audio::Features f = mona::audio::compute_fbank(opts, w.samples);
  const int64_t expected = opts.num_frames(static_cast<int64_t>(w.samples.size()));
  const float* row = f.row(f.num_frames / 2);
  const int64_t peak = std::max_element(row, row + f.num_bins) - row;
  std::printf("%zu samples at 16 kHz, %lld frames x %lld bins, peak bin %lld\n", w.samples.size(),
              static_cast<long long>(f.num_frames), static_cast<long long>(f.num_bins),
              static_cast<long long>(peak));
  bool refused = false;
  try {
    std::istringstream odd(std::string("\x01\x02\x03", 3));
    mona::audio::read_pcm_s16le(odd, "odd", 16000, 1);
  } catch (const mona::DataError& e) {
    std::printf("odd byte count refused: %s\n", e.what());
    refused = true;
  }
  // With 80 bins from 20 Hz to 8 kHz, the bin centred nearest 1 kHz is 27 (mel 1000 =
  // 31.7 + 28 * 34.7).
  if (f.num_frames != expected || f.num_bins != 80 || peak < 26 || peak > 28 || !refused) {
    std::printf("FAILED (expected %lld frames, peak in [26, 28], the odd stream refused)\n",
                static_cast<long long>(expected));
    return 1;
  }
  std::printf("audio consumer: OK\n");
  return 0;
}
