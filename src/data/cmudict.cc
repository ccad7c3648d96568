// CMU Pronouncing Dictionary (npm cmu-pronouncing-dictionary@3.0.0 index.js): parsing,
// normalisation, hash split and TSV writing. See include/mona/data/cmudict.h.
#include "mona/data/cmudict.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "mona/core/error.h"
#include "mona/io/files.h"

namespace mona::data {
namespace {

namespace fs = std::filesystem;

const std::set<std::string>& phoneme_set() {
  static const std::set<std::string> kSet = {
      "AA", "AE", "AH", "AO", "AW", "AY", "B",  "CH", "D",  "DH", "EH", "ER", "EY",
      "F",  "G",  "HH", "IH", "IY", "JH", "K",  "L",  "M",  "N",  "NG", "OW", "OY",
      "P",  "R",  "S",  "SH", "T",  "TH", "UH", "UW", "V",  "W",  "Y",  "Z",  "ZH"};
  return kSet;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Result of reading one JS string literal.
enum class Lit { kOk, kSyntax, kBadEscape };

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool read_hex(const std::string& s, std::size_t pos, int n, unsigned& out) {
  if (pos + static_cast<std::size_t>(n) > s.size()) return false;
  out = 0;
  for (int k = 0; k < n; ++k) {
    const int v = hex_value(s[pos + static_cast<std::size_t>(k)]);
    if (v < 0) return false;
    out = out * 16 + static_cast<unsigned>(v);
  }
  return true;
}

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Reads a '...' or "..." literal starting at s[pos] (the quote); on success `pos` is just
// past the closing quote. Escapes: \" \' \\ \/ \b \f \n \r \t \v \0 \xHH \uXXXX (with
// surrogate pairs) and \u{...}.
Lit read_string(const std::string& s, std::size_t& pos, std::string& out) {
  out.clear();
  if (pos >= s.size() || (s[pos] != '"' && s[pos] != '\'')) return Lit::kSyntax;
  const char q = s[pos++];
  while (pos < s.size()) {
    const char c = s[pos++];
    if (c == q) return Lit::kOk;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (pos >= s.size()) return Lit::kSyntax;
    const char e = s[pos++];
    switch (e) {
      case '"': case '\'': case '\\': case '/': out += e; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case '0':
        if (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') return Lit::kBadEscape;
        out += '\0';
        break;
      case 'x': {
        unsigned v = 0;
        if (!read_hex(s, pos, 2, v)) return Lit::kBadEscape;
        pos += 2;
        append_utf8(out, v);
        break;
      }
      case 'u': {
        unsigned v = 0;
        if (pos < s.size() && s[pos] == '{') {
          const std::size_t close = s.find('}', pos);
          if (close == std::string::npos || close == pos + 1 || close - pos - 1 > 6)
            return Lit::kBadEscape;
          if (!read_hex(s, pos + 1, static_cast<int>(close - pos - 1), v) || v > 0x10FFFF)
            return Lit::kBadEscape;
          pos = close + 1;
        } else {
          if (!read_hex(s, pos, 4, v)) return Lit::kBadEscape;
          pos += 4;
          if (v >= 0xD800 && v <= 0xDBFF) {  // high surrogate: needs a low one
            unsigned lo = 0;
            if (pos + 1 < s.size() && s[pos] == '\\' && s[pos + 1] == 'u' &&
                read_hex(s, pos + 2, 4, lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
              pos += 6;
              v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              return Lit::kBadEscape;
            }
          } else if (v >= 0xDC00 && v <= 0xDFFF) {
            return Lit::kBadEscape;
          }
        }
        if (v >= 0xD800 && v <= 0xDFFF) return Lit::kBadEscape;
        append_utf8(out, v);
        break;
      }
      default:
        return Lit::kBadEscape;
    }
  }
  return Lit::kSyntax;  // unterminated
}

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
}
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

void skip_ws(const std::string& s, std::size_t& pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
}

struct RawEntry {
  std::string key, value;
};

// Parses one entry line: `"key": "value",` (comma optional, a trailing // comment allowed,
// unquoted identifier keys allowed). On failure returns the reason and sets `detail`.
bool parse_entry_line(const std::string& line, RawEntry& out, DropReason& why,
                      std::string& detail) {
  std::size_t pos = 0;
  skip_ws(line, pos);
  if (pos < line.size() && (line[pos] == '"' || line[pos] == '\'')) {
    const Lit r = read_string(line, pos, out.key);
    if (r != Lit::kOk) {
      why = r == Lit::kBadEscape ? DropReason::kBadEscape : DropReason::kSyntax;
      detail = r == Lit::kBadEscape ? "bad escape in key" : "unterminated key string";
      return false;
    }
  } else if (pos < line.size() && is_ident_start(line[pos])) {
    const std::size_t b = pos;
    while (pos < line.size() && is_ident_char(line[pos])) ++pos;
    out.key = line.substr(b, pos - b);
  } else {
    why = DropReason::kSyntax;
    detail = "expected a quoted key";
    return false;
  }
  skip_ws(line, pos);
  if (pos >= line.size() || line[pos] != ':') {
    why = DropReason::kSyntax;
    detail = "expected ':' after the key";
    return false;
  }
  ++pos;
  skip_ws(line, pos);
  if (pos >= line.size() || (line[pos] != '"' && line[pos] != '\'')) {
    why = DropReason::kSyntax;
    detail = "expected a quoted pronunciation string after ':'";
    return false;
  }
  const Lit r = read_string(line, pos, out.value);
  if (r != Lit::kOk) {
    why = r == Lit::kBadEscape ? DropReason::kBadEscape : DropReason::kSyntax;
    detail = r == Lit::kBadEscape ? "bad escape in value" : "unterminated value string";
    return false;
  }
  skip_ws(line, pos);
  if (pos < line.size() && line[pos] == ',') ++pos;
  skip_ws(line, pos);
  if (pos < line.size() && !(line.compare(pos, 2, "//") == 0)) {
    why = DropReason::kSyntax;
    detail = "unexpected text after the value";
    return false;
  }
  return true;
}

bool is_header(const std::string& t) {
  return t == "export const dictionary = {" || t == "module.exports = {" ||
         t == "export default {" || t == "const dictionary = {" ||
         t == "var dictionary = {" || t == "let dictionary = {";
}

bool is_close(const std::string& t) { return t == "}" || t == "};"; }

std::string shorten(const std::string& s, std::size_t n = 120) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

bool valid_word(const std::string& w) {
  bool letter = false;
  for (char c : w) {
    if (c >= 'a' && c <= 'z') {
      letter = true;
    } else if (c != '\'') {
      return false;
    }
  }
  return letter;
}

}  // namespace

const char* drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kSyntax: return "syntax";
    case DropReason::kBadEscape: return "bad_escape";
    case DropReason::kBadVariant: return "bad_variant";
    case DropReason::kWordCharacters: return "word_characters";
    case DropReason::kEmptyPronunciation: return "empty_pronunciation";
    case DropReason::kUnknownPhoneme: return "unknown_phoneme";
    case DropReason::kDuplicateKey: return "duplicate_key";
    case DropReason::kDuplicatePronunciation: return "duplicate_pronunciation";
  }
  return "unknown";
}

std::size_t ParseReport::dropped_total() const {
  std::size_t n = 0;
  for (std::size_t c : dropped) n += c;
  return n;
}

std::string ParseReport::to_string() const {
  std::ostringstream os;
  os << source << ": " << lines << " lines, " << entry_lines << " entry lines, " << kept
     << " pronunciations kept for " << words << " words (" << variants_kept
     << " from word(N) alternatives, " << comments_removed << " with a '#' comment removed, "
     << lowercased << " lowercased), " << dropped_total() << " entry lines not kept\n";
  for (std::size_t i = 0; i < kNumDropReasons; ++i) {
    const auto r = static_cast<DropReason>(i);
    os << "  " << drop_reason_name(r) << ": " << dropped[i] << "\n";
    auto it = examples.find(r);
    if (it == examples.end()) continue;
    for (const auto& ex : it->second) os << "      " << ex << "\n";
  }
  return os.str();
}

std::vector<CmudictEntry> parse_cmudict_js(const std::string& text, ParseReport& report,
                                           const std::string& source) {
  const std::size_t max_examples = report.max_examples;
  report = ParseReport{};
  report.max_examples = max_examples;
  report.source = source;

  std::vector<CmudictEntry> out;
  std::unordered_set<std::string> seen_keys;
  // word -> indices into `out` of its kept pronunciations
  std::unordered_map<std::string, std::vector<std::size_t>> by_word;

  auto drop = [&](DropReason r, std::size_t lineno, const std::string& line,
                  const std::string& detail) {
    report.dropped[static_cast<std::size_t>(r)]++;
    auto& ex = report.examples[r];
    if (ex.size() < report.max_examples) {
      std::string s = "line " + std::to_string(lineno) + ": " + shorten(trim(line));
      if (!detail.empty()) s += "  (" + detail + ")";
      ex.push_back(std::move(s));
    }
  };

  enum class State { kPreamble, kBody, kClosed } state = State::kPreamble;
  bool in_block_comment = false;
  std::size_t lineno = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++lineno;
    std::string t = trim(line);

    if (in_block_comment) {
      const std::size_t c = t.find("*/");
      if (c == std::string::npos) continue;
      in_block_comment = false;
      t = trim(t.substr(c + 2));
    }
    // Whole-line comments (the JSDoc type annotation above the object) are skipped.
    if (starts_with(t, "/*")) {
      const std::size_t c = t.find("*/", 2);
      if (c == std::string::npos) {
        in_block_comment = true;
        continue;
      }
      t = trim(t.substr(c + 2));
    }
    if (t.empty() || starts_with(t, "//")) continue;

    if (state == State::kPreamble) {
      if (is_header(t)) {
        state = State::kBody;
        continue;
      }
      detail::fail_data(source, ": not the cmu-pronouncing-dictionary index.js module: expected "
                   "'export const dictionary = {' before the entries, found '",
                   shorten(t, 60), "' at line ", lineno);
    }
    if (state == State::kClosed) {
      drop(DropReason::kSyntax, lineno, line, "text after the closing '}'");
      continue;
    }
    if (is_close(t)) {
      state = State::kClosed;
      continue;
    }

    ++report.entry_lines;
    RawEntry raw;
    DropReason why = DropReason::kSyntax;
    std::string detail;
    if (!parse_entry_line(line, raw, why, detail)) {
      drop(why, lineno, line, detail);
      continue;
    }

    // ---- key: lowercase, "(N)" variant suffix, alphabet ----
    std::string key = raw.key;
    bool had_upper = false;
    for (char& c : key) {
      if (c >= 'A' && c <= 'Z') {
        c = static_cast<char>(c - 'A' + 'a');
        had_upper = true;
      }
    }
    std::string word = key;
    int variant = 1;
    if (!key.empty() && key.back() == ')') {
      const std::size_t open = key.rfind('(');
      const std::string num =
          open == std::string::npos ? std::string() : key.substr(open + 1, key.size() - open - 2);
      const bool digits = !num.empty() && num.size() <= 6 &&
                          std::all_of(num.begin(), num.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
      if (!digits || std::stoi(num) < 1) {
        drop(DropReason::kBadVariant, lineno, line,
             "alternative suffix must be (N) with N >= 1");
        continue;
      }
      variant = std::stoi(num);
      word = key.substr(0, open);
    }
    if (!valid_word(word)) {
      drop(DropReason::kWordCharacters, lineno, line,
           word.empty() ? std::string("empty word")
                        : "word '" + shorten(word, 40) + "' has characters outside a-z and '");
      continue;
    }

    // ---- value: comment, tokens, stress ----
    std::string value = raw.value;
    bool had_comment = false;
    const std::size_t hash = value.find('#');
    if (hash != std::string::npos) {
      value = value.substr(0, hash);
      had_comment = true;
    }
    std::vector<std::string> phones;
    {
      std::size_t p = 0;
      while (p < value.size()) {
        while (p < value.size() && (is_space(value[p]) || value[p] == '\n')) ++p;
        std::size_t q = p;
        while (q < value.size() && !is_space(value[q]) && value[q] != '\n') ++q;
        if (q > p) phones.push_back(value.substr(p, q - p));
        p = q;
      }
    }
    if (phones.empty()) {
      drop(DropReason::kEmptyPronunciation, lineno, line, "");
      continue;
    }
    bool bad_phone = false;
    for (auto& ph : phones) {
      std::string base = ph;
      if (!base.empty() && base.back() >= '0' && base.back() <= '2') base.pop_back();
      for (char& c : base) {
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      }
      if (!phoneme_set().count(base)) {
        drop(DropReason::kUnknownPhoneme, lineno, line, "'" + shorten(ph, 20) + "'");
        bad_phone = true;
        break;
      }
      ph = base;
    }
    if (bad_phone) continue;

    // ---- duplicates ----
    if (!seen_keys.insert(key).second) {
      drop(DropReason::kDuplicateKey, lineno, line, "key '" + shorten(key, 40) + "' seen before");
      continue;
    }
    auto& idx = by_word[word];
    bool dup = false;
    for (std::size_t i : idx) {
      if (out[i].phonemes == phones) {
        dup = true;
        std::string d = "same as line " + std::to_string(out[i].line) + " without stress";
        drop(DropReason::kDuplicatePronunciation, lineno, line, d);
        break;
      }
    }
    if (dup) continue;

    idx.push_back(out.size());
    CmudictEntry e;
    e.word = word;
    e.phonemes = std::move(phones);
    e.variant = variant;
    e.line = lineno;
    out.push_back(std::move(e));
    ++report.kept;
    if (key != word) ++report.variants_kept;  // came from a "word(N)" key
    if (had_comment) ++report.comments_removed;
    if (had_upper) ++report.lowercased;
  }
  report.lines = lineno;
  report.words = by_word.size();

  if (in_block_comment) detail::fail_data(source, ": truncated: unterminated '/*' comment");
  if (state == State::kPreamble)
    detail::fail_data(source, ": not the cmu-pronouncing-dictionary index.js module: no "
                 "'export const dictionary = {' line (", lineno, " lines read)");
  if (state == State::kBody)
    detail::fail_data(source, ": truncated: the dictionary object is not closed by '}' (",
                 lineno, " lines read, last entry line ", report.entry_lines, ")");
  if (out.empty())
    detail::fail_data(source, ": no usable entry (", report.entry_lines, " entry lines, ",
                 report.dropped_total(), " not kept)");
  return out;
}

std::vector<CmudictEntry> load_cmudict_js(const std::string& path, ParseReport& report) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail_data(path, ": cannot open for reading: ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) detail::fail_data(path, ": read error");
  return parse_cmudict_js(ss.str(), report, path);
}

std::uint64_t fnv1a64(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

const char* split_name(Split s) {
  switch (s) {
    case Split::kTrain: return "train";
    case Split::kDev: return "dev";
    case Split::kTest: return "test";
  }
  return "unknown";
}

Split split_of(const std::string& word) {
  const std::uint64_t r = fnv1a64(word) % 100;
  if (r < 90) return Split::kTrain;
  if (r < 95) return Split::kDev;
  return Split::kTest;
}

std::string to_tsv_line(const CmudictEntry& e) {
  std::string s;
  s.reserve(e.word.size() * 2 + e.phonemes.size() * 3);
  for (std::size_t i = 0; i < e.word.size(); ++i) {
    if (i) s += ' ';
    s += e.word[i];
  }
  s += '\t';
  for (std::size_t i = 0; i < e.phonemes.size(); ++i) {
    if (i) s += ' ';
    s += e.phonemes[i];
  }
  return s;
}

SplitCounts count_splits(const std::vector<CmudictEntry>& entries) {
  SplitCounts c;
  std::unordered_set<std::string> seen;
  for (const auto& e : entries) {
    const auto k = static_cast<std::size_t>(split_of(e.word));
    c.pronunciations[k]++;
    if (seen.insert(e.word).second) c.words[k]++;
  }
  return c;
}

SplitCounts write_cmudict_splits(const std::vector<CmudictEntry>& entries,
                                 const std::string& out_dir) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    detail::check(valid_word(e.word), "entries[", i, "].word: expected a-z and ' with at "
                  "least one letter, got '", shorten(e.word, 40), "'");
    detail::check(!e.phonemes.empty(), "entries[", i, "].phonemes: expected at least one "
                  "phoneme for '", e.word, "', got none");
    for (const auto& p : e.phonemes) {
      const bool ok = !p.empty() && std::none_of(p.begin(), p.end(), [](char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
      });
      detail::check(ok, "entries[", i, "].phonemes: expected non-empty tokens without "
                    "whitespace for '", e.word, "', got '", shorten(p, 20), "'");
    }
  }
  detail::check(!out_dir.empty(), "out_dir: expected a directory path, got an empty string");

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) detail::fail_data(out_dir, ": cannot create the output directory: ", ec.message());
  if (!fs::is_directory(out_dir, ec))
    detail::fail_data(out_dir, ": exists but is not a directory");

  std::array<std::string, kNumSplits> body;
  for (const auto& e : entries) {
    auto& b = body[static_cast<std::size_t>(split_of(e.word))];
    b += to_tsv_line(e);
    b += '\n';
  }

  std::vector<std::pair<std::string, std::string>> files;
  for (std::size_t k = 0; k < kNumSplits; ++k) {
    const std::string name = std::string(split_name(static_cast<Split>(k))) + ".tsv";
    files.emplace_back((fs::path(out_dir) / name).string(), std::move(body[k]));
  }
  // Refuse before writing anything if a target exists and is not a regular file, so that a
  // failed rename cannot leave the three files from different runs.
  for (const auto& f : files) {
    if (fs::exists(f.first, ec) && !fs::is_regular_file(f.first, ec))
      detail::fail_data(f.first, ": exists and is not a regular file; nothing was written");
  }
  // All three are written and flushed before any replaces its predecessor.
  io::write_files_atomic(files);
  return count_splits(entries);
}

}  // namespace mona::data
