// Speech manifests (mona/data/manifest.h): paths resolved against the manifest's directory,
// spaces kept, blank lines and CRLF handled, every malformed line refused naming file:line.
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

}  // namespace
}  // namespace mona::test
