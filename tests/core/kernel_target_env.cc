// A bogus MONA_KERNEL_TARGET is refused: kernel_target() and every kernel call throw
// mona::Error naming the variable, the value and the valid names, at every call. Run by
// ctest with MONA_KERNEL_TARGET=avx9000 (tests/core/CMakeLists.txt); a plain program rather
// than a gtest case because the target is chosen once per process.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mona/core/cpu.h"
#include "mona/core/error.h"
#include "mona/core/monotonic.h"

int main() {
  const char* env = std::getenv("MONA_KERNEL_TARGET");
  const std::string wanted = env ? env : "";
  if (wanted.empty() || wanted == "baseline" || wanted == "x86-64-v3" || wanted == "x86-64-v4") {
    std::fprintf(stderr, "run with MONA_KERNEL_TARGET set to a name that is not a target\n");
    return 2;
  }
  int failures = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {  // refused at every call, not only the first
    try {
      std::printf("accepted: %s\n", mona::core::kernel_target());
      ++failures;
    } catch (const mona::Error& e) {
      const std::string msg = e.what();
      std::printf("refused: %s\n", msg.c_str());
      for (const std::string& part : {std::string("MONA_KERNEL_TARGET"), "\"" + wanted + "\"",
                                      std::string("baseline"), std::string("x86-64-v3"),
                                      std::string("x86-64-v4")}) {
        if (msg.find(part) == std::string::npos) {
          std::printf("message does not name %s\n", part.c_str());
          ++failures;
        }
      }
    }
  }
  const std::vector<double> p{0.5}, prev{1.0};
  std::vector<double> alpha(1);
  try {
    mona::core::monotonic_alignment_step(p.data(), prev.data(), alpha.data(), 1, 1, nullptr);
    std::printf("a kernel ran with MONA_KERNEL_TARGET=%s\n", wanted.c_str());
    ++failures;
  } catch (const mona::Error& e) {
    std::printf("kernel refused: %s\n", e.what());
  }
  return failures == 0 ? 0 : 1;
}
