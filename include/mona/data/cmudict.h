// mona/data/cmudict.h: the CMU Pronouncing Dictionary as grapheme-to-phoneme data.
//
// Source: the npm package cmu-pronouncing-dictionary@3.0.0 (fetched and checksummed by
// scripts/fetch-cmudict.sh). Its index.js is an ES module, one entry per line:
//
//   /** @type {{ [word: string]: string }} */
//   export const dictionary = {
//     "'bout": "B AW1 T",
//     "a": "AH0",
//     "a(2)": "EY1",
//     "aalborg": "AO1 L B AO0 R G # place, danish",
//     ...
//     "zywicki": "Z IH0 W IH1 K IY0"
//   }
//
// parse_cmudict_js() reads that text without a JavaScript runtime and normalises it:
//   * words: ASCII-lowercased; a word must consist of a-z and the apostrophe only and hold at
//     least one letter ("a.d.", "able-bodied" are excluded and counted);
//   * "word(N)" (N a positive integer) is an alternative pronunciation of "word": it becomes an
//     extra reference of the same word, never a word of its own;
//   * pronunciations: a trailing comment ("# place, danish") is removed, stress digits 0/1/2 are
//     stripped, phonemes are upper-cased, and every phoneme must then be one of the 39 ARPAbet
//     phonemes (AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T
//     TH UH UW V W Y Z ZH);
//   * a pronunciation identical (after stress stripping) to an earlier one of the same word is
//     dropped as a duplicate.
// Every entry line that is not kept is counted in ParseReport by reason, with a few examples;
// nothing is dropped silently. A text that is not the module at all (no "export const
// dictionary = {" / "module.exports = {" opening), is truncated (no closing "}") or holds no
// usable entry throws mona::Error naming the source.
//
// Splits: split_of(word) hashes the normalised word (no "(N)" suffix) with 64-bit FNV-1a over
// its bytes (offset basis 0xcbf29ce484222325, prime 0x100000001b3; for each byte: h ^= byte,
// h *= prime, modulo 2^64) and takes r = h % 100: r < 90 train, r < 95 dev, else test. All
// references of a word therefore share one split, and the split of a word never depends on
// the rest of the dictionary, the platform or the standard library.
//
// TSV format (write_cmudict_splits): one line per (word, pronunciation) reference,
//   "l e t t e r s<TAB>P H O N E M E S\n"
// letters (and apostrophes) separated by single spaces, a tab, phonemes separated by single
// spaces. A word with several pronunciations has several lines with the same input, adjacent,
// in source order. No header line. Torch-free.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mona::data {

/// One reference: a normalised word and one pronunciation (39-phoneme, upper-case, no stress).
/// A word with alternatives appears in several consecutive entries.
struct CmudictEntry {
  std::string word;
  std::vector<std::string> phonemes;
  /// 1 for "word", N for "word(N)" as written in the source (informational).
  int variant = 1;
  /// 1-based line of the source text the entry came from.
  std::size_t line = 0;
};

/// Why an entry line of the source was not kept.
enum class DropReason {
  kSyntax,                  ///< not `"key": "value",` (bad quoting, stray text, ...)
  kBadEscape,               ///< a string holds an unknown or malformed backslash escape
  kBadVariant,              ///< "(...)" suffix that is not "(N)" with N a positive integer
  kWordCharacters,          ///< word outside a-z and ' after lowercasing, or without a letter
  kEmptyPronunciation,      ///< no phoneme (after removing a comment)
  kUnknownPhoneme,          ///< a token that is not one of the 39 phonemes (+ stress 0-2)
  kDuplicateKey,            ///< the same key already appeared (the first one is kept)
  kDuplicatePronunciation,  ///< same word, same pronunciation after stress stripping
};
inline constexpr std::size_t kNumDropReasons = 8;

/// Stable lower-case name of a reason ("syntax", "word_characters", ...).
const char* drop_reason_name(DropReason r);

/// What parse_cmudict_js saw. `dropped` counts are always complete; `examples` holds at most
/// `max_examples` per reason, each "line N: <the line>" (plus a short explanation).
struct ParseReport {
  std::string source;             ///< name used in messages (file path or "<text>")
  std::size_t lines = 0;          ///< lines in the text
  std::size_t entry_lines = 0;    ///< lines that looked like entries (kept + dropped)
  std::size_t kept = 0;           ///< references kept (== returned entries)
  std::size_t words = 0;          ///< distinct words among the kept references
  std::size_t variants_kept = 0;  ///< kept references that came from a "word(N)" key
  std::size_t comments_removed = 0;  ///< kept references whose value had a "# ..." comment
  std::size_t lowercased = 0;        ///< kept references whose word had upper-case letters
  std::array<std::size_t, kNumDropReasons> dropped{};
  std::map<DropReason, std::vector<std::string>> examples;
  std::size_t max_examples = 5;

  std::size_t dropped_total() const;
  std::size_t count(DropReason r) const { return dropped[static_cast<std::size_t>(r)]; }
  /// Multi-line human-readable summary (counts per reason and the examples).
  std::string to_string() const;
};

/// Parses the text of cmu-pronouncing-dictionary's index.js (see the file comment). Returns
/// the kept references in source order; `report` is reset and filled. `source` names the text
/// in error messages and in report.source. Throws mona::Error if the text is not such a
/// module, is truncated, or yields no entry at all.
std::vector<CmudictEntry> parse_cmudict_js(const std::string& text, ParseReport& report,
                                           const std::string& source = "<text>");

/// Reads `path` and parses it; errors name the path.
std::vector<CmudictEntry> load_cmudict_js(const std::string& path, ParseReport& report);

/// 64-bit FNV-1a of the bytes of `s` (see the file comment).
std::uint64_t fnv1a64(const std::string& s);

enum class Split { kTrain = 0, kDev = 1, kTest = 2 };
inline constexpr std::size_t kNumSplits = 3;

/// "train", "dev", "test".
const char* split_name(Split s);

/// The split of a normalised word: fnv1a64(word) % 100 -> [0, 90) train, [90, 95) dev,
/// [95, 100) test.
Split split_of(const std::string& word);

/// Counts per split, indexed by static_cast<size_t>(Split).
struct SplitCounts {
  std::array<std::size_t, kNumSplits> words{};
  std::array<std::size_t, kNumSplits> pronunciations{};
};

/// One TSV line without the newline: "c a t\tK AE T".
std::string to_tsv_line(const CmudictEntry& e);

/// Writes out_dir/train.tsv, dev.tsv and test.tsv (creating out_dir if needed). Each file is
/// written to a temporary file in out_dir and renamed into place only after all three were
/// written completely, so an interrupted or failed run leaves any previous files intact.
/// Entries are validated (word of a-z and ', at least one letter; at least one phoneme, each
/// non-empty and without spaces/tabs) and throw mona::Error otherwise, before anything is
/// written. Words are counted as distinct words per split.
SplitCounts write_cmudict_splits(const std::vector<CmudictEntry>& entries,
                                 const std::string& out_dir);

/// Counts per split without writing anything.
SplitCounts count_splits(const std::vector<CmudictEntry>& entries);

}  // namespace mona::data
