// label: commands
// mona/audio/synthesis.h against what it promises, checked from outside: the voices of the
// installed synthesizers and their split by speaker, plans as a function of (seed, set,
// index), renders identical bit for bit, each word's synthesized speech found verbatim in
// the utterance at its reported time with digital silence around it, the lengths the crops
// and the tempo imply, and the noise's SNR and colour measured from audio / gain - speech.
// Needs espeak-ng, flite, festival (three festvox voices) and sox: scripts/install-deps.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "mona/audio/synthesis.h"
#include "mona/core/error.h"
#include "util/temp_dir.h"

namespace mona::audio {
namespace {

const std::vector<std::string> kWords = {"go", "stop", "seven", "marvin", "left"};

// The voices of one synthesizer.
std::vector<Voice> of(Synthesizer s) {
  std::vector<Voice> out;
  for (const auto& v : english_voices())
    if (v.synthesizer == s) out.push_back(v);
  return out;
}

// Options with every random effect off but those a test turns on.
UtteranceOptions neutral() {
  UtteranceOptions o;
  o.crop_seconds = {0.1, 0.1};
  o.rate = {1, 1};
  o.tempo = {1, 1};
  o.pitch_cents = {0, 0};
  o.gain_db = {0, 0};
  o.add_noise = false;
  return o;
}

TEST(Synthesis, VoicesCoverEverySynthesizerAndSpeakersNeverCrossSplits) {
  std::vector<std::string> missing;
  const auto voices = english_voices(&missing);
  EXPECT_TRUE(missing.empty()) << "not installed: " << missing.front() << " (scripts/install-deps.sh)";
  std::map<Synthesizer, int> count;
  std::map<std::string, std::set<VoiceSplit>> splits_of_speaker;
  std::set<std::string> ids;
  for (const auto& v : voices) {
    ++count[v.synthesizer];
    splits_of_speaker[v.speaker].insert(voice_split(v));
    EXPECT_TRUE(ids.insert(v.id()).second) << "voice listed twice: " << v.id();
  }
  // espeak-ng: 8 English accents, each alone and with every variant (101 in Debian 12).
  EXPECT_EQ(count[Synthesizer::espeak_ng] % 8, 0);
  EXPECT_GE(count[Synthesizer::espeak_ng], 8 * 50);
  EXPECT_EQ(count[Synthesizer::flite], 5);     // kal kal16 awb rms slt, not awb_time
  EXPECT_EQ(count[Synthesizer::festival], 3);  // kal_diphone ked_diphone cmu_us_slt_arctic_hts
  for (const auto& [speaker, splits] : splits_of_speaker) EXPECT_EQ(splits.size(), 1u) << speaker;
  // Every held-out speaker exists (the lists are not stale), and each split has voices of
  // every synthesizer.
  for (const auto* list : {&kDevSpeakers, &kTestSpeakers})
    for (const auto& s : *list) EXPECT_EQ(splits_of_speaker.count(s), 1u) << s << " is no voice's speaker";
  for (auto split : {VoiceSplit::train, VoiceSplit::dev, VoiceSplit::test}) {
    std::set<Synthesizer> s;
    for (const auto& v : voices_of(voices, split)) s.insert(v.synthesizer);
    EXPECT_EQ(s.size(), 3u) << split_name(split);
  }
  for (const auto& v : voices)
    if (v.synthesizer == Synthesizer::flite && (v.name == "kal" || v.name == "kal16")) {
      EXPECT_EQ(v.speaker, "kal");
    }
}

TEST(Synthesis, PlanIsAFunctionOfSeedSetAndIndex) {
  const auto dev = voices_of(english_voices(), VoiceSplit::dev);
  const UtteranceOptions o;
  auto same = [](const UtterancePlan& a, const UtterancePlan& b) {
    return a.voice.id() == b.voice.id() && a.words == b.words && a.rate == b.rate && a.tempo == b.tempo &&
           a.pitch_cents == b.pitch_cents && a.gain_db == b.gain_db && a.snr_db == b.snr_db && a.offsets == b.offsets &&
           a.crops == b.crops && a.noise_seed == b.noise_seed;
  };
  EXPECT_TRUE(same(plan_utterance(utterance_seed(1, "dev", 7), dev, kWords, 5, 9, 0, o),
                   plan_utterance(utterance_seed(1, "dev", 7), dev, kWords, 5, 9, 0, o)));
  EXPECT_NE(utterance_seed(1, "dev", 7), utterance_seed(1, "dev", 8));
  EXPECT_NE(utterance_seed(1, "dev", 7), utterance_seed(2, "dev", 7));
  EXPECT_NE(utterance_seed(1, "dev", 7), utterance_seed(1, "test-7", 7));
  std::set<Synthesizer> drawn;
  std::map<int, int> lengths;
  for (uint64_t i = 0; i < 300; ++i) {
    const auto p = plan_utterance(utterance_seed(1, "dev", i), dev, kWords, 5, 9, 0, o);
    EXPECT_EQ(voice_split(p.voice), VoiceSplit::dev) << p.voice.id();
    drawn.insert(p.voice.synthesizer);
    ++lengths[static_cast<int>(p.words.size())];
    EXPECT_GE(p.rate, o.rate.first);
    EXPECT_LE(p.rate, o.rate.second);
    EXPECT_GE(p.snr_db, o.snr_db.first);
    EXPECT_LE(p.snr_db, o.snr_db.second);
    for (const auto& [front, back] : p.crops) {
      EXPECT_GE(std::min(front, back), o.crop_seconds.first);
      EXPECT_LE(std::max(front, back), o.crop_seconds.second);
    }
  }
  EXPECT_EQ(drawn.size(), 3u);
  EXPECT_EQ(lengths.size(), 5u);  // 5..9 words, each drawn (300 draws of 5 values)
  EXPECT_EQ(lengths.begin()->first, 5);
  EXPECT_EQ(lengths.rbegin()->first, 9);
  // With min_seconds, words are added until the clips less their crops, over the tempo, last
  // that long.
  const auto p = plan_utterance(utterance_seed(1, "test-long", 0), dev, kWords, 1, 1, 50, o);
  double seconds = 0;
  for (const auto& [front, back] : p.crops) seconds += (o.clip_seconds - front - back) / p.tempo;
  EXPECT_GE(seconds, 50);
  EXPECT_LT(seconds - (o.clip_seconds - p.crops.back().first - p.crops.back().second) / p.tempo, 50);
}

TEST(Synthesis, RenderIsTheSameBitForBitInAnyWorkDirectory) {
  UtteranceOptions o;  // every effect on: rate, tempo and pitch (sox), noise, gain
  for (auto s : {Synthesizer::espeak_ng, Synthesizer::flite, Synthesizer::festival}) {
    const auto voices = of(s);
    ASSERT_FALSE(voices.empty()) << synthesizer_name(s);
    const auto plan = plan_utterance(utterance_seed(3, "train", 0), voices, kWords, 2, 2, 0, o);
    test::TempDir a, b;
    const auto ua = render_utterance(plan, o, a.path());
    const auto ub = render_utterance(plan, o, b.path());
    ASSERT_FALSE(ua.audio.samples.empty()) << plan.voice.id();
    EXPECT_EQ(ua.audio.samples, ub.audio.samples) << plan.voice.id();
    EXPECT_EQ(ua.audio.sample_rate, 16000);
  }
}

TEST(Synthesis, EachWordsSpeechIsInItsCroppedClipAtItsReportedTime) {
  for (auto s : {Synthesizer::espeak_ng, Synthesizer::flite, Synthesizer::festival}) {
    UtteranceOptions o = neutral();
    o.crop_seconds = {0.05, 0.15};
    o.rate = {1.25, 1.25};  // short words, spoken fast: each fits its clip inside the crops' reach
    const auto plan = plan_utterance(utterance_seed(4, "train", 0), of(s), {"go", "up", "no", "six", "off"}, 4, 4, 0, o);
    test::TempDir d, w;
    const auto u = render_utterance(plan, o, d.path());
    // The words synthesized alone, independently, and their speech located by hand.
    const auto alone = synthesize_words(plan.voice, plan.words, plan.rate, 16000, w.path());
    int64_t expected_length = 0;
    std::vector<bool> is_speech(u.audio.samples.size(), false);
    for (size_t k = 0; k < alone.size(); ++k) {
      const auto& x = alone[k].samples;
      size_t first = 0, last = x.size();
      while (first < x.size() && std::fabs(x[first]) <= kSilenceLevel) ++first;
      while (last > first && std::fabs(x[last - 1]) <= kSilenceLevel) --last;
      ASSERT_LT(last - first, 16000u - 2 * 2400u) << plan.words[k] << ": its speech fits the clip's margins";
      expected_length += 16000 - std::lround(plan.crops[k].first * 16000) - std::lround(plan.crops[k].second * 16000);
      // The reported times are in seconds at 16 kHz: samples [start, end) are the word's
      // speech, multiplied by the gain.
      const auto start = static_cast<size_t>(std::lround(u.speech_times[k].first * 16000));
      ASSERT_EQ(std::lround(u.speech_times[k].second * 16000) - std::lround(u.speech_times[k].first * 16000),
                static_cast<long>(last - first))
          << plan.words[k];
      for (size_t n = 0; n < last - first; ++n) {
        ASSERT_FLOAT_EQ(u.audio.samples[start + n], static_cast<float>(u.gain * x[first + n]))
            << plan.voice.id() << " " << plan.words[k] << " sample " << n;
        is_speech[start + n] = true;
      }
    }
    EXPECT_EQ(static_cast<int64_t>(u.audio.samples.size()), expected_length) << plan.voice.id();
    for (size_t n = 0; n < is_speech.size(); ++n)
      if (!is_speech[n]) {
        ASSERT_EQ(u.audio.samples[n], 0.0f) << plan.voice.id() << ": sample " << n << " outside the words";
      }
    EXPECT_LE(u.gain, 1.0);
  }
}

// Where a word is heard (Utterance::word_times) lies inside the samples its speech was found
// in (speech_times), and what it leaves out of them is pause: under 1% of the word's energy
// (a frame 40 dB below the loudest holds 1e-4 of its power, and a pause is at most a few
// dozen frames). flite and festival begin and end their words with pauses just above
// kSilenceLevel, which the heard interval leaves out; espeak-ng's words start at once.
TEST(Synthesis, WordTimesAreWhereTheWordIsHeard) {
  for (auto s : {Synthesizer::espeak_ng, Synthesizer::flite, Synthesizer::festival}) {
    UtteranceOptions o = neutral();
    const auto plan = plan_utterance(utterance_seed(8, "train", 0), of(s), kWords, 6, 6, 0, o);
    test::TempDir d;
    const auto u = render_utterance(plan, o, d.path());
    ASSERT_EQ(u.word_times.size(), plan.words.size());
    ASSERT_EQ(u.speech_times.size(), plan.words.size());
    double left_out = 0;
    for (size_t k = 0; k < plan.words.size(); ++k) {
      const auto [a, b] = u.word_times[k];
      const auto [sa, sb] = u.speech_times[k];
      const std::string what = plan.voice.id() + " " + plan.words[k];
      EXPECT_LE(sa, a) << what;
      EXPECT_LT(a, b) << what;
      EXPECT_LE(b, sb) << what;
      double heard = 0, all = 0;
      for (auto n = std::lround(sa * 16000); n < std::lround(sb * 16000); ++n) {
        const double e = static_cast<double>(u.speech.samples[static_cast<size_t>(n)]) * u.speech.samples[static_cast<size_t>(n)];
        all += e;
        if (n >= std::lround(a * 16000) && n < std::lround(b * 16000)) heard += e;
      }
      EXPECT_GT(heard, 0.99 * all) << what;
      left_out += (a - sa) + (sb - b);
    }
    std::printf("[   info   ] %s: %.3f s of pause per word left out of the word times\n", plan.voice.id().c_str(),
                left_out / static_cast<double>(plan.words.size()));
    if (s != Synthesizer::espeak_ng) {
      // measured: flite/rms 0.070 s per word, festival/ked_diphone 0.183 s
      EXPECT_GT(left_out / static_cast<double>(plan.words.size()), 0.03) << plan.voice.id();
    }
  }
}

TEST(Synthesis, TempoShortensTheUtteranceAndItsWordTimes) {
  UtteranceOptions o = neutral();
  const auto voices = of(Synthesizer::espeak_ng);
  const auto plan = plan_utterance(utterance_seed(5, "train", 0), voices, kWords, 3, 3, 0, o);
  test::TempDir d;
  const auto slow = render_utterance(plan, o, d.path());
  auto fast_plan = plan;
  fast_plan.tempo = 1.25;
  const auto fast = render_utterance(fast_plan, o, d.path());
  // sox's tempo keeps the pitch and scales the duration by 1 / tempo (to a few ms).
  EXPECT_NEAR(fast.audio.seconds(), slow.audio.seconds() / 1.25, 0.02);
  for (size_t k = 0; k < plan.words.size(); ++k) {
    EXPECT_DOUBLE_EQ(fast.word_times[k].first, slow.word_times[k].first / 1.25);
    EXPECT_DOUBLE_EQ(fast.word_times[k].second, slow.word_times[k].second / 1.25);
    EXPECT_DOUBLE_EQ(fast.speech_times[k].first, slow.speech_times[k].first / 1.25);
    EXPECT_DOUBLE_EQ(fast.speech_times[k].second, slow.speech_times[k].second / 1.25);
  }
}

TEST(Synthesis, NoiseIsAddedAtTheDrawnSnrWithTheDrawnColour) {
  for (double pole : {0.0, 0.9}) {
    UtteranceOptions o = neutral();
    o.add_noise = true;
    o.snr_db = {12, 12};
    o.noise_pole = {pole, pole};
    o.gain_db = {6, 6};  // more than the peak allows: the gain is limited
    const auto plan = plan_utterance(utterance_seed(6, "train", 0), of(Synthesizer::flite), kWords, 3, 3, 0, o);
    test::TempDir d;
    const auto u = render_utterance(plan, o, d.path());
    ASSERT_EQ(u.audio.samples.size(), u.speech.samples.size());
    double speech = 0, noise = 0, lag1 = 0;
    int64_t speech_n = 0;
    std::vector<double> n(u.audio.samples.size());
    for (size_t k = 0; k < n.size(); ++k) n[k] = u.audio.samples[k] / u.gain - u.speech.samples[k];
    for (size_t k = 0; k < n.size(); ++k) {
      noise += n[k] * n[k];
      if (k) lag1 += n[k] * n[k - 1];
    }
    for (const auto& [a, b] : u.speech_times)
      for (auto k = std::lround(a * 16000); k < std::lround(b * 16000); ++k, ++speech_n)
        speech += static_cast<double>(u.speech.samples[static_cast<size_t>(k)]) * u.speech.samples[static_cast<size_t>(k)];
    const double snr = 10 * std::log10((speech / static_cast<double>(speech_n)) / (noise / static_cast<double>(n.size())));
    // audio is float: audio / gain - speech carries a relative rounding error of about 1e-7
    // of the speech's amplitude, which moves the measured SNR by far less than 0.01 dB.
    EXPECT_NEAR(snr, 12.0, 0.01) << "pole " << pole;
    // A one-pole low-pass with pole p has lag-1 autocorrelation p (over ~50,000 samples the
    // estimate's standard error is about 0.005).
    EXPECT_NEAR(lag1 / noise, pole, 0.03) << "pole " << pole;
    float peak = 0;
    for (float x : u.audio.samples) peak = std::max(peak, std::fabs(x));
    EXPECT_NEAR(peak, kPeak, 1e-6) << "the +6 dB gain is limited to the peak";
    EXPECT_LT(u.gain, std::pow(10.0, 6.0 / 20));
  }
}

TEST(Synthesis, BadOptionsAndWordsAreRefusedByName) {
  UtteranceOptions o;
  o.crop_seconds = {0.2, 0.1};
  try {
    o.validate();
    FAIL() << "accepted crop_seconds [0.2, 0.1]";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("crop_seconds"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0.2"), std::string::npos) << e.what();
  }
  test::TempDir d;
  const Voice v{Synthesizer::espeak_ng, "en-us", "default"};
  EXPECT_THROW(synthesize_words(v, {"go\"); (rm"}, 1, 16000, d.path()), ArgumentError);
  EXPECT_THROW(plan_utterance(1, {v}, kWords, 3, 2, 0, UtteranceOptions{}), ArgumentError);
  EXPECT_THROW(plan_utterance(1, {}, kWords, 1, 2, 0, UtteranceOptions{}), ArgumentError);
  // A synthesizer that fails (festival has no such voice): the command and what it printed.
  try {
    synthesize_words({Synthesizer::festival, "no_such_voice", "x"}, {"go"}, 1, 16000, d.path());
    FAIL() << "festival without the voice gave audio";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("festival -b"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("voice_no_such_voice"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mona::audio
