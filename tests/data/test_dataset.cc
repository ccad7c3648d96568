#include "mona/data/dataset.h"

#include <gtest/gtest.h>

#include "mona/core/error.h"
#include "util/temp_dir.h"

using mona::data::Example;
using mona::test::TempDir;
using Tokens = std::vector<std::string>;

TEST(Dataset, TokenizeSplitsOnAnyWhitespace) {
  EXPECT_EQ(mona::data::tokenize("  a  b\tc\r\nd "), (Tokens{"a", "b", "c", "d"}));
  EXPECT_TRUE(mona::data::tokenize("").empty());
  EXPECT_TRUE(mona::data::tokenize(" \t\n").empty());
  EXPECT_EQ(mona::data::tokenize("abc"), (Tokens{"abc"}));
}

TEST(Dataset, ReadTsvParsesAndSkipsBlankLines) {
  TempDir dir;
  const std::string path = dir.file("d.tsv");
  mona::test::write_raw(path, "a b o a r d\tAH0 B AO1 R D\n\n   \nc a t\tK AE1 T\r\nx\ty  z");
  const auto ex = mona::data::read_tsv(path);
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].input, (Tokens{"a", "b", "o", "a", "r", "d"}));
  EXPECT_EQ(ex[0].output, (Tokens{"AH0", "B", "AO1", "R", "D"}));
  EXPECT_EQ(ex[1].output, (Tokens{"K", "AE1", "T"}));  // CR dropped
  EXPECT_EQ(ex[2].input, (Tokens{"x"}));
  EXPECT_EQ(ex[2].output, (Tokens{"y", "z"}));
  mona::test::write_raw(path, "");
  EXPECT_TRUE(mona::data::read_tsv(path).empty());
  // A UTF-8 byte-order mark (some editors write one) is no part of the first token.
  mona::test::write_raw(path, "\xEF\xBB\xBF" "c a t\tK AE1 T\n");
  EXPECT_EQ(mona::data::read_tsv(path).at(0).input, (Tokens{"c", "a", "t"}));
}

TEST(Dataset, MalformedLinesNameFileAndLine) {
  TempDir dir;
  const std::string path = dir.file("bad.tsv");
  const std::string good = "a\tb\n";
  mona::test::write_raw(path, good + "\n" + "no tab here\n");
  EXPECT_ERROR_CONTAINS(mona::data::read_tsv(path), path + ":3:", "expected 1 TAB",
                        "found 0");
  mona::test::write_raw(path, good + "a\tb\tc\n");
  EXPECT_ERROR_CONTAINS(mona::data::read_tsv(path), path + ":2:", "found 2");
  mona::test::write_raw(path, good + good + "  \tb\n");
  EXPECT_ERROR_CONTAINS(mona::data::read_tsv(path), path + ":3:", "empty input");
  mona::test::write_raw(path, "a\t \n");
  EXPECT_ERROR_CONTAINS(mona::data::read_tsv(path), path + ":1:", "empty output");
}

// The reserved symbols (mona/data/tokens.h) would be mapped to the special ids by every
// vocabulary, silently: a data file holding one is refused, naming file:line and the token.
TEST(Dataset, ReservedSymbolsAreRefusedNamingFileLineAndToken) {
  TempDir dir;
  const std::string path = dir.file("r.tsv");
  for (const std::string reserved : {"<pad>", "<s>", "</s>", "<unk>"}) {
    mona::test::write_raw(path, "a b\tX\n\nc " + reserved + "\tY\n");
    EXPECT_ERROR_CONTAINS(mona::data::read_tsv(path), path + ":3: input token \"" + reserved +
                                                          "\" is a reserved symbol (<pad>, <s>, </s>, <unk>)");
    mona::test::write_raw(path, "a\tX " + reserved + "\n");
    EXPECT_ERROR_CONTAINS(mona::data::read_tsv(path), path + ":1: output token \"" + reserved + "\" is a reserved symbol");
    EXPECT_THROW(mona::data::read_tsv(path), mona::DataError);
  }
  // Only the symbols themselves: look-alikes are ordinary tokens.
  mona::test::write_raw(path, "<s>x <S> s>\t<unk2> </s/>\n");
  const auto ex = mona::data::read_tsv(path);
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].input, (Tokens{"<s>x", "<S>", "s>"}));
  EXPECT_EQ(ex[0].output, (Tokens{"<unk2>", "</s/>"}));
  // And format_tsv does not write what read_tsv refuses.
  EXPECT_ERROR_CONTAINS(mona::data::format_tsv({{{"a"}, {"b", "</s>"}}}), "example 0: output token 1 \"</s>\"",
                        "reserved symbol");
}

