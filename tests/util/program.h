// Test helper: runs one of mona's programs as a user would, from a shell.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace mona::test {

/// What a program printed (stdout and stderr together, in order) and its exit code (-1
/// when it did not exit normally, e.g. killed by a signal).
struct ProgramRun {
  int code = -1;
  std::string output;
};

/// Runs `command` with /bin/sh under `timeout`, so that a regression that hangs fails the
/// test instead of blocking the suite (timeout's exit code is then 124).
inline ProgramRun run_program(const std::string& command, int timeout_seconds = 120) {
  const std::string cmd = "timeout " + std::to_string(timeout_seconds) + " " + command + " 2>&1";
  ProgramRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace mona::test
