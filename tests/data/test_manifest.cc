// Speech manifests (mona/data/manifest.h): paths resolved against the manifest's directory,
// spaces kept, blank lines and CRLF handled, every malformed line refused naming file:line;
// word times beside a manifest, read and refused the same way.
#include "mona/data/manifest.h"

#include <gtest/gtest.h>

#include <fstream>

#include "mona/core/error.h"
#include "util/temp_dir.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

using Tokens = std::vector<std::string>;

TEST(Manifest, PathsAreResolvedAgainstTheManifestsDirectory) {
  TempDir dir;
  std::filesystem::create_directories(dir / "wav");
  for (const char* f : {"wav/a.wav", "wav/b c.wav", "abs.wav"}) std::ofstream(dir / f) << "x";
  {
    std::ofstream m(dir / "m.tsv");
    m << "wav/a.wav\tgo  left\r\n\n   \nwav/b c.wav\tyes\n" << (dir / "abs.wav") << "\tno";
  }
  const auto ex = data::read_manifest(dir / "m.tsv");
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].input, Tokens{dir / "wav/a.wav"});
  EXPECT_EQ(ex[0].output, (Tokens{"go", "left"}));
  EXPECT_EQ(ex[1].input, Tokens{dir / "wav/b c.wav"});
  EXPECT_EQ(ex[2].input, Tokens{dir / "abs.wav"});
  EXPECT_EQ(ex[2].output, Tokens{"no"});
}

TEST(Manifest, MalformedLinesAreRefusedNamingFileAndLine) {
  TempDir dir;
  std::ofstream(dir / "a.wav") << "x";
  auto parse = [&](const std::string& text) { return data::parse_manifest(text, dir.path(), "m.tsv"); };
  expect_error([&] { parse("a.wav\tyes\na.wav yes\n"); },
               "m.tsv:2: expected 1 TAB separating the audio path and the transcript, found 0");
  expect_error([&] { parse("a.wav\tyes\tno\n"); }, "m.tsv:1: expected 1 TAB");
  expect_error([&] { parse("\tyes\n"); }, "m.tsv:1: empty audio path");
  expect_error([&] { parse("a.wav\t  \n"); }, "m.tsv:1: empty transcript");
  expect_error([&] { parse("\n\nmissing.wav\tyes\n"); },
               "m.tsv:3: audio file missing.wav (" + (dir / "missing.wav") + ") does not exist");
  EXPECT_THROW(parse("missing.wav\tyes\n"), DataError);
  EXPECT_TRUE(parse("").empty());
}

TEST(Manifest, ReservedSymbolsInATranscriptAreRefusedNamingFileAndLine) {
  TempDir dir;
  std::ofstream(dir / "a.wav") << "x";
  auto parse = [&](const std::string& text) { return data::parse_manifest(text, dir.path(), "m.tsv"); };
  expect_error([&] { parse("a.wav\tgo\na.wav\tgo </s>\n"); },
               "m.tsv:2: transcript token \"</s>\" is a reserved symbol (<pad>, <s>, </s>, <unk>)");
  for (const char* reserved : {"<pad>", "<s>", "<unk>"}) {
    EXPECT_THROW(parse(std::string("a.wav\t") + reserved + "\n"), DataError) << reserved;
  }
  EXPECT_EQ(parse("a.wav\t<s>x\n").at(0).output, Tokens{"<s>x"});
}

TEST(Manifest, LinesAreTheUtterancesLineNumbers) {
  TempDir dir;
  std::ofstream(dir / "a.wav") << "x";
  std::vector<int64_t> lines;
  const auto ex = data::parse_manifest("\n\na.wav\tgo\r\n \na.wav\tleft\n", dir.path(), "m.tsv", &lines);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(lines, (std::vector<int64_t>{3, 5}));
}

