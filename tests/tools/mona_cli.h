// Test helper of tests/tools: the `mona` program (MONA_CLI, tests/tools/CMakeLists.txt) run
// from a shell as a user runs it.
#pragma once

#include <fstream>
#include <string>

#include "util/program.h"
#include "util/temp_dir.h"

namespace mona::test {

/// Runs `mona <args>` (with `stdin_text` on its standard input when not empty) under
/// run_program's timeout; its output and exit code.
inline ProgramRun run_cli(const std::string& args, const std::string& stdin_text = "") {
  TempDir d;
  std::string cmd = std::string(MONA_CLI) + " " + args;
  if (!stdin_text.empty()) {
    std::ofstream(d / "stdin.txt") << stdin_text;
    cmd += " < " + (d / "stdin.txt");
  }
  return run_program(cmd);
}

}  // namespace mona::test
