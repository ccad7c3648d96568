// mona/audio/synthesis.h: spoken-word corpora from Debian's speech synthesizers, in the
// protocol of 003 (papers/003, sec. 4.1): words spoken in isolation, each placed in a clip
// of a fixed length (Speech Commands' one second), cropped at both ends by a random amount
// and concatenated into an utterance; test sets longer than anything trained on.
//
// Three synthesizers, run as programs (no shell; arguments are passed as they are):
//   espeak-ng  every English accent (en-029, en-gb, en-gb-scotland, en-gb-x-gbclan,
//              en-gb-x-gbcwmd, en-gb-x-rp, en-us, en-us-nyc) with every voice variant of
//              espeak-ng-data (m1..m8, f1..f5, klatt.., Alicia, ...) and with none:
//              "en-us+f3"
//   flite      its built-in voices kal (8 kHz), kal16, awb, rms, slt (not awb_time, a
//              limited-domain voice that only tells the time)
//   festival   the English festvox voices Debian ships: kal_diphone, ked_diphone,
//              cmu_us_slt_arctic_hts
// A synthesizer that is not installed contributes no voices (english_voices() says which).
//
// Speakers and splits. A voice's speaker is who it sounds like: the espeak-ng variant (the
// accent changes the pronunciation rules, not the vocal tract), or the person a flite or
// festival voice was recorded from (flite's kal and festival's kal_diphone are one speaker).
// Splits are by speaker (voice_split), so no speaker of dev or test is ever trained on:
//   dev:  kDevSpeakers (espeak-ng f5 m5 klatt5 Annie Mike john anika norbert; rms, ked)
//   test: kTestSpeakers (espeak-ng f4 m2 m6 klatt3 Alicia Lee steph2 david linda robert; slt)
//   train: every other speaker.
//
// An utterance (render_utterance), in this order:
//   1. each word synthesized alone at the utterance's speaking rate (the synthesizer's own
//      control: espeak-ng -s, flite duration_stretch, festival Duration_Stretch), resampled
//      to `sample_rate` with libsoxr;
//   2. its speech found (from the first to the last sample above kSilenceLevel) and placed
//      at a random offset in a clip of clip_seconds of digital silence (a word longer than
//      the clip keeps its own length), then crop_seconds cut from each end (one draw per
//      end);
//   3. the clips concatenated; tempo and pitch changed together by one `sox` run (its
//      `tempo -s` and `pitch` effects, no dither) unless both are neutral;
//   4. coloured noise (white Gaussian noise through a one-pole low-pass filter of random
//      pole) added at the drawn SNR, the ratio of the mean power of the speech (the words'
//      samples found in step 2) to the mean power of the noise (every sample);
//   5. the drawn gain, reduced where needed so that no sample exceeds kPeak in magnitude.
// Every random choice comes from one generator seeded with (seed, set, index)
// (utterance_seed), drawn in plan_utterance, so an utterance is a function of those three
// and the options, whichever thread renders it and in whatever order.
//
// Units: seconds for times, Hz for rates, decibels for SNR and gain, cents (1/100 of a
// semitone) for pitch. Samples are mono floats in [-1, 1].
//
// Errors: mona::ArgumentError for bad options (a range with min > max, a rate <= 0, a
// word count < 1, an empty vocabulary or voice list), naming the option and its value;
// mona::DataError when a synthesizer or sox fails or writes no audio, with the command
// and what it printed.
// Threads: the functions share no state; render_utterance may run in many threads at once,
// each with its own work_dir.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mona/audio/audio_file.h"

namespace mona::audio {

enum class Synthesizer { espeak_ng, flite, festival };

/// "espeak-ng", "flite", "festival".
const char* synthesizer_name(Synthesizer s);

/// One voice of one synthesizer.
struct Voice {
  Synthesizer synthesizer = Synthesizer::espeak_ng;
  std::string name;     ///< as the synthesizer takes it: "en-us+f3", "slt", "kal_diphone"
  std::string speaker;  ///< who it sounds like (the unit of the split): "f3", "slt", "kal"

