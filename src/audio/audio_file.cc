// Reading audio files and raw PCM (mona/audio/audio_file.h).
#include "mona/audio/audio_file.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mona/audio/resample.h"
#include "mona/core/error.h"
#include "mona/io/files.h"

namespace mona::audio {
namespace {

struct SndfileCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndfilePtr = std::unique_ptr<SNDFILE, SndfileCloser>;

// libsndfile's log of the open, in which a WAV whose data chunk promises more bytes than
// the file holds shows as "data : <header size> (should be <actual size>)".
std::string sndfile_log(SNDFILE* f) {
  char buf[8192] = {0};
  sf_command(f, SFC_GET_LOG_INFO, buf, sizeof buf - 1);
  return buf;
}

// A size of 0 or of 2^31 and more (0x7FFFF000, 0xFFFFFFFF) is the placeholder of a WAV
// written to a pipe (espeak-ng --stdout, sox -t wav -), whose writer could not seek back to
// fill it in: not a truncation.
std::string truncated_data_chunk(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data", 0) != 0) continue;
    const size_t colon = line.find(':'), should = line.find("(should be");
    if (colon == std::string::npos || should == std::string::npos) continue;
    const unsigned long long claimed = std::strtoull(line.c_str() + colon + 1, nullptr, 10);
    const unsigned long long actual = std::strtoull(line.c_str() + should + 10, nullptr, 10);
    if (claimed == 0 || claimed >= 0x7FFF0000ULL) continue;
    if (claimed > actual) return line;
  }
  return "";
}

// Appends interleaved frames [n, channels] mixed down to mono (mean of the channels).
void mix_down(const float* interleaved, int64_t n, int channels, std::vector<float>& out) {
  if (channels == 1) {
    out.insert(out.end(), interleaved, interleaved + n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int c = 0; c < channels; ++c) sum += interleaved[i * channels + c];
    out.push_back(static_cast<float>(sum / channels));
  }
}

}  // namespace

Waveform read_audio(const std::string& path) {
  {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) detail::fail_data("read_audio: ", path, ": is a directory");
    std::ifstream probe(path, std::ios::binary);
    if (!probe) detail::fail_data("read_audio: ", path, ": cannot open the file (", std::strerror(errno), ")");
    probe.seekg(0, std::ios::end);
    if (probe.tellg() == 0) detail::fail_data("read_audio: ", path, ": the file is empty");
  }
  SF_INFO info;
  std::memset(&info, 0, sizeof info);
  SndfilePtr file(sf_open(path.c_str(), SFM_READ, &info));
  if (!file) {
    detail::fail_data("read_audio: ", path, ": not a readable audio file (libsndfile: ",
                      sf_strerror(nullptr), ")");
  }
  if (info.channels <= 0 || info.samplerate <= 0) {
    detail::fail_data("read_audio: ", path, ": bad header: ", info.channels, " channels at ",
                      info.samplerate, " Hz");
  }
  const std::string cut = truncated_data_chunk(sndfile_log(file.get()));
  if (!cut.empty()) {
    detail::fail_data("read_audio: ", path, ": truncated: the header announces more audio "
                      "data than the file holds (libsndfile: \"", cut, "\")");
  }
  const bool ogg = (info.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_OGG;
  const bool length_known = info.frames >= 0 && info.frames != SF_COUNT_MAX;
  if (ogg && !length_known) {
    detail::fail_data("read_audio: ", path, ": truncated: the Ogg stream has no final page "
                      "giving its length");
  }

  Waveform w;
  w.sample_rate = info.samplerate;
  if (length_known) w.samples.reserve(static_cast<size_t>(info.frames));
  const int64_t block = 4096;
  std::vector<float> buf(static_cast<size_t>(block * info.channels));
  int64_t total = 0;
  for (;;) {
    const sf_count_t n = sf_readf_float(file.get(), buf.data(), block);
    if (n <= 0) break;
    mix_down(buf.data(), n, info.channels, w.samples);
    total += n;
  }
  if (sf_error(file.get()) != SF_ERR_NO_ERROR) {
    detail::fail_data("read_audio: ", path, ": corrupt or truncated after ", total,
                      " frames (libsndfile: ", sf_strerror(file.get()), ")");
  }
  if (length_known && total < info.frames) {
    detail::fail_data("read_audio: ", path, ": truncated: the header announces ", info.frames,
                      " frames, the file holds ", total);
  }
  // A float file can hold NaN or infinity, which every later stage refuses without knowing
  // the file's name: refused here, naming it.
  const auto bad = std::find_if(w.samples.begin(), w.samples.end(), [](float x) { return !std::isfinite(x); });
  if (bad != w.samples.end()) {
    const int64_t at = bad - w.samples.begin();
    detail::fail_data("read_audio: ", path, ": sample ", at, " (", static_cast<double>(at) / info.samplerate,
                      " s) is ", *bad, ": expected finite samples");
  }
  return w;
}

