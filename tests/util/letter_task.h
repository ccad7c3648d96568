// The letter task the trainer and program tests train on, as a data file (mona/data/dataset.h
// format: input and output token sequences separated by a tab).
#pragma once

#include <fstream>
#include <random>
#include <string>

namespace mona::test {

/// Writes `n` examples to `path`: 2-6 letters a..f, never the same letter twice in a row,
/// spelled as the symbols F..A (a -> F, b -> E, ...): a monotonic one-to-one transduction.
inline void write_letter_task(const std::string& path, int n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> len(2, 6), sym(0, 5);
  std::ofstream out(path);
  for (int k = 0; k < n; ++k) {
    std::string in, o;
    int prev = -1;
    for (int i = 0, L = len(gen); i < L; ++i) {
      int s;
      do s = sym(gen); while (s == prev);
      prev = s;
      in += std::string(i ? " " : "") + char('a' + s);
      o += std::string(i ? " " : "") + char('F' - s);
    }
    out << in << "\t" << o << "\n";
  }
}

}  // namespace mona::test
