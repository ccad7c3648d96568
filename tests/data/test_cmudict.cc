// label: g2p
// CMUdict data preparation: parsing of a checked-in excerpt of the real index.js format
// (tests/data/cmudict_excerpt.js: 48 lines copied verbatim from cmu-pronouncing-dictionary@3.0.0
// plus 21 hand-made malformed/edge-case lines), normalisation, alternatives, the malformed-line
// report, the FNV-1a hash split, and the atomic TSV writer.
#include "mona/data/cmudict.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "mona/core/error.h"
#include "util/temp_dir.h"

namespace fs = std::filesystem;
using namespace mona::data;

using mona::test::TempDir;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

const std::string kExcerpt = std::string(MONA_TEST_DATA_DIR) + "/cmudict_excerpt.js";

std::vector<CmudictEntry> load_excerpt(ParseReport& report) {
  return load_cmudict_js(kExcerpt, report);
}

// Pronunciations of `word`, in order, as "P H O N E S" strings.
std::vector<std::string> prons(const std::vector<CmudictEntry>& es, const std::string& word) {
  std::vector<std::string> out;
  for (const auto& e : es) {
    if (e.word != word) continue;
    std::string s;
    for (const auto& p : e.phonemes) s += (s.empty() ? "" : " ") + p;
    out.push_back(s);
  }
  return out;
}

bool has_word(const std::vector<CmudictEntry>& es, const std::string& word) {
  for (const auto& e : es)
    if (e.word == word) return true;
  return false;
}

std::vector<std::string> dir_listing(const fs::path& d) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing and the report, counted by hand from cmudict_excerpt.js.

TEST(CmudictParse, ExcerptCounts) {
  ParseReport r;
  const auto es = load_excerpt(r);
  EXPECT_EQ(r.source, kExcerpt);
  EXPECT_EQ(r.lines, 75u);
  EXPECT_EQ(r.entry_lines, 69u);  // 48 real + 21 hand-made
  EXPECT_EQ(r.kept, 49u);         // 43 real + Mixed(2), escaped, single, lower, unquoted, nocomma
  EXPECT_EQ(es.size(), 49u);
  EXPECT_EQ(r.words, 36u);          // 30 real + 6 hand-made
  EXPECT_EQ(r.variants_kept, 14u);  // 13 real word(N) lines kept (the(2) is not) + Mixed(2)
  EXPECT_EQ(r.comments_removed, 3u);  // aalborg, spieth, spieth(2)
  EXPECT_EQ(r.lowercased, 1u);        // Mixed(2)

  EXPECT_EQ(r.count(DropReason::kSyntax), 3u);           // broken, nocolon, trailing
  EXPECT_EQ(r.count(DropReason::kBadEscape), 1u);        // tab\q
  EXPECT_EQ(r.count(DropReason::kBadVariant), 2u);       // bad(0), bad(x)
  EXPECT_EQ(r.count(DropReason::kWordCharacters), 6u);   // a. a.d. able-bodied naïve x86 '
  EXPECT_EQ(r.count(DropReason::kEmptyPronunciation), 2u);  // empty, commentonly
  EXPECT_EQ(r.count(DropReason::kUnknownPhoneme), 2u);      // QQ, EH3
  EXPECT_EQ(r.count(DropReason::kDuplicateKey), 1u);        // second "cat"
  // adverse(2) and the(2) (real: equal to adverse / the once stress is stripped), dog(2)
  EXPECT_EQ(r.count(DropReason::kDuplicatePronunciation), 3u);
  EXPECT_EQ(r.dropped_total(), 20u);
  EXPECT_EQ(r.kept + r.dropped_total(), r.entry_lines);  // nothing silently dropped
}