  /// "espeak-ng/en-us+f3", "flite/slt", "festival/kal_diphone".
  std::string id() const;
};

enum class VoiceSplit { train, dev, test };
const char* split_name(VoiceSplit s);

/// The speakers held out for dev and for test (espeak-ng variants in every accent, and the
/// speakers of flite's and festival's voices).
extern const std::vector<std::string> kDevSpeakers;
extern const std::vector<std::string> kTestSpeakers;

/// The split of a voice's speaker (file comment).
VoiceSplit voice_split(const Voice& v);

/// Every English voice of the synthesizers installed here, in a fixed order (synthesizer,
/// then name). `missing`, when given, receives the synthesizers found missing.
std::vector<Voice> english_voices(std::vector<std::string>* missing = nullptr);

/// The voices of `voices` in `split`.
std::vector<Voice> voices_of(const std::vector<Voice>& voices, VoiceSplit split);

/// Peak magnitude after the gain (step 5) and the level below which a sample is silence
/// when a word's speech is located (step 2; about -60 dBFS).
constexpr float kPeak = 0.95f;
constexpr float kSilenceLevel = 1e-3f;
/// Where a word is heard (Utterance::word_times): the 10 ms frames of its speech whose
/// power is at most this many dB below its loudest frame's. flite and festival start and
/// end a word with pauses at about -60 dBFS, which kSilenceLevel keeps in the speech
/// (0.1-0.25 s of it); 40 dB below the peak leaves them out and keeps the softest
/// consonants.
constexpr double kAudibleBelowPeakDb = 40;

/// The ranges every utterance draws from (uniformly) and what is fixed. A range with equal
/// ends fixes the value; noise is off when `add_noise` is false.
struct UtteranceOptions {
  int sample_rate = 16000;                            ///< Hz of the written audio
  double clip_seconds = 1.0;                          ///< a word's clip (Speech Commands: 1 s)
  std::pair<double, double> crop_seconds{0.05, 0.15};  ///< cut from each end of each clip (003)
  std::pair<double, double> rate{0.8, 1.25};          ///< speaking rate, 1 = the voice's own
  std::pair<double, double> tempo{0.9, 1.1};          ///< sox tempo factor (duration / factor)
  std::pair<double, double> pitch_cents{-300, 300};   ///< sox pitch shift
  std::pair<double, double> gain_db{-10, 0};          ///< before the peak limit of step 5
  bool add_noise = true;
  std::pair<double, double> snr_db{5, 30};            ///< speech power / noise power
  std::pair<double, double> noise_pole{0.0, 0.95};    ///< one-pole low-pass: 0 white, near 1 brown

  /// Throws ArgumentError naming the first bad option and its value.
  void validate() const;
};

/// The generator seed of utterance `index` of the set named `set` (a SplitMix64 mix of the
/// three), so that sets and utterances draw independently.
uint64_t utterance_seed(uint64_t seed, const std::string& set, uint64_t index);

/// Every random choice of one utterance.
struct UtterancePlan {
  Voice voice;
  std::vector<std::string> words;
  double rate = 1, tempo = 1, pitch_cents = 0, gain_db = 0, snr_db = 0, noise_pole = 0;
  bool add_noise = false;
  std::vector<double> offsets;                        ///< per word: position of its speech in its clip, in [0, 1]
  std::vector<std::pair<double, double>> crops;       ///< per word: seconds cut (front, back)
  uint64_t noise_seed = 0;
};

/// Whether the synthesizers are given `word` as it is: a non-empty word of ASCII letters,
/// digits, ' and - only (what plan_utterance and synthesize_words accept; the rule keeps
/// the command lines they build free of shell and synthesizer markup).
bool is_synthesizable_word(const std::string& word);

/// Draws an utterance: a voice (first the synthesizer, uniformly among those `voices` has,
/// then a voice of it uniformly), the words (uniformly from `vocabulary`, as many as drawn
/// uniformly in [min_words, max_words]; with `min_seconds` > 0, words are added until the
/// expected duration, the sum of the clips less their crops divided by the tempo, reaches
/// it), and the ranges of `options`.
UtterancePlan plan_utterance(uint64_t generator_seed, const std::vector<Voice>& voices,
                             const std::vector<std::string>& vocabulary, int min_words, int max_words,
                             double min_seconds, const UtteranceOptions& options);

/// A rendered utterance.
struct Utterance {
  Waveform audio;                                     ///< the result (steps 1-5)
  Waveform speech;                                    ///< after step 3: no noise, no gain
  double gain = 1;                                    ///< audio = gain * (speech + noise)
  /// Per word: seconds where it is heard, from the start of its first 10 ms frame within
  /// kAudibleBelowPeakDb of its loudest to the end of its last (step 2's samples, cropped
  /// like them; after step 3's tempo).
  std::vector<std::pair<double, double>> word_times;
  /// Per word: seconds of the samples step 2 found (first to last above kSilenceLevel), as
  /// kept after the crops: the speech step 4's SNR is taken over. Each contains the
  /// word's word_times.
  std::vector<std::pair<double, double>> speech_times;
};

/// Synthesizes each of `words` alone (one call of the synthesizer per word; festival takes
/// them all in one run), at speaking rate `rate`, resampled to `sample_rate` Hz. `work_dir`
/// (an existing directory private to the calling thread) holds the synthesizer's files
/// while they are read. Words are letters, digits, ' and - only (ArgumentError otherwise).
std::vector<Waveform> synthesize_words(const Voice& voice, const std::vector<std::string>& words,
                                       double rate, int sample_rate, const std::string& work_dir);

/// Renders `plan` (file comment, steps 1-5); `work_dir` as for synthesize_word.
Utterance render_utterance(const UtterancePlan& plan, const UtteranceOptions& options,
                           const std::string& work_dir);

}  // namespace mona::audio
