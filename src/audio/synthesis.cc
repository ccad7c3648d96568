// Spoken-word corpora from Debian's synthesizers (mona/audio/synthesis.h).
#include "mona/audio/synthesis.h"

#include <fcntl.h>
#include <spawn.h>
#include <sndfile.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "mona/audio/resample.h"
#include "mona/core/error.h"
#include "mona/io/files.h"

extern char** environ;

namespace mona::audio {
namespace {

namespace fs = std::filesystem;

// The English accents of espeak-ng (its gmw/ languages whose code starts with "en").
const std::vector<std::string> kEspeakAccents = {"en-029", "en-gb", "en-gb-scotland", "en-gb-x-gbclan",
                                                 "en-gb-x-gbcwmd", "en-gb-x-rp", "en-us", "en-us-nyc"};

// Runs argv[0] (found on PATH) with `argv`, no shell; its stdout and stderr go to `log`.
// Returns what it printed; DataError with the command and that text when it cannot start,
// is killed or exits non-zero.
std::string run(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  std::string command;
  for (const auto& a : argv) command += (command.empty() ? "" : " ") + a;
  detail::check_data(spawned == 0, "cannot run '", command, "': ", std::strerror(spawned));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string printed;
  if (std::ifstream in(log, std::ios::binary); in) printed.assign(std::istreambuf_iterator<char>(in), {});
  detail::check_data(WIFEXITED(status) && WEXITSTATUS(status) == 0, "'", command, "' failed (",
                     WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status)) : std::string("killed"),
                     "): ", printed.substr(0, 500));
  return printed;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && ::access((fs::path(d) / program).c_str(), X_OK) == 0) return true;
  return false;
}

// The words of `text`, split on whitespace.
std::vector<std::string> words_of(const std::string& text) {
  std::stringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<Voice> espeak_voices(const std::string& work_dir) {
  // `espeak-ng --voices=variant`: a header, then "Pty Language Age/Gender VoiceName File ..."
  // rows whose File is "!v/<variant>".
  std::set<std::string> variants;
  std::stringstream table(run({"espeak-ng", "--voices=variant"}, work_dir + "/voices.log"));
  for (std::string line; std::getline(table, line);) {
    for (const auto& field : words_of(line))
      if (field.rfind("!v/", 0) == 0) variants.insert(field.substr(3));
  }
  std::set<std::string> accents;
  std::stringstream langs(run({"espeak-ng", "--voices=en"}, work_dir + "/voices.log"));
  for (std::string line; std::getline(langs, line);) {
    const auto f = words_of(line);
    if (f.size() >= 5 && f[4].rfind("gmw/", 0) == 0 &&
        std::find(kEspeakAccents.begin(), kEspeakAccents.end(), f[1]) != kEspeakAccents.end())
      accents.insert(f[1]);
  }
  std::vector<Voice> out;
  for (const auto& a : accents) {
    out.push_back({Synthesizer::espeak_ng, a, "default"});
    for (const auto& v : variants) out.push_back({Synthesizer::espeak_ng, a + "+" + v, v});
  }
  return out;
}

std::vector<Voice> flite_voices(const std::string& work_dir) {
  // `flite -lv`: "Voices available: kal awb_time kal16 awb rms slt".
  std::vector<Voice> out;
  for (const auto& name : words_of(run({"flite", "-lv"}, work_dir + "/voices.log"))) {
    if (name == "Voices" || name == "available:" || name == "awb_time") continue;
    std::string speaker = name;
    while (!speaker.empty() && std::isdigit(static_cast<unsigned char>(speaker.back()))) speaker.pop_back();
    out.push_back({Synthesizer::flite, name, speaker});
  }
  std::sort(out.begin(), out.end(), [](const Voice& a, const Voice& b) { return a.name < b.name; });
  return out;
}

std::vector<Voice> festival_voices() {
  // Debian's festvox packages install /usr/share/festival/voices/<language>/<voice>/.
  std::vector<Voice> out;
  for (const char* language : {"english", "us", "british"}) {
    const fs::path dir = fs::path("/usr/share/festival/voices") / language;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (!e.is_directory()) continue;
      const std::string name = e.path().filename().string();
      std::string speaker = name.rfind("cmu_us_", 0) == 0 ? name.substr(7) : name;
      speaker = speaker.substr(0, speaker.find('_'));
      out.push_back({Synthesizer::festival, name, speaker});
    }
  }
  std::sort(out.begin(), out.end(), [](const Voice& a, const Voice& b) { return a.name < b.name; });
  return out;
}