TEST(CmudictParse, ExamplesNameTheLines) {
  ParseReport r;
  load_excerpt(r);
  ASSERT_EQ(r.examples.count(DropReason::kWordCharacters), 1u);
  const auto& wc = r.examples.at(DropReason::kWordCharacters);
  ASSERT_EQ(wc.size(), 5u);  // 6 dropped, at most max_examples = 5 shown
  EXPECT_EQ(wc[0].rfind("line 8: \"a.\": \"EY1\",", 0), 0u) << wc[0];
  EXPECT_NE(wc[2].find("able-bodied"), std::string::npos);

  const auto& dup = r.examples.at(DropReason::kDuplicatePronunciation);
  ASSERT_EQ(dup.size(), 3u);
  EXPECT_EQ(dup[0].rfind("line 22: \"adverse(2)\"", 0), 0u) << dup[0];
  EXPECT_NE(dup[0].find("same as line 21"), std::string::npos) << dup[0];

  const auto& bad = r.examples.at(DropReason::kUnknownPhoneme);
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_NE(bad[0].find("'QQ'"), std::string::npos) << bad[0];
  EXPECT_NE(bad[1].find("'EH3'"), std::string::npos) << bad[1];

  const std::string text = r.to_string();
  EXPECT_NE(text.find("syntax: 3"), std::string::npos) << text;
  EXPECT_NE(text.find("duplicate_pronunciation: 3"), std::string::npos) << text;

  ParseReport few;
  few.max_examples = 1;
  load_excerpt(few);
  EXPECT_EQ(few.examples.at(DropReason::kWordCharacters).size(), 1u);
  EXPECT_EQ(few.count(DropReason::kWordCharacters), 6u);
}

TEST(CmudictParse, Normalisation) {
  ParseReport r;
  const auto es = load_excerpt(r);
  // Stress digits stripped; comments removed; file order kept.
  EXPECT_EQ(prons(es, "psychology"), std::vector<std::string>{"S AY K AA L AH JH IY"});
  EXPECT_EQ(prons(es, "aalborg"),
            (std::vector<std::string>{"AO L B AO R G", "AA L B AO R G"}));
  EXPECT_EQ(prons(es, "spieth"), (std::vector<std::string>{"S P IY TH", "S P AY AH TH"}));
  // Apostrophes are part of words.
  EXPECT_EQ(prons(es, "'bout"), std::vector<std::string>{"B AW T"});
  EXPECT_EQ(prons(es, "o'neill"), std::vector<std::string>{"OW N IY L"});
  // Upper-case keys are lowercased; lower-case phonemes are upper-cased.
  EXPECT_EQ(prons(es, "mixed"), std::vector<std::string>{"M IH K S T"});
  EXPECT_EQ(prons(es, "lower"), std::vector<std::string>{"L OW ER"});
  // JS syntax variants: \u escapes, single quotes, identifier keys, no trailing comma.
  EXPECT_EQ(prons(es, "escaped"), std::vector<std::string>{"EH S K EY P T"});
  EXPECT_EQ(prons(es, "single"), std::vector<std::string>{"S IH NG G AH L"});
  EXPECT_EQ(prons(es, "unquoted"), std::vector<std::string>{"AH N K W OW T IH D"});
  EXPECT_EQ(prons(es, "nocomma"), std::vector<std::string>{"N OW K AA M AH"});
  // Excluded or malformed keys produce no word.
  for (const char* w : {"a.", "a.d.", "able-bodied", "a", "bad", "empty", "foo", "stress",
                        "broken", "trailing", "tab"}) {
    if (std::string(w) == "a") continue;  // "a" is a real, kept word
    EXPECT_FALSE(has_word(es, w)) << w;
  }
  // Every kept phoneme is one of the 39, upper-case, without a digit.
  const std::set<std::string> k39 = {
      "AA", "AE", "AH", "AO", "AW", "AY", "B",  "CH", "D",  "DH", "EH", "ER", "EY",
      "F",  "G",  "HH", "IH", "IY", "JH", "K",  "L",  "M",  "N",  "NG", "OW", "OY",
      "P",  "R",  "S",  "SH", "T",  "TH", "UH", "UW", "V",  "W",  "Y",  "Z",  "ZH"};
  ASSERT_EQ(k39.size(), 39u);
  for (const auto& e : es) {
    for (const auto& p : e.phonemes) EXPECT_TRUE(k39.count(p)) << e.word << ": " << p;
    for (char c : e.word) EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '\'') << e.word;
  }
}

