// The table of mechanisms (nn::mechanisms(), mona/nn/attention.h): make_attention builds
// every entry and nothing else, each module's is_online() agrees with the table, and the
// table of docs/attention.md says the same as the code's.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "mona/nn/attention.h"
#include "mona/nn/seq2seq.h"
#include "util/nn_test_util.h"

namespace mona::test {
namespace {

nn::AttentionOptions mechanism_options() {
  nn::AttentionOptions o;
  o.query_dim = 3;
  o.memory_dim = 4;
  return o;
}

TEST(Mechanisms, MakeAttentionBuildsEachAndItsOnlineFlagMatchesTheModule) {
  std::set<std::string> names;
  for (const auto& m : nn::mechanisms()) {
    EXPECT_TRUE(names.insert(m.name).second) << "listed twice: " << m.name;
    auto a = nn::make_attention(m.name, mechanism_options());
    ASSERT_NE(a, nullptr) << m.name;
    EXPECT_EQ(a->is_online(), m.online) << m.name;
    EXPECT_EQ(nn::find_mechanism(m.name), &m);
    nn::ModelOptions model;
    model.input_vocab = 10;
    model.output_vocab = 10;
    model.attention = m.name;
    EXPECT_NO_THROW(model.validate()) << m.name;
  }
  // The eight of the issue list: 002's soft and hard monotonic attention, 000's MoChA and
  // MAtChA, 003's GMM, SAGMM, SAGMM-tr and the fixed window.
  EXPECT_EQ(names, (std::set<std::string>{"soft", "monotonic", "mocha", "matcha", "gmm", "sagmm",
                                          "sagmm-tr", "sagmm-fixed"}));
  EXPECT_EQ(nn::find_mechanism("Mocha"), nullptr);
  expect_error([] { nn::make_attention("mocca", mechanism_options()); },
                     "mechanism must be one of soft, monotonic, mocha, matcha, gmm, sagmm, "
                     "sagmm-tr, sagmm-fixed; got \"mocca\"");
  nn::ModelOptions model;
  model.input_vocab = 10;
  model.output_vocab = 10;
  model.attention = "mocca";
  expect_error([&] { model.validate(); }, "attention must be one of soft, monotonic");
}

// Cells of the markdown table rows after the header "| mechanism | online |" in `path`.
std::vector<std::vector<std::string>> doc_table(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::vector<std::vector<std::string>> rows;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("| mechanism | online |", 0) == 0) {
      inside = true;
      std::getline(in, line);  // | --- | ...
      continue;
    }
    if (!inside) continue;
    if (line.empty() || line[0] != '|') break;
    std::vector<std::string> cells;
    std::stringstream s(line.substr(1));
    for (std::string cell; std::getline(s, cell, '|');) {
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      cells.push_back(cell);
    }
    rows.push_back(cells);
  }
  return rows;
}

TEST(Mechanisms, TheDocsTableSaysWhatTheCodeSays) {
  const auto rows = doc_table(std::string(MONA_SOURCE_DIR) + "/docs/attention.md");
  const auto& table = nn::mechanisms();
  ASSERT_EQ(rows.size(), table.size()) << "docs/attention.md lists another number of mechanisms";
  for (size_t k = 0; k < rows.size(); ++k) {
    ASSERT_EQ(rows[k].size(), 4u) << "row " << k;
    EXPECT_EQ(rows[k][0], "`" + std::string(table[k].name) + "`");
    EXPECT_EQ(rows[k][1], table[k].online ? "yes" : "no") << table[k].name;
    EXPECT_EQ(rows[k][2], table[k].options) << table[k].name;
    EXPECT_EQ(rows[k][3], table[k].paper) << table[k].name;
  }
}

}  // namespace
}  // namespace mona::test
