// mona/data/vocabulary.h: the mapping between symbols (strings) and ids (int64).
//
// Ids 0..3 are the reserved tokens of mona/data/tokens.h (kPad "<pad>", kBos "<s>",
// kEos "</s>", kUnk "<unk>", which encode_or_unk gives unknown symbols), and every other
// symbol gets the next free id in order of addition, so ids are dense:
// 0 .. size() - 1.
//
// A symbol is a non-empty string without whitespace (space, tab, CR, LF, VT, FF): symbols
// are the tokens of whitespace-separated text (mona/data/dataset.h), so a symbol with a space
// could never be read back.
//
// Text form (to_text / from_text): one symbol per line, line n (1-based) holding the
// symbol with id n - 1; the first four lines are the specials above; every line ends with
// '\n'. from_text accepts a missing final newline and CRLF line ends, and refuses anything
// else with a message naming the source and line:
//   "vocab.txt:7: duplicate symbol \"AH\" (already id 4 on line 5)"
//
// Errors (mona::Error): unknown symbols and out-of-range ids, naming the value; invalid
// symbols in add(); malformed text in from_text.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "mona/data/tokens.h"

namespace mona::data {

class Vocabulary {
 public:
  /// Just the four specials.
  Vocabulary();

  /// Id of `symbol`, adding it with the next free id if new. Throws mona::Error for an
  /// empty symbol or one containing whitespace.
  int64_t add(const std::string& symbol);

  /// Adds every symbol in order (see add()).
  void add_all(const std::vector<std::string>& symbols);

  bool contains(const std::string& symbol) const;

  /// Id of `symbol`; throws mona::Error "vocabulary: unknown symbol \"XY\"" if absent.
  int64_t id(const std::string& symbol) const;

  /// Symbol with id `id`; throws mona::Error if id is outside [0, size()).
  const std::string& symbol(int64_t id) const;

  int64_t size() const { return static_cast<int64_t>(symbols_.size()); }

  /// True for the four reserved ids.
  static bool is_special(int64_t id) { return id >= 0 && id < kNumReserved; }

  /// Ids of `symbols`. Throws mona::Error listing every distinct unknown symbol:
  ///   "vocabulary: 2 unknown symbols: \"Q\", \"X\""
  std::vector<int64_t> encode(const std::vector<std::string>& symbols) const;

  /// Ids of `symbols`, with kUnk for unknown ones (never throws).
  std::vector<int64_t> encode_or_unk(const std::vector<std::string>& symbols) const;

  /// The distinct symbols of `symbols` that are not in the vocabulary, in order of first
  /// appearance.
  std::vector<std::string> unknown_symbols(const std::vector<std::string>& symbols) const;

  /// Symbols of `ids` (specials included, e.g. "</s>"; the caller strips what it does not
  /// want). Throws mona::Error naming the position and value of an out-of-range id.
  std::vector<std::string> decode(const std::vector<int64_t>& ids) const;

  /// One symbol per line, in id order (see the file comment).
  std::string to_text() const;

  /// Parses to_text()'s format. Errors name `source_name` and the 1-based line.
  static Vocabulary from_text(const std::string& text, const std::string& source_name);

  bool operator==(const Vocabulary& other) const { return symbols_ == other.symbols_; }
  bool operator!=(const Vocabulary& other) const { return !(*this == other); }

  /// Empty string if `symbol` is a valid symbol, otherwise the reason (for messages).
  static std::string symbol_problem(const std::string& symbol);

 private:
  std::vector<std::string> symbols_;
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace mona::data
