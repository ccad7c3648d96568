// Symbol <-> id mapping (mona/data/vocabulary.h).
#include "mona/data/vocabulary.h"

#include <sstream>
#include <unordered_set>

#include "mona/core/error.h"
#include "text.h"

namespace mona::data {
namespace {

using detail::check;
using detail::check_data;
using detail::fail;
using detail::fail_data;


// Quoted for messages, with control characters escaped so they are visible.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\n': out += "\\n"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string Vocabulary::symbol_problem(const std::string& symbol) {
  if (symbol.empty()) return "empty symbol";
  for (char c : symbol) {
    if (is_space(c)) return "symbol " + quoted(symbol) + " contains whitespace";
  }
  return "";
}

Vocabulary::Vocabulary() {
  for (const char* s : kReservedSymbols) {
    ids_.emplace(s, static_cast<int64_t>(symbols_.size()));
    symbols_.push_back(s);
  }
}

int64_t Vocabulary::add(const std::string& symbol) {
  const auto it = ids_.find(symbol);
  if (it != ids_.end()) return it->second;
  const std::string problem = symbol_problem(symbol);
  check(problem.empty(), "vocabulary: cannot add ", problem);
  const int64_t id = size();
  ids_.emplace(symbol, id);
  symbols_.push_back(symbol);
  return id;
}

void Vocabulary::add_all(const std::vector<std::string>& symbols) {
  for (const auto& s : symbols) add(s);
}

bool Vocabulary::contains(const std::string& symbol) const { return ids_.count(symbol) != 0; }

int64_t Vocabulary::id(const std::string& symbol) const {
  const auto it = ids_.find(symbol);
  check(it != ids_.end(), "vocabulary: unknown symbol ", quoted(symbol), " (vocabulary has ",
        size(), " symbols)");
  return it->second;
}

const std::string& Vocabulary::symbol(int64_t id) const {
  check(id >= 0 && id < size(), "vocabulary: id ", id, " out of range [0, ", size(), ")");
  return symbols_[static_cast<std::size_t>(id)];
}

std::vector<std::string> Vocabulary::unknown_symbols(
    const std::vector<std::string>& symbols) const {
  std::vector<std::string> unknown;
  std::unordered_set<std::string> seen;
  for (const auto& s : symbols) {
    if (!contains(s) && seen.insert(s).second) unknown.push_back(s);
  }
  return unknown;
}

std::vector<int64_t> Vocabulary::encode(const std::vector<std::string>& symbols) const {
  const auto unknown = unknown_symbols(symbols);
  if (!unknown.empty()) {
    std::ostringstream os;
    os << "vocabulary: " << unknown.size() << " unknown symbol" << (unknown.size() == 1 ? "" : "s")
       << ": ";
    for (std::size_t i = 0; i < unknown.size(); ++i) os << (i ? ", " : "") << quoted(unknown[i]);
    throw ArgumentError(os.str());
  }
  std::vector<int64_t> ids;
  ids.reserve(symbols.size());
  for (const auto& s : symbols) ids.push_back(ids_.at(s));
  return ids;
}

std::vector<int64_t> Vocabulary::encode_or_unk(const std::vector<std::string>& symbols) const {
  std::vector<int64_t> ids;
  ids.reserve(symbols.size());
  for (const auto& s : symbols) {
    const auto it = ids_.find(s);
    ids.push_back(it == ids_.end() ? kUnk : it->second);
  }
  return ids;
}

std::vector<std::string> Vocabulary::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    check(ids[i] >= 0 && ids[i] < size(), "vocabulary: decode: id ", ids[i], " at position ", i,
          " out of range [0, ", size(), ")");
    out.push_back(symbols_[static_cast<std::size_t>(ids[i])]);
  }
  return out;
}

std::string Vocabulary::to_text() const {
  std::string out;
  for (const auto& s : symbols_) {
    out += s;
    out += '\n';
  }
  return out;
}

Vocabulary Vocabulary::from_text(const std::string& text, const std::string& source_name) {
  Vocabulary vocab;
  std::vector<int64_t> line_of_id;  // 1-based line number of each id, for duplicate messages
  const int64_t lines = for_each_line(text, [&](const std::string& line, int64_t line_no) {
    const auto where = [&] { return source_name + ":" + std::to_string(line_no) + ": "; };
    if (line_no <= kNumReserved) {
      const std::string want = kReservedSymbols[static_cast<std::size_t>(line_no - 1)];
      check_data(line == want, where(), "expected the reserved symbol ", quoted(want), " (id ",
            line_no - 1, "), got ", quoted(line));
      line_of_id.push_back(line_no);
      return;
    }
    const std::string problem = symbol_problem(line);
    check_data(problem.empty(), where(), problem, " (expected one symbol per line)");
    const auto it = vocab.ids_.find(line);
    if (it != vocab.ids_.end()) {
      fail_data(where(), "duplicate symbol ", quoted(line), " (already id ", it->second, " on line ",
           line_of_id[static_cast<std::size_t>(it->second)], ")");
    }
    vocab.add(line);
    line_of_id.push_back(line_no);
  });
  check_data(lines >= kNumReserved, source_name, ": expected at least the ", kNumReserved,
        " reserved symbols ", reserved_symbol_list(), " (one per line), got ", lines, " lines");
  return vocab;
}

}  // namespace mona::data