void check_word(const std::string& w) {
  detail::check(is_synthesizable_word(w), "synthesize_words: word '", w,
                "' has characters other than letters, digits, ' and -");
}

// The part of a word's speech x[0, n) where it is heard: from the start of the first 10 ms
// frame (at `rate` Hz) whose power is within kAudibleBelowPeakDb of the loudest frame's to
// the end of the last such frame (the last frame may be shorter); [0, n) when n is shorter
// than a frame.
std::pair<int64_t, int64_t> audible_part(const float* x, int64_t n, int rate) {
  const int64_t frame = std::max<int64_t>(1, rate / 100);
  std::vector<double> power;
  for (int64_t a = 0; a < n; a += frame) {
    const int64_t b = std::min(n, a + frame);
    double p = 0;
    for (int64_t k = a; k < b; ++k) p += static_cast<double>(x[k]) * x[k];
    power.push_back(p / static_cast<double>(b - a));
  }
  const double floor = *std::max_element(power.begin(), power.end()) * std::pow(10.0, -kAudibleBelowPeakDb / 10);
  size_t first = 0, last = power.size();
  while (first < power.size() && power[first] < floor) ++first;
  while (last > first + 1 && power[last - 1] < floor) --last;
  return {static_cast<int64_t>(first) * frame, std::min(n, static_cast<int64_t>(last) * frame)};
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

void write_float_wav(const std::string& path, const std::vector<float>& x, int rate) {
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
  detail::check_data(f != nullptr, path, ": cannot write: ", sf_strerror(nullptr));
  const sf_count_t n = sf_write_float(f, x.data(), static_cast<sf_count_t>(x.size()));
  sf_close(f);
  detail::check_data(n == static_cast<sf_count_t>(x.size()), path, ": short write");
}

void check_range(const char* name, const std::pair<double, double>& r, double lo, double hi) {
  detail::check(std::isfinite(r.first) && std::isfinite(r.second) && r.first <= r.second && r.first >= lo &&
                    r.second <= hi,
                "UtteranceOptions::", name, ": expected lo <= hi within [", lo, ", ", hi, "], got [", r.first, ", ",
                r.second, "]");
}

double draw(std::mt19937_64& g, const std::pair<double, double>& r) {
  return r.first == r.second ? r.first : std::uniform_real_distribution<double>(r.first, r.second)(g);
}

}  // namespace

const char* synthesizer_name(Synthesizer s) {
  switch (s) {
    case Synthesizer::espeak_ng: return "espeak-ng";
    case Synthesizer::flite: return "flite";
    case Synthesizer::festival: return "festival";
  }
  return "?";
}

std::string Voice::id() const { return std::string(synthesizer_name(synthesizer)) + "/" + name; }

const char* split_name(VoiceSplit s) {
  switch (s) {
    case VoiceSplit::train: return "train";
    case VoiceSplit::dev: return "dev";
    case VoiceSplit::test: return "test";
  }
  return "?";
}

const std::vector<std::string> kDevSpeakers = {"f5", "m5", "klatt5", "Annie", "Mike", "john", "anika", "norbert",
                                               "rms", "ked"};
const std::vector<std::string> kTestSpeakers = {"f4",     "m2",    "m6",    "klatt3", "Alicia", "Lee",
                                                "steph2", "david", "linda", "robert", "slt"};

VoiceSplit voice_split(const Voice& v) {
  auto in = [&](const std::vector<std::string>& list) {
    return std::find(list.begin(), list.end(), v.speaker) != list.end();
  };
  return in(kTestSpeakers) ? VoiceSplit::test : in(kDevSpeakers) ? VoiceSplit::dev : VoiceSplit::train;
}

