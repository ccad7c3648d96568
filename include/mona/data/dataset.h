// mona/data/dataset.h: parallel text data as TSV, and grouping of several references.
//
// File format (UTF-8 text, one example per line):
//
//   <input tokens><TAB><output tokens>
//
// Tokens are separated by runs of whitespace (space, VT, FF; tab only as the one column
// separator). Example (CMUdict-style grapheme-to-phoneme):
//
//   a b o a r d<TAB>AH0 B AO1 R D
//
// Blank lines (empty or whitespace only) are skipped; a trailing '\r' (CRLF files) is
// dropped, and so is a UTF-8 byte-order mark at the start of the file. Every other line must have exactly one TAB and at least one token on each side,
// none of them one of the reserved symbols <pad>, <s>, </s>, <unk> (mona/data/tokens.h: a
// vocabulary maps them to its special ids, so they could not be learnt as tokens);
// anything else is refused with mona::DataError naming file, 1-based line and the problem:
//   "train.tsv:12: expected 1 TAB separating input and output, found 0"
//   "train.tsv:40: empty output (no tokens after the TAB)"
//   "train.tsv:41: output token \"</s>\" is a reserved symbol (<pad>, <s>, </s>, <unk>), ..."
// A file with no examples is not an error (the caller decides).
//
// The same input may appear on several lines with different outputs (several valid
// pronunciations, transliterations, ...). group_references collects them; metrics
// (mona/io/metrics.h) score a hypothesis against the best-matching reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mona::data {

struct Example {
  std::vector<std::string> input, output;
  bool operator==(const Example& o) const { return input == o.input && output == o.output; }
};

/// Reads a TSV file (format above). Throws mona::Error naming the file (unreadable) or
/// file:line (malformed line, reserved symbol). `lines`, when given, receives each
/// example's 1-based line number in the file.
std::vector<Example> read_tsv(const std::string& path, std::vector<int64_t>* lines = nullptr);

/// Parses TSV text; `source_name` stands for the file name in error messages; `lines` as
/// read_tsv.
std::vector<Example> parse_tsv(const std::string& text, const std::string& source_name,
                               std::vector<int64_t>* lines = nullptr);

/// Splits `text` on whitespace (space, tab, CR, LF, VT, FF); no empty tokens.
std::vector<std::string> tokenize(const std::string& text);

/// Formats examples as TSV text (tokens joined by one space, '\n' after every line).
/// Throws mona::ArgumentError naming the example index if a side is empty or a token is
/// empty, contains whitespace or is a reserved symbol, since such a file could not be read
/// back as the same examples.
std::string format_tsv(const std::vector<Example>& examples);

/// format_tsv, written atomically (mona/io/files.h). Errors name `path`.
void write_tsv_atomic(const std::string& path, const std::vector<Example>& examples);

/// One distinct input with all of its distinct reference outputs.
struct ReferenceSet {
  std::vector<std::string> input;
  std::vector<std::vector<std::string>> references;
};

/// Groups examples by identical input token sequence. Inputs appear in order of first
/// appearance, references in order of appearance within each input; a reference repeated
/// for the same input is kept once.
std::vector<ReferenceSet> group_references(const std::vector<Example>& examples);

}  // namespace mona::data
