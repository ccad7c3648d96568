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

/// Writes a run of the letter task into `dir`: train.tsv (100 examples), dev.tsv (8) and
/// cfg.yaml, a small monotonic-attention model training into dir/run with the given `train`
/// keys (YAML flow mapping entries, e.g. "max_steps: 10, threads: 1"). Returns cfg.yaml's path.
inline std::string write_letter_run(const std::string& dir, const std::string& train) {
  write_letter_task(dir + "/train.tsv", 100, 9);
  write_letter_task(dir + "/dev.tsv", 8, 10);
  std::ofstream cfg(dir + "/cfg.yaml");
  cfg << "data: {train: " << dir << "/train.tsv, dev: " << dir << "/dev.tsv}\n"
      << "model: {embedding_dim: 8, encoder_layers: 1, encoder_hidden: 16, decoder_embedding_dim: 8,\n"
      << "        decoder_hidden: 16, attention: {type: monotonic, monotonic_energy: dot, init_r: -1}}\n"
      << "train: {output_dir: " << dir << "/run, " << train << "}\n";
  return dir + "/cfg.yaml";
}

}  // namespace mona::test
