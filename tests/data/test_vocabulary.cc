#include "mona/data/vocabulary.h"

#include <gtest/gtest.h>

#include "mona/core/error.h"
#include "util/temp_dir.h"

using mona::data::Vocabulary;

TEST(Vocabulary, SpecialsHaveReservedIds) {
  Vocabulary v;
  EXPECT_EQ(v.size(), 4);
  EXPECT_EQ(v.id("<pad>"), mona::data::kPad);
  EXPECT_EQ(v.id("<s>"), mona::data::kBos);
  EXPECT_EQ(v.id("</s>"), mona::data::kEos);
  EXPECT_EQ(v.id("<unk>"), mona::data::kUnk);
  EXPECT_EQ(v.symbol(2), "</s>");
  EXPECT_TRUE(Vocabulary::is_special(3));
  EXPECT_FALSE(Vocabulary::is_special(4));
}

TEST(Vocabulary, AddIsIdempotentAndDense) {
  Vocabulary v;
  EXPECT_EQ(v.add("AH"), 4);
  EXPECT_EQ(v.add("B"), 5);
  EXPECT_EQ(v.add("AH"), 4);
  EXPECT_EQ(v.add("<s>"), mona::data::kBos);
  EXPECT_EQ(v.size(), 6);
  EXPECT_TRUE(v.contains("B"));
  EXPECT_FALSE(v.contains("C"));
}

TEST(Vocabulary, AddRejectsInvalidSymbols) {
  Vocabulary v;
  EXPECT_ERROR_CONTAINS(v.add(""), "empty symbol");
  EXPECT_ERROR_CONTAINS(v.add("a b"), "\"a b\"", "whitespace");
  EXPECT_ERROR_CONTAINS(v.add("a\tb"), "\"a\\tb\"", "whitespace");
  EXPECT_EQ(v.size(), 4);
}

TEST(Vocabulary, LookupErrorsNameTheValue) {
  Vocabulary v;
  v.add("x");
  EXPECT_ERROR_CONTAINS(v.id("zz"), "unknown symbol \"zz\"");
  EXPECT_ERROR_CONTAINS(v.symbol(5), "id 5", "[0, 5)");
  EXPECT_ERROR_CONTAINS(v.symbol(-1), "id -1");
  EXPECT_ERROR_CONTAINS(v.decode({4, 9}), "id 9", "position 1");
}

TEST(Vocabulary, EncodeDecodeRoundTrip) {
  Vocabulary v;
  v.add_all({"k", "a", "t"});
  const std::vector<std::string> word = {"k", "a", "t", "a"};
  const auto ids = v.encode(word);
  EXPECT_EQ(ids, (std::vector<int64_t>{4, 5, 6, 5}));
  EXPECT_EQ(v.decode(ids), word);
  EXPECT_EQ(v.decode({mona::data::kBos, 4, mona::data::kEos}),
            (std::vector<std::string>{"<s>", "k", "</s>"}));
}

TEST(Vocabulary, EncodeListsEveryUnknownSymbolOnce) {
  Vocabulary v;
  v.add_all({"a", "b"});
  const std::vector<std::string> s = {"a", "q", "b", "x", "q"};
  EXPECT_EQ(v.unknown_symbols(s), (std::vector<std::string>{"q", "x"}));
  EXPECT_TRUE(v.unknown_symbols({"a", "b"}).empty());
  EXPECT_ERROR_CONTAINS(v.encode(s), "2 unknown symbols", "\"q\", \"x\"");
  EXPECT_EQ(v.encode_or_unk(s), (std::vector<int64_t>{4, 3, 5, 3, 3}));
}

TEST(Vocabulary, TextRoundTrip) {
  Vocabulary v;
  v.add_all({"AH0", "B", "é", "<b>"});
  const std::string text = v.to_text();
  EXPECT_EQ(text, "<pad>\n<s>\n</s>\n<unk>\nAH0\nB\né\n<b>\n");
  const Vocabulary back = Vocabulary::from_text(text, "v.txt");
  EXPECT_EQ(back, v);
  EXPECT_EQ(back.id("é"), 6);
  // Missing final newline and CRLF are accepted.
  EXPECT_EQ(Vocabulary::from_text("<pad>\r\n<s>\r\n</s>\r\n<unk>\r\nAH0\r\nB\r\né\r\n<b>", "w"),
            v);
  EXPECT_EQ(Vocabulary::from_text(Vocabulary().to_text(), "x"), Vocabulary());
}

TEST(Vocabulary, FromTextErrorsNameSourceAndLine) {
  const std::string specials = "<pad>\n<s>\n</s>\n<unk>\n";
  EXPECT_ERROR_CONTAINS(Vocabulary::from_text("", "v.txt"), "v.txt", "reserved symbols");
  EXPECT_ERROR_CONTAINS(Vocabulary::from_text("<pad>\n<s>\n", "v.txt"), "v.txt",
                        "got 2 lines");
  EXPECT_ERROR_CONTAINS(Vocabulary::from_text("<pad>\n<s>\n<unk>\n</s>\n", "v.txt"), "v.txt:3:",
                        "\"</s>\"", "got \"<unk>\"");
  EXPECT_ERROR_CONTAINS(Vocabulary::from_text(specials + "A\nB\nA\n", "v.txt"), "v.txt:7:",
                        "duplicate symbol \"A\"", "id 4 on line 5");
  EXPECT_ERROR_CONTAINS(Vocabulary::from_text(specials + "A\n\nB\n", "v.txt"), "v.txt:6:",
                        "empty symbol");
  EXPECT_ERROR_CONTAINS(Vocabulary::from_text(specials + "A B\n", "v.txt"), "v.txt:5:",
                        "whitespace");
}