TEST(CmudictParse, AlternativesAreExtraReferences) {
  ParseReport r;
  const auto es = load_excerpt(r);
  EXPECT_EQ(prons(es, "the"), (std::vector<std::string>{"DH AH", "DH IY"}))
      << "the(2) DH AH1 equals the DH AH0 without stress and is dropped as a duplicate";
  EXPECT_EQ(prons(es, "read"), (std::vector<std::string>{"R EH D", "R IY D"}));
  EXPECT_EQ(prons(es, "abkhazian").size(), 4u);
  EXPECT_EQ(prons(es, "adverse"), std::vector<std::string>{"AE D V ER S"});
  EXPECT_EQ(prons(es, "cat"), std::vector<std::string>{"K AE T"});  // duplicate key dropped
  EXPECT_EQ(prons(es, "dog"), std::vector<std::string>{"D AO G"});
  // The variant number is kept for information, and references of a word are adjacent.
  int the_seen = 0;
  for (const auto& e : es) {
    if (e.word == "the") {
      EXPECT_EQ(e.variant, the_seen == 0 ? 1 : 3);
      ++the_seen;
    }
  }
  EXPECT_EQ(the_seen, 2);
  for (std::size_t i = 0; i + 1 < es.size(); ++i) {
    for (std::size_t j = i + 2; j < es.size(); ++j) {
      if (es[i].word == es[j].word) {
        EXPECT_EQ(es[i + 1].word, es[i].word) << es[i].word;
      }
    }
  }
  // The "(N)" suffix never reaches a word.
  for (const auto& e : es) EXPECT_EQ(e.word.find('('), std::string::npos) << e.word;
}