Waveform read_audio(const std::string& path, int sample_rate) {
  MONA_CHECK(sample_rate > 0, "read_audio: sample_rate: expected > 0 Hz, got ", sample_rate,
             " (for ", path, ")");
  Waveform w = read_audio(path);
  if (w.sample_rate != sample_rate) {
    detail::check_data(static_cast<int64_t>(sample_rate) <= StreamResampler::kMaxUpsampling * w.sample_rate,
                       "read_audio: ", path, ": recorded at ", w.sample_rate, " Hz, which cannot be resampled to ",
                       sample_rate, " Hz (at most ", StreamResampler::kMaxUpsampling, " times the rate)");
    w.samples = resample(w.samples, w.sample_rate, sample_rate);
    w.sample_rate = sample_rate;
  }
  return w;
}

Waveform read_pcm_s16le(std::istream& in, const std::string& name, int sample_rate,
                        int channels) {
  MONA_CHECK(sample_rate > 0, "read_pcm_s16le: sample_rate: expected > 0 Hz, got ",
             sample_rate, " (for ", name, ")");
  MONA_CHECK(channels > 0, "read_pcm_s16le: channels: expected > 0, got ", channels,
             " (for ", name, ")");
  std::vector<unsigned char> bytes;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    bytes.insert(bytes.end(), buf, buf + got);
  }
  if (in.bad()) detail::fail_data("read_pcm_s16le: ", name, ": read error after ", bytes.size(), " bytes");
  const size_t frame_bytes = 2 * static_cast<size_t>(channels);
  if (bytes.size() % frame_bytes != 0) {
    detail::fail_data("read_pcm_s16le: ", name, ": truncated: ", bytes.size(),
                      " bytes is not a whole number of ", channels, "-channel 16-bit frames (",
                      frame_bytes, " bytes each)");
  }
  const int64_t frames = static_cast<int64_t>(bytes.size() / frame_bytes);
  std::vector<float> interleaved(bytes.size() / 2);
  for (size_t i = 0; i < interleaved.size(); ++i) {
    const auto v = static_cast<int16_t>(static_cast<uint16_t>(bytes[2 * i]) |
                                        static_cast<uint16_t>(bytes[2 * i + 1]) << 8);
    interleaved[i] = static_cast<float>(v) / 32768.0f;
  }
  Waveform w;
  w.sample_rate = sample_rate;
  w.samples.reserve(static_cast<size_t>(frames));
  mix_down(interleaved.data(), frames, channels, w.samples);
  return w;
}

Waveform read_pcm_s16le(const std::string& path, int sample_rate, int channels) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail_data("read_pcm_s16le: ", path, ": cannot open the file (", std::strerror(errno), ")");
  return read_pcm_s16le(in, path, sample_rate, channels);
}

namespace {
// libsndfile's virtual I/O over a growing byte string (the encoded file).
struct MemoryFile {
  std::string bytes;
  sf_count_t position = 0;
};
sf_count_t memory_length(void* user) { return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size()); }
sf_count_t memory_seek(sf_count_t offset, int whence, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? f->position : static_cast<sf_count_t>(f->bytes.size());
  f->position = std::max<sf_count_t>(0, base + offset);
  return f->position;
}
sf_count_t memory_read(void* ptr, sf_count_t count, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const sf_count_t n = std::max<sf_count_t>(0, std::min(count, static_cast<sf_count_t>(f->bytes.size()) - f->position));
  if (n > 0) std::memcpy(ptr, f->bytes.data() + f->position, static_cast<size_t>(n));
  f->position += n;
  return n;
}
sf_count_t memory_write(const void* ptr, sf_count_t count, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const size_t end = static_cast<size_t>(f->position + count);
  if (f->bytes.size() < end) f->bytes.resize(end);
  std::memcpy(&f->bytes[static_cast<size_t>(f->position)], ptr, static_cast<size_t>(count));
  f->position += count;
  return count;
}
sf_count_t memory_tell(void* user) { return static_cast<MemoryFile*>(user)->position; }
}  // namespace

void write_wav(const std::string& path, const std::vector<float>& samples, int sample_rate) {
  detail::check(sample_rate > 0, "write_wav ", path, ": sample_rate: expected > 0 Hz, got ", sample_rate);
  // Clipping takes care of values beyond full scale; a NaN would be written as -1.
  const auto bad = std::find_if(samples.begin(), samples.end(), [](float x) { return std::isnan(x); });
  detail::check(bad == samples.end(), "write_wav ", path, ": samples[", bad - samples.begin(),
                "] = nan: expected a number");
  SF_VIRTUAL_IO io{memory_length, memory_seek, memory_read, memory_write, memory_tell};
  MemoryFile file;
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* f = sf_open_virtual(&io, SFM_WRITE, &info, &file);
  detail::check_data(f != nullptr, "write_wav ", path, ": cannot encode: ", sf_strerror(nullptr));
  sf_command(f, SFC_SET_CLIPPING, nullptr, SF_TRUE);
  const sf_count_t written = sf_write_float(f, samples.data(), static_cast<sf_count_t>(samples.size()));
  sf_close(f);
  detail::check_data(written == static_cast<sf_count_t>(samples.size()), "write_wav ", path, ": encoded ", written,
                     " of ", samples.size(), " samples");
  io::write_file_atomic(path, file.bytes);
}

}  // namespace mona::audio