TEST(WordTimes, ReadByResolvedPathInTranscriptOrder) {
  TempDir dir;
  std::filesystem::create_directories(dir / "wav");
  std::ofstream(dir / "m.tsv") << "wav/a.wav\tgo left\n";
  std::ofstream(dir / "m.words.tsv") << "wav/a.wav\tgo\t0.088\t0.740\r\n\nwav/a.wav\tleft\t0.951\t1.420\n"
                                        "wav/../b.wav\tno\t0\t0.5\n";
  EXPECT_EQ(data::word_times_path(dir / "m.tsv"), dir / "m.words.tsv");
  EXPECT_EQ(data::word_times_path(dir / "other.tsv"), "");
  const data::WordTimes t = data::read_word_times(dir / "m.words.tsv");
  ASSERT_EQ(t.size(), 2u);
  const auto& a = t.at(dir / "wav/a.wav");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].word, "go");
  EXPECT_DOUBLE_EQ(a[0].start, 0.088);
  EXPECT_DOUBLE_EQ(a[0].end, 0.740);
  EXPECT_EQ(a[1].word, "left");
  EXPECT_DOUBLE_EQ(a[1].end, 1.420);
  EXPECT_EQ(t.at(dir / "b.wav")[0].word, "no");  // the path as read_manifest resolves it
}

TEST(WordTimes, MalformedLinesAreRefusedNamingFileAndLine) {
  auto parse = [](const std::string& text) { return data::parse_word_times(text, "/d", "w.tsv"); };
  expect_error([&] { parse("a.wav\tgo\t0\t1\na.wav\tgo\t1\n"); },
               "w.tsv:2: expected 4 TAB-separated fields (audio path, word, start s, end s), found 3");
  expect_error([&] { parse("a.wav\t\t0\t1\n"); }, "w.tsv:1: empty audio path or word");
  expect_error([&] { parse("a.wav\tgo\tsoon\t1\n"); }, "w.tsv:1: start: expected seconds >= 0, got \"soon\"");
  expect_error([&] { parse("a.wav\tgo\t0\t-1\n"); }, "w.tsv:1: end: expected seconds >= 0, got \"-1\"");
  expect_error([&] { parse("a.wav\tgo\t0\tnan\n"); }, "w.tsv:1: end: expected seconds >= 0, got \"nan\"");
  expect_error([&] { parse("a.wav\tgo\t2\t1\n"); }, "w.tsv:1: end 1 s is before start 2 s");
  EXPECT_THROW(parse("a.wav\tgo\t2\t1\n"), DataError);
  EXPECT_TRUE(parse("").empty());
}

TEST(VoiceGroups, ReadByResolvedPathGroupedByTheVoiceBeforeItsSlash) {
  TempDir dir;
  std::ofstream(dir / "m.tsv") << "wav/a.wav\tgo left\n";
  std::ofstream(dir / "m.voices.tsv") << "wav/a.wav\tespeak-ng/en-us+Annie\tAnnie\r\n\nwav/../b.wav\tflite/rms\trms\n"
                                         "c.wav\tnoslash\tx\n";
  EXPECT_EQ(data::voices_path(dir / "m.tsv"), dir / "m.voices.tsv");
  EXPECT_EQ(data::voices_path(dir / "other.tsv"), "");
  const data::VoiceGroups g = data::read_voice_groups(dir / "m.voices.tsv");
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g.at(dir / "wav/a.wav"), "espeak-ng");
  EXPECT_EQ(g.at(dir / "b.wav"), "flite");  // the path as read_manifest resolves it
  EXPECT_EQ(g.at(dir / "c.wav"), "noslash");
}

TEST(VoiceGroups, MalformedLinesAreRefusedNamingFileAndLine) {
  auto parse = [](const std::string& text) { return data::parse_voice_groups(text, "/d", "v.tsv"); };
  expect_error([&] { parse("a.wav\tflite/rms\trms\nb.wav\tflite/rms\n"); },
               "v.tsv:2: expected 3 TAB-separated fields (audio path, voice, speaker), found 2");
  expect_error([&] { parse("a.wav\t\trms\n"); }, "v.tsv:1: empty audio path, voice or speaker");
  expect_error([&] { parse("a.wav\t/awb\tawb\n"); },
               "v.tsv:1: voice '/awb': expected <group>/<name> with a group before the '/'");
  expect_error([&] { parse("a.wav\tflite/rms\trms\nx/../a.wav\tflite/slt\tslt\n"); },
               "v.tsv:2: audio file x/../a.wav is listed twice");
  EXPECT_THROW(parse("a.wav\tflite/rms\n"), DataError);
}

}  // namespace
}  // namespace mona::test
