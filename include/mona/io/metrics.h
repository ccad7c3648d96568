// mona/io/metrics.h: token and sequence error rates by edit distance, with several
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
//
// Latency of streaming decoding. For output token i (1-based, </s> excluded) of an input
// of n elements, g(i) is the number of input elements read when the token was emitted
// (n when it came only after the end of the input). With a causal encoder that is the
// chosen memory entry t_i plus one for hard monotonic attention, MoChA and MAtChA (t_i
// is the last entry of the chunk), n for attention on the appended </s>, for soft
// attention and for an attention that ran past the end; SAGMM-tr needs the first entry
// past its window. With |y| output tokens and r = |y| / n:
//   average proportion  AP = sum_i g(i) / (n |y|)                  (Cho & Esipova, 2016)
//                       in (0, 1]; 1 is offline (every token waits for the whole input)
//   average lagging     AL = (1/tau) sum_{i=1..tau} [g(i) - (i - 1) / r]
//                       tau = the first i with g(i) = n (|y| if none)  (Ma et al., 2019)
//                       in input elements: how far behind an ideal reader that emits
//                       at the rate r the decoder runs, up to the end of the input
//   early token share   = tokens with g(i) < n / all tokens: what streaming gains
// AP and AL are averaged over sequences with at least one output token; the share is a
// ratio of sums.
//
// Emission delay (speech, where the time of each reference word in the audio is known):
// for each hypothesis word that one minimum-edit-distance alignment pairs with an equal
// reference word, the time at which the decoder emitted it minus the time the word's
// speech ends, in milliseconds (negative: emitted before the word was over). Reported as
// the mean and the 90th percentile over all such words of a corpus.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mona::io {

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

/// Latency sums over a corpus (see the file comment), with add().
struct LatencyCounts {
  double proportion_sum = 0;  ///< sum over sequences of AP
  double lagging_sum = 0;     ///< sum over sequences of AL
  int64_t sequences = 0;      ///< sequences with at least one output token
  int64_t tokens = 0;         ///< output tokens
  int64_t early_tokens = 0;   ///< tokens with g(i) < n

  void add(const LatencyCounts& other);
  /// Mean AP over sequences; 0 when there are none.
  double average_proportion() const;
  /// Mean AL over sequences, in input elements; 0 when there are none.
  double average_lagging() const;
  /// early_tokens / tokens; 0 when there are no tokens.
  double early_token_share() const;
};

/// Latency of one decoded sequence: `read[i]` is g(i + 1), the number of input elements
/// read when output token i + 1 was emitted, for an input of `input_length` elements.
/// Throws mona::Error naming the argument if input_length < 1, if some read[i] lies
/// outside [1, input_length], or if read is not non-decreasing (a streaming decoder
/// cannot emit a token before the one preceding it). An empty `read` (no output
/// tokens) gives all-zero counts.
LatencyCounts latency(const std::vector<int64_t>& read, int64_t input_length);

/// The pairs (i, j) with hypothesis[i] == reference[j] that one minimum-edit-distance
/// alignment of the two matches, increasing in i and in j (a backtrace of the Levenshtein
/// table preferring a match, then a substitution, then a deletion). O(|h| |r|) time and
/// memory.
std::vector<std::pair<size_t, size_t>> matched_tokens(const std::vector<std::string>& hypothesis,
                                                      const std::vector<std::string>& reference);

/// Emission delays of a corpus in ms (see the file comment), with add().
struct EmissionDelays {
  std::vector<double> ms;  ///< one per matched word, in the order they were added

  void add(const EmissionDelays& other);
  /// Mean; 0 when empty.
  double mean() const;
  /// The q-quantile, 0 <= q <= 1, interpolated linearly between the order statistics
  /// (position q (n - 1) of the sorted delays); 0 when empty. Throws mona::Error for q
  /// outside [0, 1].
  double quantile(double q) const;
};

/// Emission delays of one utterance: hypothesis word i was emitted at emitted_ms[i] (ms of
/// audio received), reference word j ends at reference_end_ms[j]; one delay per pair of
/// matched_tokens. Throws mona::Error naming the argument when emitted_ms and hypothesis,
/// or reference_end_ms and reference, differ in length.
EmissionDelays emission_delays(const std::vector<std::string>& hypothesis, const std::vector<double>& emitted_ms,
                               const std::vector<std::string>& reference,
                               const std::vector<double>& reference_end_ms);

}  // namespace mona::io