TEST(Dataset, LinesAreTheExamplesLineNumbers) {
  std::vector<int64_t> lines = {7};  // replaced, not appended to
  const auto ex = mona::data::parse_tsv("\na\tb\n  \nc\td\r\n", "t.tsv", &lines);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(lines, (std::vector<int64_t>{2, 4}));
}

TEST(Dataset, MissingFileNamesPath) {
  TempDir dir;
  EXPECT_ERROR_CONTAINS(mona::data::read_tsv(dir.file("nope.tsv")), dir.file("nope.tsv"),
                        "No such file");
  EXPECT_ERROR_CONTAINS(mona::data::read_tsv(dir.path()), dir.path(), "directory");
}

TEST(Dataset, WriteTsvRoundTrips) {
  TempDir dir;
  const std::string path = dir.file("out.tsv");
  const std::vector<Example> ex = {{{"a", "b"}, {"X"}}, {{"c"}, {"Y", "Z", "é"}}};
  mona::data::write_tsv_atomic(path, ex);
  EXPECT_EQ(mona::test::read_raw(path), "a b\tX\nc\tY Z é\n");
  EXPECT_EQ(mona::data::read_tsv(path), ex);
  EXPECT_EQ(dir.entries(), (Tokens{"out.tsv"}));
}

TEST(Dataset, WriteTsvRefusesUnreadableExamplesAndKeepsOldFile) {
  TempDir dir;
  const std::string path = dir.file("out.tsv");
  mona::test::write_raw(path, "old\tcontent\n");
  EXPECT_ERROR_CONTAINS(mona::data::write_tsv_atomic(path, {{{"a"}, {}}}), path, "example 0",
                        "empty output");
  EXPECT_ERROR_CONTAINS(mona::data::write_tsv_atomic(path, {{{"a"}, {"b"}}, {{"x y"}, {"b"}}}),
                        path, "example 1", "whitespace");
  EXPECT_EQ(mona::test::read_raw(path), "old\tcontent\n");
  EXPECT_EQ(dir.entries(), (Tokens{"out.tsv"}));
}

TEST(Dataset, GroupReferencesKeepsFirstAppearanceOrder) {
  const std::vector<Example> ex = {
      {{"r", "e", "a", "d"}, {"R", "IY1", "D"}},
      {{"c", "a", "t"}, {"K", "AE1", "T"}},
      {{"r", "e", "a", "d"}, {"R", "EH1", "D"}},
      {{"r", "e", "a", "d"}, {"R", "IY1", "D"}},  // duplicate reference, kept once
  };
  const auto sets = mona::data::group_references(ex);
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].input, (Tokens{"r", "e", "a", "d"}));
  ASSERT_EQ(sets[0].references.size(), 2u);
  EXPECT_EQ(sets[0].references[0], (Tokens{"R", "IY1", "D"}));
  EXPECT_EQ(sets[0].references[1], (Tokens{"R", "EH1", "D"}));
  EXPECT_EQ(sets[1].input, (Tokens{"c", "a", "t"}));
  EXPECT_EQ(sets[1].references.size(), 1u);
  EXPECT_TRUE(mona::data::group_references({}).empty());
}
