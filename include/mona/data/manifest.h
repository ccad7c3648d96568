// mona/data/manifest.h: speech data as a manifest, one utterance per line.
//
// File format (UTF-8 text):
//
//   <audio path><TAB><transcript tokens>
//
// e.g. `wav/0001.wav<TAB>go left seven`. The path is the whole text before the TAB (it may
// contain spaces) and is taken relative to the manifest's own directory unless it is
// absolute; the transcript is split on whitespace as in a TSV dataset (mona/data/dataset.h).
// Blank lines are skipped and a trailing '\r' is dropped. A line without exactly one TAB,
// with an empty path or transcript, with a reserved symbol (<pad>, <s>, </s>, <unk>) in the
// transcript, or naming an audio file that does not exist is refused with mona::DataError
// naming manifest:line and the problem:
//   "train.tsv:12: audio file wav/0012.wav (/data/wav/0012.wav) does not exist"
// The audio files are not opened here (train::Trainer decodes them at its start).
//
// The utterances come back as data::Example with the resolved audio path as the one input
// token, so that the reference grouping and scoring of text data apply unchanged (an audio
// file listed twice with different transcripts has two references).
//
// Word times (optional, beside a manifest X.tsv as X.words.tsv; mona-make-spoken-commands
// writes them): where each word of a transcript is spoken, one word per line, in the order
// of the transcript:
//
//   <audio path><TAB><word><TAB><start s><TAB><end s>
//
// The path is resolved as the manifest's are. A malformed line (not 4 fields, a time that
// is not a finite number >= 0, end before start) is refused with mona::DataError naming
// file:line.
//
// Voices (optional, beside a manifest X.tsv as X.voices.tsv; mona-make-spoken-commands
// writes them): who speaks each utterance, one line per utterance:
//
//   <audio path><TAB><voice><TAB><speaker>
//
// e.g. `wav/dev/000001.wav<TAB>espeak-ng/en-us+Annie<TAB>Annie`. A voice is
// "<group>/<name>"; its group (for mona-make-spoken-commands the synthesizer: espeak-ng,
// flite, festival) is what `mona eval` reports error rates by. A line without 3 fields, with
// an empty field or an empty group (a voice "/name"), or naming an audio file twice is
// refused with mona::DataError naming file:line.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mona/data/dataset.h"

namespace mona::data {

/// Reads a manifest (format above): input = {resolved audio path}, output = transcript.
/// `lines`, when given, receives each utterance's 1-based line number in the manifest.
/// Throws mona::DataError naming the file (unreadable) or manifest:line.
std::vector<Example> read_manifest(const std::string& path, std::vector<int64_t>* lines = nullptr);

/// Parses manifest text; paths are resolved against `base_dir`, and `source_name` stands
/// for the file in error messages; `lines` as read_manifest.
std::vector<Example> parse_manifest(const std::string& text, const std::string& base_dir,
                                    const std::string& source_name, std::vector<int64_t>* lines = nullptr);

/// A word of an utterance and where it is spoken, in seconds from the start of the audio.
struct WordTime {
  std::string word;
  double start = 0, end = 0;
};

/// Word times of a manifest's utterances (format above), by resolved audio path.
using WordTimes = std::map<std::string, std::vector<WordTime>>;

/// Reads a word-time file (format above). Throws mona::DataError naming file:line.
WordTimes read_word_times(const std::string& path);

/// Parses word-time text; paths are resolved against `base_dir`, `source_name` names the
/// file in error messages.
WordTimes parse_word_times(const std::string& text, const std::string& base_dir, const std::string& source_name);

/// The word-time file of manifest `manifest_path` (X.tsv: X.words.tsv), or "" if none exists.
std::string word_times_path(const std::string& manifest_path);

/// Each utterance's voice group (format above: the voice up to its first '/', the whole
/// voice when it has none), by resolved audio path.
using VoiceGroups = std::map<std::string, std::string>;

/// Reads a voice file (format above). Throws mona::DataError naming file:line.
VoiceGroups read_voice_groups(const std::string& path);

/// Parses voice-file text; paths are resolved against `base_dir`, `source_name` names the
/// file in error messages.
VoiceGroups parse_voice_groups(const std::string& text, const std::string& base_dir, const std::string& source_name);

/// The voice file of manifest `manifest_path` (X.tsv: X.voices.tsv), or "" if none exists.
std::string voices_path(const std::string& manifest_path);

}  // namespace mona::data
