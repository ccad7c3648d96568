// label: audio
// Speech end to end, as a user runs it: a manifest of synthesized utterances (tone "words"
// written with audio::write_wav), `mona train` on it (the loss falls within seconds),
// `mona transcribe` (text and JSON with token times, against the stream's), `mona stream
// --audio -` with raw PCM and WAV on stdin (the same tokens as from the same samples in a
// file; raw PCM that starts with 'R', WAVE_FORMAT_EXTENSIBLE, a LIST chunk after the data),
// no samples (decoded, as transcribe decodes an empty file), a rate too low to resample
// (named; transcribe goes on with the other files), `mona eval` of a
// manifest, `mona decode` refused for an audio model; the global normalisation stored in the
// checkpoint against a brute-force mean and standard deviation; every mechanism trains on
// audio through the same configuration.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "mona/audio/audio_file.h"
#include "mona/audio/fbank.h"
#include "mona/nn/attention.h"
#include "mona/train/trainer.h"
#include "tools/mona_cli.h"
#include "util/letter_task.h"
#include "util/program.h"
#include "util/temp_dir.h"

namespace mona::test {
namespace {

// Three "words", each a 0.2 s tone with a 0.05 s pause after it, at 16 kHz.
const std::vector<std::pair<std::string, double>> kWords = {{"low", 300}, {"mid", 800}, {"high", 2000}};

std::vector<float> utterance(const std::vector<int>& words, std::mt19937_64& gen) {
  std::normal_distribution<double> noise(0, 0.01);
  std::vector<float> x;
  for (int w : words) {
    for (int n = 0; n < 4000; ++n) {
      const double t = n / 16000.0;
      const double envelope = std::min(1.0, std::min(t, 0.25 - t) / 0.01);
      x.push_back(static_cast<float>((n < 3200 ? 0.4 * envelope * std::sin(2 * M_PI * kWords[w].second * t) : 0) +
                                     noise(gen)));
    }
  }
  return x;
}

// Writes n utterances of 2-4 words and their manifest `name` into `dir`.
void write_manifest(const TempDir& dir, const std::string& name, int n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> length(2, 4), word(0, 2);
  std::ofstream manifest(dir / name);
  for (int k = 0; k < n; ++k) {
    std::vector<int> words(static_cast<size_t>(length(gen)));
    std::string transcript;
    for (int& w : words) {
      w = word(gen);
      transcript += (transcript.empty() ? "" : " ") + kWords[static_cast<size_t>(w)].first;
    }
    const std::string file = name + "." + std::to_string(k) + ".wav";
    audio::write_wav(dir / file, utterance(words, gen), 16000);
    manifest << file << "\t" << transcript << "\n";
  }
}

// What `mona stream --audio` decoded: its output up to the transcript line ("= ..."), i.e.
// each token with its time, emission and delay, then the transcript; the summary line after
// it (the source's name, the real-time factor) is left out. "" when there is no transcript.
std::string decoded(const std::string& output) {
  std::istringstream in(output);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    out += line + "\n";
    if (line.rfind("= ", 0) == 0) return out;
  }
  return "";
}

// The summary line's "NAME: S s of audio" part of `mona stream --audio` output: the audio
// the stream read, in seconds (two decimals).
std::string seconds_of_audio(const std::string& output) {
  const auto end = output.find(" s of audio");
  if (end == std::string::npos) return "";
  const auto start = output.rfind(' ', end - 1);
  return output.substr(start + 1, end - start - 1);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void put_u16(std::string& b, uint16_t v) { b.append({static_cast<char>(v & 0xff), static_cast<char>(v >> 8)}); }
void put_u32(std::string& b, uint32_t v) {
  put_u16(b, static_cast<uint16_t>(v & 0xffff));
  put_u16(b, static_cast<uint16_t>(v >> 16));
}

// 16-bit mono PCM at `rate` in a WAVE_FORMAT_EXTENSIBLE container (as sox writes for more
// than two channels): fmt of 40 bytes, format 0xfffe, SubFormat KSDATAFORMAT_SUBTYPE_PCM.
std::string extensible_wav(const std::string& pcm, uint32_t rate) {
  std::string b = "RIFF";
  put_u32(b, static_cast<uint32_t>(4 + 8 + 40 + 8 + pcm.size()));
  b += "WAVEfmt ";
  put_u32(b, 40);
  put_u16(b, 0xfffe);
  put_u16(b, 1);         // channels
  put_u32(b, rate);
  put_u32(b, rate * 2);  // bytes per second
  put_u16(b, 2);         // block align
  put_u16(b, 16);        // bits per sample
  put_u16(b, 22);        // cbSize
  put_u16(b, 16);        // valid bits
  put_u32(b, 4);         // channel mask: front centre
  put_u16(b, 1);         // SubFormat: PCM, then the rest of its GUID
  b += std::string("\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71", 14);
  b += "data";
  put_u32(b, static_cast<uint32_t>(pcm.size()));
  return b + pcm;
}

std::string write_config(const TempDir& d, const std::string& mechanism, int steps) {
  std::ofstream cfg(d / (mechanism + ".yaml"));
  cfg << "data: {train: " << (d / "train.tsv") << ", dev: " << (d / "dev.tsv") << "}\n"
      << "model: {input_kind: audio, features: {num_mel_bins: 20}, conv_channels: 4, encoder_layers: 2,\n"
      << "        encoder_hidden: 32, time_reduction_layers: 1, decoder_embedding_dim: 8, decoder_hidden: 32,\n"
      << "        attention: {type: " << mechanism << ", monotonic_energy: dot, init_r: -1, chunk_size: 2}}\n"
      << "train: {output_dir: " << (d / ("run-" + mechanism)) << ", batch_size: 8, max_steps: " << steps
      << ", eval_every: " << steps << ", log_every: 10, threads: 1,\n"
      << "        optimizer: {learning_rate: 0.01},\n"
      << "        spec_augment: {max_time_warp_frames: 3, num_freq_masks: 1, max_freq_mask_bins: 3}}\n";
  return d / (mechanism + ".yaml");
}

TEST(SpeechCli, TrainTranscribeStreamAndEvalOnAudio) {
  TempDir d;
  write_manifest(d, "train.tsv", 48, 1);
  write_manifest(d, "dev.tsv", 6, 2);
  auto r = run_cli("train " + write_config(d, "mocha", 150));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("features: 48 utterances"), std::string::npos) << r.output;
  // The loss falls: the mean of the first 10 steps against that of the last 10.
  std::ifstream log(d / "run-mocha/train.jsonl");
  std::vector<double> losses;
  for (std::string line; std::getline(log, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "train") losses.push_back(j["loss"].get<double>());
  }
  ASSERT_GE(losses.size(), 10u);
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << "first " << losses.front() << " last " << losses.back();

  const std::string ckpt = d / "run-mocha/last.ckpt";
  r = run_cli("transcribe " + ckpt + " " + (d / "dev.tsv.0.wav") + " " + (d / "dev.tsv.1.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find(d / "dev.tsv.1.wav"), std::string::npos) << r.output;
  // Greedy, each token's time (null: emitted with no input position, the attention past
  // the end) against the streamed one: "TOKEN  at X ms ..." or "TOKEN  at no input ...".
  r = run_cli("transcribe --json --beam 0 " + ckpt + " " + (d / "dev.tsv.0.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(0, r.output.find('\n')));
  ASSERT_EQ(j["tokens"].size(), j["times_ms"].size()) << r.output;
  r = run_cli("stream " + ckpt + " --audio " + (d / "dev.tsv.0.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  {
    std::istringstream streamed(decoded(r.output));
    size_t k = 0;
    for (std::string line; std::getline(streamed, line) && line.rfind("= ", 0) != 0; ++k) {
      ASSERT_LT(k, j["tokens"].size()) << r.output;
      if (line.rfind("(end) ", 0) == 0) line = line.substr(6);
      EXPECT_EQ(line.substr(0, line.find("  at ")), j["tokens"][k].get<std::string>()) << line;
      const std::string at = line.substr(line.find("  at ") + 5);
      if (j["times_ms"][k].is_null()) {
        EXPECT_EQ(at.rfind("no input", 0), 0u) << line;
      } else {
        const double ms = j["times_ms"][k].get<double>();
        EXPECT_LE(ms, 1000.0) << r.output;  // <= 4 words of 250 ms
        char expected[32];
        std::snprintf(expected, sizeof expected, "%.0f ms", ms);
        EXPECT_EQ(at.rfind(expected, 0), 0u) << line << " against " << ms;
      }
    }
    EXPECT_EQ(k, j["tokens"].size()) << r.output;
  }

  // stdin: raw s16le at 8 kHz (resampled by the stream) and a WAV container. Each is
  // compared with --audio FILE of the very same samples, at the same rate and so in the same
  // chunks: the tokens, their times and the transcript must be identical. The 8 kHz stream is
  // not compared with the 16 kHz one: downsampling removes everything above 4 kHz (here the
  // noise), which changes the upper mel bins, so a model trained for 150 steps at 16 kHz may
  // legitimately hear the two differently.
  const audio::Waveform w = audio::read_audio(d / "dev.tsv.0.wav", 8000);
  // dev0-8k.wav holds them as 16-bit PCM; the raw stream is made from what it holds, so both
  // carry the same 16-bit values (libsndfile and the stream both read them as value / 32768).
  audio::write_wav(d / "dev0-8k.wav", w.samples, 8000);
  const audio::Waveform w8 = audio::read_audio(d / "dev0-8k.wav");
  ASSERT_EQ(w8.sample_rate, 8000);
  {
    std::ofstream raw(d / "dev0.raw", std::ios::binary);
    for (float x : w8.samples) {
      const auto s = static_cast<int16_t>(std::lround(std::max(-1.0f, std::min(x, 0.99997f)) * 32768));
      raw.write(reinterpret_cast<const char*>(&s), 2);
    }
  }
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - --rate 8000 < " + (d / "dev0.raw"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("real-time factor"), std::string::npos) << r.output;
  // The delays of the tokens with a time in the audio, or none (this short training's
  // attention may run past the end: its tokens then have no time).
  EXPECT_TRUE(r.output.find("emission delay mean") != std::string::npos ||
              r.output.find("no token with a time in the audio") != std::string::npos)
      << r.output;
  const std::string raw_8k = decoded(r.output);
  ASSERT_FALSE(raw_8k.empty()) << "no transcript line: " << r.output;
  r = run_cli("stream " + ckpt + " --audio " + (d / "dev0-8k.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(decoded(r.output), raw_8k) << "raw 8 kHz PCM on stdin against the same samples in a WAV file";
  // Raw PCM cut inside its last sample (an odd byte, as when the recorder is killed): the
  // whole samples are streamed as before, and the dropped byte is named on stderr.
  {
    std::ifstream in(d / "dev0.raw", std::ios::binary);
    std::ofstream out(d / "dev0-odd.raw", std::ios::binary);
    out << in.rdbuf() << '\x01';
  }
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - --rate 8000 < " + (d / "dev0-odd.raw"));
  ASSERT_EQ(r.code, 0) << r.output;
  {
    const std::string notice =
        "mona: stdin: the last 1 byte makes no whole sample frame (1 channel of 16 bits) and was dropped\n";
    std::string out = r.output;  // stdout and stderr together
    const auto at = out.find(notice);
    ASSERT_NE(at, std::string::npos) << r.output;
    EXPECT_EQ(decoded(out.erase(at, notice.size())), raw_8k) << "the same samples and one byte more";
  }
  // The stdin options are refused for a file (its header says what they would), and a WAV
  // on stdin whose header contradicts a --rate or --channels given is refused before decoding.
  for (const std::string option : {"--rate 8000", "--channels 2", "--format raw"}) {
    r = run_cli("stream " + ckpt + " --audio " + (d / "dev0-8k.wav") + " " + option);
    EXPECT_EQ(r.code, 1) << option << ": " << r.output;
    EXPECT_NE(r.output.find("mona: error: " + option.substr(0, option.find(' ')) +
                            ": applies to audio on stdin (--audio -); the file " + (d / "dev0-8k.wav")),
              std::string::npos)
        << option << ": " << r.output;
  }
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - --rate 16000 < " + (d / "dev0-8k.wav"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("mona: error: stdin: the WAV header gives 8000 Hz, --rate 16000"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("= "), std::string::npos) << "decoded before the refusal: " << r.output;
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - --channels 2 < " + (d / "dev0-8k.wav"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("mona: error: stdin: the WAV header gives 1 channel, --channels 2"), std::string::npos)
      << r.output;
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - --rate 8000 < " + (d / "dev0-8k.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(decoded(r.output), raw_8k) << "a --rate that matches the WAV header";
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - < " + (d / "dev.tsv.0.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string wav_stdin = decoded(r.output);
  ASSERT_FALSE(wav_stdin.empty()) << "no transcript line: " << r.output;
  EXPECT_NE(r.output.find("stdin: "), std::string::npos) << r.output;
  r = run_cli("stream " + ckpt + " --audio " + (d / "dev.tsv.0.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(decoded(r.output), wav_stdin) << "a WAV on stdin against the same file given as --audio FILE";
  EXPECT_NE(r.output.find(d / "dev.tsv.0.wav"), std::string::npos) << r.output;
  // The 16 kHz samples as raw PCM whose first byte is 'R' (the low byte of 0x0052): raw, as
  // its first 4 bytes are not "RIFF" (auto-detection read only the first byte, and refused).
  std::string pcm16 = file_bytes(d / "dev.tsv.0.wav").substr(44);  // write_wav: a 44-byte header
  ASSERT_EQ(pcm16.size(), 2 * audio::read_audio(d / "dev.tsv.0.wav").samples.size());
  pcm16[0] = 'R';
  pcm16[1] = '\0';
  std::ofstream(d / "r-first.raw", std::ios::binary) << pcm16;
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - < " + (d / "r-first.raw"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string r_first = decoded(r.output);
  ASSERT_FALSE(r_first.empty()) << r.output;
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - --format raw < " + (d / "r-first.raw"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(decoded(r.output), r_first) << "format auto against --format raw";
  // The same samples in a WAVE_FORMAT_EXTENSIBLE container, and in a WAV with a LIST chunk
  // after its data (metadata, not audio): the tokens and the seconds of the plain WAV.
  const std::string pcm = file_bytes(d / "dev.tsv.0.wav").substr(44);
  std::ofstream(d / "extensible.wav", std::ios::binary) << extensible_wav(pcm, 16000);
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - < " + (d / "dev.tsv.0.wav"));
  const std::string plain_seconds = seconds_of_audio(r.output);
  ASSERT_FALSE(plain_seconds.empty()) << r.output;
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - < " + (d / "extensible.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(decoded(r.output), wav_stdin) << "WAVE_FORMAT_EXTENSIBLE on stdin";
  {
    std::string wav = file_bytes(d / "dev.tsv.0.wav");
    std::string list = "LIST";
    put_u32(list, 1000);
    list += "INFOISFT";
    put_u32(list, 992);
    for (int k = 0; k < 992; ++k) list += static_cast<char>(k * 37);
    wav += list;
    const uint32_t riff = static_cast<uint32_t>(wav.size() - 8);
    for (int k = 0; k < 4; ++k) wav[4 + k] = static_cast<char>((riff >> (8 * k)) & 0xff);
    std::ofstream(d / "trailing-list.wav", std::ios::binary) << wav;
  }
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - < " + (d / "trailing-list.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(decoded(r.output), wav_stdin) << "a LIST chunk after the data";
  EXPECT_EQ(seconds_of_audio(r.output), plain_seconds) << "the LIST chunk read as samples: " << r.output;

  // No samples: an utterance of no audio, decoded as transcribe decodes an empty file (the
  // offline path is the streaming path), with a notice on stderr. A token the attention
  // emitted with no input to read has no time: "at no input" in the stream, null in JSON.
  audio::write_wav(d / "empty.wav", {}, 16000);
  r = run_cli("transcribe --json " + ckpt + " " + (d / "empty.wav"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto empty_json = nlohmann::json::parse(r.output.substr(0, r.output.find('\n')));
  std::string empty_transcript = "= " + empty_json["text"].get<std::string>();
  for (const auto& t : empty_json["times_ms"]) EXPECT_TRUE(t.is_null()) << r.output;
  { std::ofstream(d / "empty.raw"); }
  for (const std::string& source : {"- < " + (d / "empty.raw"), d / "empty.wav"}) {
    r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio " + source);
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(": no audio samples\n"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("\n" + empty_transcript + "\n"), std::string::npos) << empty_transcript << ": " << r.output;
    EXPECT_EQ(r.output.find(" delay "), std::string::npos) << "a delay for a token with no time: " << r.output;
    EXPECT_NE(r.output.find("0.00 s of audio, no audio, no token with a time in the audio"), std::string::npos)
        << r.output;
  }

  // A WAV header cut short inside its fmt chunk: an error, not a transcript.
  {
    std::ifstream wav(d / "dev.tsv.0.wav", std::ios::binary);
    std::string head(30, '\0');
    wav.read(&head[0], 30);
    std::ofstream(d / "cut.wav", std::ios::binary) << head;
  }
  r = run_program(std::string(MONA_CLI) + " stream " + ckpt + " --audio - < " + (d / "cut.wav"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("mona: error: stdin: WAV header ends inside its fmt chunk"), std::string::npos) << r.output;

  // A symbols run started from this audio model is refused naming the kinds (it blamed
  // the vocabulary), and leaves no directory.
  {
    TempDir s;
    r = run_cli("train " + write_letter_run(s.path(), "max_steps: 2, threads: 1") + " --set train.init_from=" + ckpt);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find("mona: error: train.init_from: " + ckpt +
                            " is a model of audio inputs; this run's model.input_kind is symbols"),
              std::string::npos)
        << r.output;
    EXPECT_FALSE(std::ifstream(s / "run/train.jsonl").good()) << r.output;
  }

  // decode reads symbols: an audio model is refused, naming the checkpoint and the way to go.
  r = run_cli("decode " + ckpt + " " + (d / "dev.tsv.0.wav"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("mona: error: decode: " + ckpt + " is an audio model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mona transcribe"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("skipping"), std::string::npos) << r.output;

  r = run_cli("eval " + ckpt + " " + (d / "dev.tsv"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("inputs 6"), std::string::npos) << r.output;

  r = run_cli("plot " + ckpt + " " + (d / "dev.tsv.0.wav") + " -o " + (d / "alignment.png"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(std::ifstream(d / "alignment.png").good());

  // A file that cannot be read is named and skipped; the others are transcribed, and the
  // exit code is 1.
  { std::ofstream(d / "text.wav") << "not audio at all"; }
  r = run_cli("transcribe " + ckpt + " " + (d / "dev.tsv.0.wav") + " " + (d / "text.wav") + " " +
              (d / "dev.tsv.1.wav"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("mona: skipping " + (d / "text.wav") + ": "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find((d / "dev.tsv.0.wav") + "\t"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find((d / "dev.tsv.1.wav") + "\t"), std::string::npos) << "the file after it: " << r.output;
  EXPECT_NE(r.output.find("mona: 1 input skipped (see above)"), std::string::npos) << r.output;
  // So is a file at a rate no resampler raises to the model's (8 Hz: more than 256 times);
  // `stream --audio` refuses it naming the file.
  audio::write_wav(d / "8hz.wav", std::vector<float>(16, 0.1f), 8);
  r = run_cli("transcribe " + ckpt + " " + (d / "8hz.wav") + " " + (d / "dev.tsv.1.wav"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("mona: skipping " + (d / "8hz.wav") +
                          ": Recognizer::accept_waveform: sample_rate: expected at least 1/256 of the model's "
                          "16000 Hz (the most a resampler raises a rate), got 8 Hz"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find((d / "dev.tsv.1.wav") + "\t"), std::string::npos) << "the file after it: " << r.output;
  r = run_cli("stream " + ckpt + " --audio " + (d / "8hz.wav"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("mona: error: " + (d / "8hz.wav") + ": Recognizer::accept_waveform: sample_rate"),
            std::string::npos)
      << r.output;

  // The normalisation in the checkpoint: mean and 1 / std of every training frame,
  // recomputed here in double from the files (the trainer accumulates in double too:
  // agreement to float32 rounding of the stored values, 1e-5 relative).
  const train::TrainedModel t = train::TrainedModel::load(ckpt);
  std::vector<double> sum(20, 0), sum2(20, 0);
  int64_t frames = 0;
  std::ifstream manifest(d / "train.tsv");
  for (std::string line; std::getline(manifest, line);) {
    const auto x = audio::compute_fbank(t.config.model.features,
                                        audio::read_audio(d / line.substr(0, line.find('\t'))).samples);
    for (int64_t f = 0; f < x.num_frames; ++f) {
      for (int64_t b = 0; b < 20; ++b) {
        sum[b] += x.row(f)[b];
        sum2[b] += static_cast<double>(x.row(f)[b]) * x.row(f)[b];
      }
    }
    frames += x.num_frames;
  }
  const at::Tensor mean = t.model->encoder->feature_mean();
  for (int64_t b = 0; b < 20; ++b) {
    const double m = sum[b] / frames;
    EXPECT_NEAR(mean[b].item<double>(), m, 1e-5 * std::abs(m)) << "bin " << b;
    const double sd = std::sqrt(sum2[b] / frames - m * m);
    const at::Tensor ones = torch::ones({1, 20});
    const double inv_std = (t.model->encoder->normalize(ones) - t.model->encoder->normalize(0 * ones))[0][b].item<double>();
    EXPECT_NEAR(inv_std, 1 / sd, 1e-4 / sd) << "bin " << b;
  }
}

// Every mechanism trains on audio through the same configuration (a few steps each).
TEST(SpeechCli, EveryMechanismTrainsOnAudio) {
  TempDir d;
  write_manifest(d, "train.tsv", 16, 3);
  write_manifest(d, "dev.tsv", 2, 4);
  for (const auto& m : nn::mechanisms()) {
    const auto r = run_cli("train " + write_config(d, m.name, 3));
    EXPECT_EQ(r.code, 0) << m.name << ": " << r.output;
    EXPECT_TRUE(std::ifstream(d / (std::string("run-") + m.name + "/last.ckpt")).good()) << m.name;
  }
}

}  // namespace
}  // namespace mona::test