std::vector<Voice> english_voices(std::vector<std::string>* missing) {
  char tmpl[] = "/tmp/mona-voices-XXXXXX";
  detail::check_data(::mkdtemp(tmpl) != nullptr, "english_voices: cannot create a directory under /tmp");
  const std::string dir = tmpl;
  std::vector<Voice> out;
  try {
    if (on_path("espeak-ng")) {
      for (auto& v : espeak_voices(dir)) out.push_back(std::move(v));
    } else if (missing) {
      missing->push_back("espeak-ng");
    }
    if (on_path("flite")) {
      for (auto& v : flite_voices(dir)) out.push_back(std::move(v));
    } else if (missing) {
      missing->push_back("flite");
    }
    const auto fest = on_path("festival") ? festival_voices() : std::vector<Voice>{};
    if (fest.empty() && missing) missing->push_back("festival");
    for (const auto& v : fest) out.push_back(v);
  } catch (...) {
    fs::remove_all(dir);
    throw;
  }
  fs::remove_all(dir);
  return out;
}

std::vector<Voice> voices_of(const std::vector<Voice>& voices, VoiceSplit split) {
  std::vector<Voice> out;
  for (const auto& v : voices)
    if (voice_split(v) == split) out.push_back(v);
  return out;
}

void UtteranceOptions::validate() const {
  detail::check(sample_rate > 0, "UtteranceOptions::sample_rate: expected > 0 Hz, got ", sample_rate);
  detail::check(std::isfinite(clip_seconds) && clip_seconds > 0 && clip_seconds <= 60,
                "UtteranceOptions::clip_seconds: expected in (0, 60], got ", clip_seconds);
  check_range("crop_seconds", crop_seconds, 0, clip_seconds / 2);
  check_range("rate", rate, 0.25, 4);
  check_range("tempo", tempo, 0.25, 4);
  check_range("pitch_cents", pitch_cents, -2400, 2400);
  check_range("gain_db", gain_db, -60, 20);
  check_range("snr_db", snr_db, -20, 100);
  check_range("noise_pole", noise_pole, 0, 0.999);
}

