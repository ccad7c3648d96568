// mona/train/metrics.h: token and sequence error rates by edit distance, with several
// references per input (the best match counts).
//
// Edit distance is the Levenshtein distance over tokens: the least number of insertions,
// deletions and substitutions turning one sequence into the other, each costing 1.
// Computed row by row, D[i][j] = min(D[i-1][j] + 1, D[i][j-1] + 1,
// D[i-1][j-1] + [a_i != b_j]), in O(|a| |b|) time and O(min(|a|, |b|)) memory.
//
// Scoring one hypothesis h against references r_1..r_K (K >= 1):
//   best reference  r* = argmin_k edit_distance(h, r_k); ties go to the reference with MORE
//                   tokens (so the reported rate is the lower one), then to the first.
//   token_errors    = edit_distance(h, r*),  ref_tokens = |r*|
//   sequence_errors = 1 unless some reference equals h exactly (then 0),  sequences = 1
// Corpus rates are ratios of sums (not means of per-sequence rates):
//   token error rate    = sum token_errors / sum ref_tokens   (TER; WER/PER by task)
//   sequence error rate = sum sequence_errors / sum sequences (WER in g2p papers)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mona::train {

/// Levenshtein distance between token sequences (unit costs).
int64_t edit_distance(const std::vector<std::string>& a, const std::vector<std::string>& b);

/// Error counts, summed over a corpus with add().
struct ErrorCounts {
  int64_t token_errors = 0, ref_tokens = 0, sequence_errors = 0, sequences = 0;

  void add(const ErrorCounts& other);

  /// token_errors / ref_tokens; 0 when both are 0; +infinity when only ref_tokens is 0
  /// (only possible with empty references).
  double token_error_rate() const;

  /// sequence_errors / sequences; 0 when sequences is 0.
  double sequence_error_rate() const;
};

/// Scores `hypothesis` against the best-matching of `references` (see the file comment).
/// Throws mona::Error if `references` is empty.
ErrorCounts score(const std::vector<std::string>& hypothesis,
                  const std::vector<std::vector<std::string>>& references);

}  // namespace mona::train
