// TSV datasets and reference grouping (mona/data/dataset.h).
#include "mona/data/dataset.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "mona/core/error.h"
#include "text.h"
#include "mona/io/files.h"

namespace mona::data {
namespace {

using detail::check;
using detail::check_data;
using detail::fail;
using detail::fail_data;


std::string join(const std::vector<std::string>& tokens) {
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i) out += ' ';
    out += tokens[i];
  }
  return out;
}

void check_side(const std::vector<std::string>& tokens, std::size_t index, const char* side) {
  check(!tokens.empty(), "example ", index, ": empty ", side, " (a TSV line needs at least one ",
        side, " token)");
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    const std::string& t = tokens[k];
    check(!t.empty(), "example ", index, ": ", side, " token ", k, " is empty");
    check(std::none_of(t.begin(), t.end(), [](char c) { return is_space(c); }), "example ",
          index, ": ", side, " token ", k, " \"", t, "\" contains whitespace");
    check(!is_reserved_symbol(t), "example ", index, ": ", side, " token ", k, " \"", t,
          "\" is a reserved symbol (", reserved_symbol_list(), "), which read_tsv refuses");
  }
}

}  // namespace

std::vector<std::string> tokenize(const std::string& text) {
  std::vector<std::string> tokens;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) tokens.push_back(text.substr(start, i - start));
  }
  return tokens;
}

std::vector<Example> parse_tsv(const std::string& text, const std::string& source_name,
                               std::vector<int64_t>* lines) {
  std::vector<Example> examples;
  if (lines) lines->clear();
  for_each_nonblank_line(text, [&](const std::string& line, int64_t line_no) {
    const auto where = [&] { return source_name + ":" + std::to_string(line_no) + ": "; };
    const auto tabs = std::count(line.begin(), line.end(), '\t');
    check_data(tabs == 1, where(), "expected 1 TAB separating input and output, found ", tabs);
    const std::size_t tab = line.find('\t');
    Example ex;
    ex.input = tokenize(line.substr(0, tab));
    ex.output = tokenize(line.substr(tab + 1));
    check_data(!ex.input.empty(), where(), "empty input (no tokens before the TAB)");
    check_data(!ex.output.empty(), where(), "empty output (no tokens after the TAB)");
    check_no_reserved_symbols(ex.input, where(), "input");
    check_no_reserved_symbols(ex.output, where(), "output");
    examples.push_back(std::move(ex));
    if (lines) lines->push_back(line_no);
  });
  return examples;
}

std::vector<Example> read_tsv(const std::string& path, std::vector<int64_t>* lines) {
  return parse_tsv(io::read_file(path), path, lines);
}

std::string format_tsv(const std::vector<Example>& examples) {
  std::string out;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    check_side(examples[i].input, i, "input");
    check_side(examples[i].output, i, "output");
    out += join(examples[i].input);
    out += '\t';
    out += join(examples[i].output);
    out += '\n';
  }
  return out;
}

void write_tsv_atomic(const std::string& path, const std::vector<Example>& examples) {
  std::string text;
  try {
    text = format_tsv(examples);
  } catch (const Error& e) {
    fail_data("write ", path, ": ", e.what());
  }
  io::write_file_atomic(path, text);
}

std::vector<ReferenceSet> group_references(const std::vector<Example>& examples) {
  std::vector<ReferenceSet> sets;
  std::map<std::vector<std::string>, std::size_t> index;
  for (const auto& ex : examples) {
    const auto found = index.emplace(ex.input, sets.size());
    if (found.second) sets.push_back(ReferenceSet{ex.input, {}});
    auto& refs = sets[found.first->second].references;
    if (std::find(refs.begin(), refs.end(), ex.output) == refs.end()) refs.push_back(ex.output);
  }
  return sets;
}

}  // namespace mona::data