uint64_t utterance_seed(uint64_t seed, const std::string& set, uint64_t index) {
  auto mix = [](uint64_t z) {  // SplitMix64's finaliser
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(seed + 0x9e3779b97f4a7c15ULL);
  for (unsigned char c : set) h = mix(h ^ c);
  return mix(h ^ mix(index + 0x9e3779b97f4a7c15ULL));
}

UtterancePlan plan_utterance(uint64_t generator_seed, const std::vector<Voice>& voices,
                             const std::vector<std::string>& vocabulary, int min_words, int max_words,
                             double min_seconds, const UtteranceOptions& options) {
  options.validate();
  detail::check(!voices.empty(), "plan_utterance: no voices");
  detail::check(!vocabulary.empty(), "plan_utterance: empty vocabulary");
  detail::check(min_words >= 1 && min_words <= max_words, "plan_utterance: expected 1 <= min_words <= max_words, got ",
                min_words, " and ", max_words);
  detail::check(std::isfinite(min_seconds) && min_seconds >= 0, "plan_utterance: min_seconds: expected >= 0, got ",
                min_seconds);
  std::mt19937_64 g(generator_seed);
  UtterancePlan p;
  std::vector<Synthesizer> synthesizers;
  for (const auto& v : voices)
    if (std::find(synthesizers.begin(), synthesizers.end(), v.synthesizer) == synthesizers.end())
      synthesizers.push_back(v.synthesizer);
  const Synthesizer s = synthesizers[std::uniform_int_distribution<size_t>(0, synthesizers.size() - 1)(g)];
  std::vector<const Voice*> of_s;
  for (const auto& v : voices)
    if (v.synthesizer == s) of_s.push_back(&v);
  p.voice = *of_s[std::uniform_int_distribution<size_t>(0, of_s.size() - 1)(g)];
  p.rate = draw(g, options.rate);
  p.tempo = draw(g, options.tempo);
  p.pitch_cents = draw(g, options.pitch_cents);
  p.gain_db = draw(g, options.gain_db);
  p.add_noise = options.add_noise;
  p.snr_db = draw(g, options.snr_db);
  p.noise_pole = draw(g, options.noise_pole);
  p.noise_seed = g();
  const int n = std::uniform_int_distribution<int>(min_words, max_words)(g);
  std::uniform_int_distribution<size_t> word(0, vocabulary.size() - 1);
  double seconds = 0;
  while (static_cast<int>(p.words.size()) < n || seconds < min_seconds) {
    p.words.push_back(vocabulary[word(g)]);
    p.offsets.push_back(std::uniform_real_distribution<double>(0, 1)(g));
    const double front = draw(g, options.crop_seconds), back = draw(g, options.crop_seconds);
    p.crops.emplace_back(front, back);
    seconds += (options.clip_seconds - front - back) / p.tempo;
  }
  return p;
}

std::vector<Waveform> synthesize_words(const Voice& voice, const std::vector<std::string>& words, double rate,
                                       int sample_rate, const std::string& work_dir) {
  detail::check(std::isfinite(rate) && rate > 0, "synthesize_words: rate: expected > 0, got ", rate);
  detail::check(sample_rate > 0, "synthesize_words: sample_rate: expected > 0 Hz, got ", sample_rate);
  for (const auto& w : words) check_word(w);
  const std::string log = work_dir + "/synth.log";
  std::vector<std::string> files;
  for (size_t i = 0; i < words.size(); ++i) files.push_back(work_dir + "/word" + std::to_string(i) + ".wav");
  switch (voice.synthesizer) {
    case Synthesizer::espeak_ng: {
      // -s: words per minute, 175 by default.
      const std::string wpm = std::to_string(static_cast<int>(std::lround(175 * rate)));
      for (size_t i = 0; i < words.size(); ++i)
        run({"espeak-ng", "-v", voice.name, "-s", wpm, "-w", files[i], words[i]}, log);
      break;
    }
    case Synthesizer::flite:
      for (size_t i = 0; i < words.size(); ++i)
        run({"flite", "-voice", voice.name, "--setf", "duration_stretch=" + number(1 / rate), "-t", words[i], "-o",
             files[i]},
            log);
      break;
    case Synthesizer::festival: {
      std::string script = "(voice_" + voice.name + ")\n(Parameter.set 'Duration_Stretch " + number(1 / rate) + ")\n";
      for (size_t i = 0; i < words.size(); ++i)
        script += "(utt.save.wave (utt.synth (Utterance Text \"" + words[i] + "\")) \"" + files[i] + "\" 'riff)\n";
      const std::string path = work_dir + "/synth.scm";
      std::ofstream(path) << script;
      run({"festival", "-b", path}, log);
      break;
    }
  }
  std::vector<Waveform> out;
  for (size_t i = 0; i < words.size(); ++i) {
    Waveform w = read_audio(files[i], sample_rate);
    detail::check_data(!w.samples.empty(), voice.id(), " wrote no audio for '", words[i], "'");
    out.push_back(std::move(w));
    fs::remove(files[i]);
  }
  return out;
}

Utterance render_utterance(const UtterancePlan& plan, const UtteranceOptions& options, const std::string& work_dir) {
  options.validate();
  detail::check(!plan.words.empty() && plan.offsets.size() == plan.words.size() &&
                    plan.crops.size() == plan.words.size(),
                "render_utterance: a plan of ", plan.words.size(), " words needs as many offsets and crops (got ",
                plan.offsets.size(), " and ", plan.crops.size(), ")");
  const int sr = options.sample_rate;
  const auto samples = [&](double seconds) { return static_cast<int64_t>(std::lround(seconds * sr)); };
  const std::vector<Waveform> spoken = synthesize_words(plan.voice, plan.words, plan.rate, sr, work_dir);

  // Steps 2 and the concatenation of 3: speech located, placed in its clip, the clip cropped.
  Utterance u;
  std::vector<float> x;
  const int64_t clip = samples(options.clip_seconds), margin = samples(options.crop_seconds.second);
  for (size_t i = 0; i < spoken.size(); ++i) {
    const auto& s = spoken[i].samples;
    auto loud = [](float v) { return std::fabs(v) > kSilenceLevel; };
    const auto first = std::find_if(s.begin(), s.end(), loud);
    detail::check_data(first != s.end(), plan.voice.id(), " synthesized no speech for '", plan.words[i], "'");
    const auto last = std::find_if(s.rbegin(), s.rend(), loud).base();
    const auto length = static_cast<int64_t>(last - first);
    // Where the word is heard, as an offset [heard_begin, heard_end) into [first, last).
    const auto [heard_begin, heard_end] = audible_part(&*first, length, sr);
    int64_t lead = 0;
    if (clip - length >= 2 * margin) {
      lead = margin + static_cast<int64_t>(std::floor(plan.offsets[i] * static_cast<double>(clip - length - 2 * margin)));
    } else if (clip > length) {
      lead = (clip - length) / 2;
    }
    std::vector<float> c(static_cast<size_t>(std::max(clip, length)), 0.0f);
    std::copy(first, last, c.begin() + lead);
    const int64_t front = std::min<int64_t>(samples(plan.crops[i].first), static_cast<int64_t>(c.size()));
    const int64_t back = std::min<int64_t>(samples(plan.crops[i].second), static_cast<int64_t>(c.size()) - front);
    // The speech's samples [lead, lead + length) of the clip, as kept [front, size - back).
    const auto base = static_cast<int64_t>(x.size()), size = static_cast<int64_t>(c.size());
    const auto kept = [&](int64_t from, int64_t to) {  // clip samples [from, to) as kept, in seconds
      const int64_t a = base + std::max(from, front) - front, b = base + std::min(to, size - back) - front;
      return std::make_pair(static_cast<double>(a) / sr, static_cast<double>(std::max(a, b)) / sr);
    };
    x.insert(x.end(), c.begin() + front, c.end() - back);
    u.speech_times.push_back(kept(lead, lead + length));
    u.word_times.push_back(kept(lead + heard_begin, lead + heard_end));
  }

  // Step 3: tempo and pitch by sox (float samples in and out, no dither).
  if (plan.tempo != 1 || plan.pitch_cents != 0) {
    const std::string in = work_dir + "/speech.wav", out = work_dir + "/speech-sox.wav";
    write_float_wav(in, x, sr);
    std::vector<std::string> cmd = {"sox", "-D", "-V1", in, "-e", "floating-point", "-b", "32", out};
    if (plan.tempo != 1) cmd.insert(cmd.end(), {"tempo", "-s", number(plan.tempo)});
    if (plan.pitch_cents != 0) cmd.insert(cmd.end(), {"pitch", number(plan.pitch_cents)});
    run(cmd, work_dir + "/sox.log");
    x = read_audio(out).samples;
    fs::remove(in);
    fs::remove(out);
    for (auto* times : {&u.word_times, &u.speech_times}) {
      for (auto& [a, b] : *times) {
        a /= plan.tempo;
        b /= plan.tempo;
      }
    }
  }
  u.speech = {x, sr};

  // Step 4: noise at the drawn SNR over the words' samples.
  std::vector<float> noise(x.size(), 0.0f);
  if (plan.add_noise && !x.empty()) {
    std::mt19937_64 g(plan.noise_seed);
    std::normal_distribution<double> white(0, 1);
    double y = 0, noise_power = 0;
    std::vector<double> n(x.size());
    for (size_t k = 0; k < n.size(); ++k) {
      y = plan.noise_pole * y + (1 - plan.noise_pole) * white(g);
      n[k] = y;
      noise_power += y * y / static_cast<double>(n.size());
    }
    double speech_power = 0;
    int64_t speech_samples = 0;
    for (const auto& [a, b] : u.speech_times) {
      const auto lo = std::min<int64_t>(samples(a), static_cast<int64_t>(x.size()));
      const auto hi = std::min<int64_t>(samples(b), static_cast<int64_t>(x.size()));
      for (int64_t k = lo; k < hi; ++k) speech_power += static_cast<double>(x[static_cast<size_t>(k)]) * x[static_cast<size_t>(k)];
      speech_samples += hi - lo;
    }
    speech_power /= static_cast<double>(std::max<int64_t>(1, speech_samples));
    const double scale = noise_power > 0 ? std::sqrt(speech_power / (noise_power * std::pow(10.0, plan.snr_db / 10))) : 0;
    for (size_t k = 0; k < n.size(); ++k) noise[k] = static_cast<float>(scale * n[k]);
  }

  // Step 5: the gain, limited so that the peak stays at kPeak.
  float peak = 0;
  for (size_t k = 0; k < x.size(); ++k) peak = std::max(peak, std::fabs(x[k] + noise[k]));
  u.gain = std::pow(10.0, plan.gain_db / 20);
  if (peak > 0 && u.gain * peak > kPeak) u.gain = kPeak / peak;
  u.audio.sample_rate = sr;
  u.audio.samples.resize(x.size());
  for (size_t k = 0; k < x.size(); ++k) u.audio.samples[k] = static_cast<float>(u.gain * (x[k] + noise[k]));
  return u;
}

bool is_synthesizable_word(const std::string& word) {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '\'' || c == '-';
  });
}

}  // namespace mona::audio
