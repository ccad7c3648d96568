// The `mona` program run as a user runs it: errors are one line with a non-zero exit, and
// train, decode, stream, eval and plot work end to end on the letter task.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/mona_cli.h"
#include "util/letter_task.h"
#include "util/program.h"
#include "util/temp_dir.h"

namespace mona::test {
namespace {
namespace fs = std::filesystem;

using Run = mona::test::ProgramRun;

TEST(Cli, ErrorsAreOneLineAndNonZero) {
  TempDir d;
  write_letter_task(d / "train.tsv", 50, 7);
  write_letter_task(d / "dev.tsv", 5, 8);
  {
    std::ofstream cfg(d / "bad.yaml");
    cfg << "model:\n  attenton: {type: mocha}\n";
  }
  auto r = run_cli("train " + (d / "bad.yaml"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("mona: error: " + (d / "bad.yaml") + ": unknown key \"model.attenton\""),
            std::string::npos) << r.output;
  r = run_cli("train " + (d / "missing.yaml"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("missing.yaml"), std::string::npos) << r.output;
  r = run_cli("frobnicate");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("mona: error: "), std::string::npos) << r.output;
  r = run_cli("eval");  // missing arguments
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  r = run_cli("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("train"), std::string::npos) << r.output;
  r = run_cli("train " + (d / "bad.yaml") + " --set model.attenton=");
  EXPECT_NE(r.code, 0);
  { std::ofstream(d / "garbage.ckpt") << "garbage"; }
  r = run_cli("decode " + (d / "garbage.ckpt") + " abc");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("mona: error: checkpoint " + (d / "garbage.ckpt")), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("frame #"), std::string::npos) << "no stack traces: " << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(Cli, TrainDecodeStreamEvalPlot) {
  TempDir d;
  write_letter_run(d.path(), "max_steps: 10, eval_every: 10, batch_size: 8, threads: 1");
  auto r = run_cli("train " + (d / "cfg.yaml") + " --set train.optimizer.learning_rate=0.01");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string ckpt = d / "run/best.ckpt";
  // unknown characters: reported with the word, and decoding goes on with the next one; the
  // exit code says that an input was skipped (an empty line is no input)
  r = run_cli("decode " + ckpt + " -", "abc\nab9z\n\ncab\n");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("mona: 1 input skipped (see above)\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("skipping \"ab9z\": symbols outside the model's input vocabulary: '9', 'z'"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("skipping empty input (line 3)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("abc\t"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cab\t"), std::string::npos) << r.output;
  // characters are UTF-8 code points, named whole; a stray byte is shown in hex
  r = run_cli("decode " + ckpt + " -", "ab\xc3\xa9" "c\nb\xff" "a\n");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("mona: 2 inputs skipped (see above)\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("skipping \"ab\xc3\xa9" "c\": symbols outside the model's input vocabulary: '\xc3\xa9'\n"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("symbols outside the model's input vocabulary: '\\xFF'"), std::string::npos) << r.output;
  // markers the model places itself are no input (an </s> would end the input there); a
  // UTF-8 byte-order mark before the first line is no symbol
  r = run_cli("decode " + ckpt + " -", "\xEF\xBB\xBF" "abc\na </s> b\n");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(r.output.rfind("abc\t", 0) == 0) << r.output;
  EXPECT_NE(r.output.find("mona: skipping \"a </s> b\": markers the model places itself: '</s>'\n"),
            std::string::npos) << r.output;
  // output that cannot be written is an error, not a result cut short
  r = run_program("sh -c '" + std::string(MONA_CLI) + " decode " + ckpt + " abc > /dev/full'");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("mona: error: standard output: write failed"), std::string::npos) << r.output;
  r = run_cli("stream " + ckpt, "abcdef\n");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("read 6 'f'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  = "), std::string::npos) << r.output;
  r = run_cli("eval " + ckpt + " " + (d / "dev.tsv") + " --json");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"inputs\": 8"), std::string::npos) << r.output;
  r = run_cli("eval " + ckpt + " " + (d / "dev.tsv") + " --json --beam 0");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"average_lagging\": "), std::string::npos) << r.output;  // greedy: latency too
  r = run_cli("eval " + ckpt + " " + (d / "dev.tsv") + " --json --beam 2");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("average_lagging"), std::string::npos) << r.output;  // beam search: none
  // References holding tokens the model cannot emit are counted on stderr (they are errors
  // whatever it decodes), naming the tokens; the others say nothing.
  EXPECT_EQ(r.output.find("output vocabulary"), std::string::npos) << r.output;
  {
    std::ofstream dev(d / "dev-oov.tsv");
    dev << "a b\tF E\nc d\tD Q\nb a\tE F Z\nz a\tF\n";
  }
  r = run_cli("eval " + ckpt + " " + (d / "dev-oov.tsv"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("mona: eval: 1 of 4 inputs of " + (d / "dev-oov.tsv") +
                          " hold symbols outside the model's input vocabulary ('z'); they are decoded with <unk> "
                          "in their place\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("mona: eval: 2 of 4 references of " + (d / "dev-oov.tsv") +
                          " hold tokens outside the model's output vocabulary ('Q', 'Z'); the model cannot emit "
                          "them, so they count as errors\n"),
            std::string::npos)
      << r.output;
  r = run_cli("plot " + ckpt + " abc -o " + (d / "a.png"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(d / "a.png"));
  // a 200-letter input decodes without error
  std::string longw;
  for (int k = 0; k < 200; ++k) longw += char('a' + (k % 6));
  r = run_cli("decode " + ckpt + " " + longw);
  EXPECT_EQ(r.code, 0) << r.output;
}

}  // namespace
}  // namespace mona::test