TEST(CmudictParse, MalformedFilesThrowNamingTheSource) {
  ParseReport r;
  const std::string ok = "export const dictionary = {\n  \"cat\": \"K AE1 T\"\n}\n";
  EXPECT_EQ(parse_cmudict_js(ok, r, "ok.js").size(), 1u);
  EXPECT_EQ(r.lines, 3u);

  auto expect_error = [](const std::string& text, const std::string& needle) {
    ParseReport rep;
    try {
      parse_cmudict_js(text, rep, "some/index.js");
      ADD_FAILURE() << "no error for: " << text;
    } catch (const mona::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("some/index.js"), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  };
  // Truncated: the object is never closed.
  expect_error("export const dictionary = {\n  \"cat\": \"K AE1 T\",\n  \"dog\": \"D AO1",
               "truncated");
  // Not the module: no opening line, or something else first.
  expect_error("", "not the cmu-pronouncing-dictionary");
  expect_error("{\"cat\": \"K AE1 T\"}\n", "not the cmu-pronouncing-dictionary");
  expect_error("cat K AE1 T\n", "not the cmu-pronouncing-dictionary");
  // An unterminated block comment.
  expect_error("/** type\n", "truncated");
  // Nothing usable.
  expect_error("export const dictionary = {\n}\n", "no usable entry");
  expect_error("export const dictionary = {\n  \"a.b\": \"EY1\"\n}\n", "no usable entry");

  // Text after the closing brace is counted, not ignored.
  ParseReport tail;
  parse_cmudict_js(ok + "garbage\n", tail);
  EXPECT_EQ(tail.count(DropReason::kSyntax), 1u);
  // CRLF line ends and the older CommonJS form are accepted.
  ParseReport crlf;
  const auto es = parse_cmudict_js(
      "module.exports = {\r\n  \"a\": \"AH0\",\r\n  \"a(1)\": \"EY1\"\r\n};\r\n", crlf);
  EXPECT_EQ(prons(es, "a"), (std::vector<std::string>{"AH", "EY"}));
  EXPECT_EQ(crlf.dropped_total(), 0u);
}

TEST(CmudictParse, LoadMissingFileNamesIt) {
  ParseReport r;
  try {
    load_cmudict_js("/nonexistent/dir/index.js", r);
    FAIL() << "no error";
  } catch (const mona::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/index.js"), std::string::npos);
  }
}

// ---------------------------------------------------------------------------------------------
// Split: FNV-1a 64 of the word's bytes, % 100: [0,90) train, [90,95) dev, [95,100) test.
// The expected values were computed independently (a 5-line Python FNV-1a); the first three
// hashes are the published FNV-1a 64 test vectors.

TEST(CmudictSplit, Fnv1a64KnownValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
  EXPECT_EQ(fnv1a64("cat"), 0xf5e307190ce4a327ULL);
  EXPECT_EQ(fnv1a64("o'neill"), 0xc4a9d2a9ca9086f5ULL);
}

TEST(CmudictSplit, HardCodedSplits) {
  // word -> (fnv1a64 % 100, split)
  const std::map<std::string, Split> expected = {
      {"a", Split::kTest},          // 96
      {"dog", Split::kDev},         // 93
      {"hello", Split::kDev},       // 91
      {"cats", Split::kDev},        // 92
      {"either", Split::kTrain},    // 88
      {"cat", Split::kTrain},       // 31
      {"the", Split::kTrain},       // 24
      {"read", Split::kTrain},      // 1
      {"o'neill", Split::kTrain},   // 69
      {"'bout", Split::kTrain},     // 36
      {"abkhazian", Split::kTrain}, // 82
  };
  for (const auto& [w, s] : expected) EXPECT_EQ(split_of(w), s) << w;
  EXPECT_STREQ(split_name(Split::kTrain), "train");
  EXPECT_STREQ(split_name(Split::kDev), "dev");
  EXPECT_STREQ(split_name(Split::kTest), "test");
}

TEST(CmudictSplit, VariantsNeverStraddleAndRatiosHold) {
  ParseReport r;
  const auto es = load_excerpt(r);
  std::map<std::string, Split> of;
  for (const auto& e : es) {
    auto [it, inserted] = of.emplace(e.word, split_of(e.word));
    if (!inserted) {
      EXPECT_EQ(it->second, split_of(e.word)) << e.word;
    }
  }
  // The hash is of the word alone, so a(2)'s reference lands with "a" in test.
  const auto c = count_splits(es);
  // a (2 prons) test; dog, hello (2 prons), cats dev. Computed with the Python reference.
  EXPECT_EQ(c.words[2], 1u);
  EXPECT_EQ(c.pronunciations[2], 2u);
  EXPECT_EQ(c.words[1], 3u);
  EXPECT_EQ(c.pronunciations[1], 4u);
  EXPECT_EQ(c.words[0] + c.words[1] + c.words[2], r.words);
  EXPECT_EQ(c.pronunciations[0] + c.pronunciations[1] + c.pronunciations[2], es.size());

  // Over many synthetic words the split is close to 90/5/5.
  std::array<int, 3> n{};
  const int total = 20000;
  for (int i = 0; i < total; ++i) n[static_cast<int>(split_of("w" + std::to_string(i)))]++;
  EXPECT_NEAR(n[0] / double(total), 0.90, 0.01);
  EXPECT_NEAR(n[1] / double(total), 0.05, 0.01);
  EXPECT_NEAR(n[2] / double(total), 0.05, 0.01);
}

// ---------------------------------------------------------------------------------------------
// TSV writing.

TEST(CmudictTsv, LineFormat) {
  CmudictEntry e{"o'neill", {"OW", "N", "IY", "L"}};
  EXPECT_EQ(to_tsv_line(e), "o ' n e i l l\tOW N IY L");
  EXPECT_EQ(to_tsv_line(CmudictEntry{"a", {"EY"}}), "a\tEY");
}

TEST(CmudictTsv, WritesThreeFilesWithAlternativesAsExtraLines) {
  TempDir tmp;
  ParseReport r;
  const auto es = load_excerpt(r);
  const fs::path out = fs::path(tmp.path()) / "nested" / "out";  // created on demand
  const auto c = write_cmudict_splits(es, out.string());
  EXPECT_EQ(dir_listing(out), (std::vector<std::string>{"dev.tsv", "test.tsv", "train.tsv"}));

  EXPECT_EQ(read_text(out / "test.tsv"), "a\tAH\na\tEY\n");
  EXPECT_EQ(read_text(out / "dev.tsv"),
            "c a t s\tK AE T S\nd o g\tD AO G\nh e l l o\tHH AH L OW\nh e l l o\tHH EH L OW\n");
  const std::string train = read_text(out / "train.tsv");
  EXPECT_NE(train.find("r e a d\tR EH D\nr e a d\tR IY D\n"), std::string::npos);
  EXPECT_NE(train.find("' b o u t\tB AW T\n"), std::string::npos);
  std::size_t lines = 0;
  for (char ch : train) lines += ch == '\n';
  EXPECT_EQ(lines, c.pronunciations[0]);
  EXPECT_EQ(c.pronunciations[0] + c.pronunciations[1] + c.pronunciations[2], 49u);
  EXPECT_EQ(c.words[0] + c.words[1] + c.words[2], 36u);
}

TEST(CmudictTsv, ReplacesAtomicallyAndLeavesNoTemporaries) {
  TempDir tmp;
  const std::string out = tmp.path();
  write_text(fs::path(tmp.path()) / "train.tsv", "old train\n");
  write_text(fs::path(tmp.path()) / "dev.tsv", "old dev\n");
  write_text(fs::path(tmp.path()) / "test.tsv", "old test\n");

  // Bad entries are rejected before anything is written.
  const std::vector<CmudictEntry> bad_word = {{"cat", {"K", "AE", "T"}}, {"C-3PO", {"S"}}};
  EXPECT_THROW(write_cmudict_splits(bad_word, out), mona::Error);
  const std::vector<CmudictEntry> no_phones = {{"cat", {}}};
  EXPECT_THROW(write_cmudict_splits(no_phones, out), mona::Error);
  const std::vector<CmudictEntry> spacey = {{"cat", {"K", "A E"}}};
  EXPECT_THROW(write_cmudict_splits(spacey, out), mona::Error);
  EXPECT_EQ(read_text(fs::path(tmp.path()) / "train.tsv"), "old train\n");
  EXPECT_EQ(dir_listing(tmp.path()), (std::vector<std::string>{"dev.tsv", "test.tsv", "train.tsv"}));

  // A target that is not a regular file: error naming it, nothing replaced, no temporaries.
  fs::remove(fs::path(tmp.path()) / "test.tsv");
  fs::create_directory(fs::path(tmp.path()) / "test.tsv");
  const std::vector<CmudictEntry> good = {{"cat", {"K", "AE", "T"}}, {"a", {"EY"}}};
  try {
    write_cmudict_splits(good, out);
    ADD_FAILURE() << "no error";
  } catch (const mona::Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.tsv"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text(fs::path(tmp.path()) / "train.tsv"), "old train\n");
  EXPECT_EQ(read_text(fs::path(tmp.path()) / "dev.tsv"), "old dev\n");
  EXPECT_EQ(dir_listing(tmp.path()), (std::vector<std::string>{"dev.tsv", "test.tsv", "train.tsv"}));

  // out_dir is a regular file.
  try {
    write_cmudict_splits(good, (fs::path(tmp.path()) / "train.tsv").string());
    ADD_FAILURE() << "no error";
  } catch (const mona::Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.tsv"), std::string::npos) << e.what();
  }

  // A successful run replaces all three; a second identical run gives identical files.
  fs::remove(fs::path(tmp.path()) / "test.tsv");
  const auto c = write_cmudict_splits(good, out);
  EXPECT_EQ(read_text(fs::path(tmp.path()) / "train.tsv"), "c a t\tK AE T\n");
  EXPECT_EQ(read_text(fs::path(tmp.path()) / "dev.tsv"), "");
  EXPECT_EQ(read_text(fs::path(tmp.path()) / "test.tsv"), "a\tEY\n");
  EXPECT_EQ(c.words[0], 1u);
  EXPECT_EQ(c.words[2], 1u);
  write_cmudict_splits(good, out);
  EXPECT_EQ(read_text(fs::path(tmp.path()) / "train.tsv"), "c a t\tK AE T\n");
  EXPECT_EQ(dir_listing(tmp.path()), (std::vector<std::string>{"dev.tsv", "test.tsv", "train.tsv"}));
}
