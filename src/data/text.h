// Internal to mona::data: what counts as white space between tokens of a data file, the
// lines of a text file, and the refusal of reserved symbols in data files.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "mona/core/error.h"
#include "mona/data/tokens.h"

namespace mona::data {

/// Whether `token` is one of the reserved symbols (kReservedSymbols, mona/data/tokens.h).
inline bool is_reserved_symbol(const std::string& token) {
  return std::any_of(kReservedSymbols.begin(), kReservedSymbols.end(),
                     [&](const char* reserved) { return token == reserved; });
}

/// The reserved symbols as a message lists them: "<pad>, <s>, </s>, <unk>".
inline std::string reserved_symbol_list() {
  std::string list;
  for (const char* reserved : kReservedSymbols) list += (list.empty() ? "" : ", ") + std::string(reserved);
  return list;
}

/// Refuses (mona::DataError) a token of a data file that is a reserved symbol, which every
/// vocabulary maps to its special id (padding, start, end, unknown) instead of learning it:
/// `where` is "file:line: ", `side` says which tokens ("input", "output", "transcript").
inline void check_no_reserved_symbols(const std::vector<std::string>& tokens, const std::string& where,
                                      const char* side) {
  for (const std::string& token : tokens) {
    detail::check_data(!is_reserved_symbol(token), where, side, " token \"", token,
                       "\" is a reserved symbol (", reserved_symbol_list(),
                       "), which mona keeps for its special ids; rename it in the data");
  }
}

/// Space, tab, newline, carriage return, vertical tab, form feed (the C locale's isspace,
/// without its locale dependence).
inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/// Calls f(line, line_no) for every line of `text`, line_no counting from 1, with a
/// trailing '\r' (CRLF files) dropped and a UTF-8 byte-order mark at the start of `text`
/// (which some editors write) skipped; a final '\n' ends the last line (no empty line
/// after it). Returns the number of lines: how vocabularies are read.
template <class F>
int64_t for_each_line(const std::string& text, F&& f) {
  std::size_t pos = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    f(line, line_no);
  }
  return line_no;
}

/// for_each_line without the blank lines (empty or white space only): how TSV datasets and
/// manifests are read.
template <class F>
void for_each_nonblank_line(const std::string& text, F&& f) {
  for_each_line(text, [&](const std::string& line, int64_t line_no) {
    if (std::all_of(line.begin(), line.end(), [](char c) { return is_space(c); })) return;
    f(line, line_no);
  });
}

}  // namespace mona::data
