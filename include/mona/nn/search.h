// mona/nn/search.h: greedy and beam search over the decoder, online (hard attention over
// a growing memory) or offline with the soft expected alignment.
//
// Online search (OnlineSearch) runs the decoder's hard step (002 Algorithm 1, 000
// Algorithm 1) and advances as far as the memory received so far allows: a hypothesis whose
// attention needs more input blocks the search until more arrives; nothing is recomputed
// when it resumes (the scan position and finished expansions are kept). Feeding the input
// one element at a time therefore gives exactly the result of decoding the whole input,
// except under SearchOptions::eos_only_after_input and eos_only_at_last_entry: their rules
// ask whether the input is finished when a step is taken, which a whole input given at once
// (Recognizer::recognize) is from the first step, so they change nothing there; they are
// for streams (mona stream, and train::evaluate, which feeds the input one element at a time
// when either is set).
//
// Beam search keeps at most `beam` hypotheses (rank pruning) and drops those whose score
// (total log-probability) is more than `prune_margin` below the best candidate (000 A.1 uses
// 8 and 3). Hypotheses end with </s>; the search ends when the best finished hypothesis
// scores at least as well as every live one. Scores are not length-normalised.
//
// Maximum output length guard: a hypothesis may have at most
//   length_ratio * (memory entries available) + length_bonus
// tokens. While input is still arriving a hypothesis at the limit waits; once the input
// is finished, reaching the limit ends it (without </s>).
#pragma once

#include <optional>
#include <vector>

#include "mona/nn/seq2seq.h"

namespace mona::nn {

/// Decoding settings.
struct SearchOptions {
  int64_t beam = 0;            ///< 0: greedy; >= 1: beam search with that many hypotheses
  double prune_margin = 3.0;   ///< beam only: drop candidates this far (log-probability) below the best
  double length_ratio = 2.0;   ///< output length guard: ratio * T + bonus
  int64_t length_bonus = 10;
  /// Long-form streaming: </s> is not chosen while input is still arriving (the best other
  /// token is), so that a stream of any length is transcribed to its end; once the input
  /// is finished </s> is allowed again. Off by default (a model trained on utterances
  /// ends each one with </s>). Online search only; a rule on when the input finishes, so the
  /// result depends on how the input arrives (see the header comment).
  bool eos_only_after_input = false;
  /// 003's long-form rule (sec. 4.2, its test-long set): </s> only from a step whose
  /// attention reached the memory's last entry (HardStepOutput::index; the window's end for
  /// the GMM family), or scanned past it (kExhausted), of a finished input: with
  /// ModelOptions::p_eos, the EOS frame. Implies eos_only_after_input. Off by default.
  /// Online search only.
  bool eos_only_at_last_entry = false;
  /// Bounds of the length guard: far above any real output (a G2P word or an utterance
  /// needs a ratio of about 1-2), and low enough that ratio * T + bonus stays an exact
  /// int64 for any memory a machine can hold (beyond them the limit overflowed, and every
  /// hypothesis ended at once or never).
  static constexpr double kMaxLengthRatio = 1000;
  static constexpr int64_t kMaxLengthBonus = 1000000;
  /// The length guard: at most floor(length_ratio * entries) + length_bonus tokens for a
  /// memory of `entries` entries (>= 0), as online and expected decoding apply it.
  int64_t max_tokens(int64_t entries) const;
  /// Throws mona::ArgumentError naming the field and its value unless beam >= 0,
  /// prune_margin is finite and > 0, length_ratio lies in (0, kMaxLengthRatio] and
  /// length_bonus in [0, kMaxLengthBonus].
  void validate() const;
};

/// One decoding hypothesis.
struct Hypothesis {
  std::vector<int64_t> tokens;     ///< output token ids, without <s> and </s>
  std::vector<int64_t> positions;  ///< memory index attended when each token was emitted
  double score = 0.0;              ///< total log-probability (incl. </s> when ended by it)
  bool finished = false;           ///< ended by </s> or by the length guard
  bool ended_by_eos = false;
  DecoderState state;              ///< decoder state after the last token
  std::optional<DecoderStep> pending;  ///< expansion computed but not yet used
};

/// Incremental search over a stream's memory (see header comment).
class OnlineSearch {
 public:
  explicit OnlineSearch(SearchOptions options);
  /// Starts over (new utterance) with the decoder's initial state.
  void reset(const Decoder& decoder);
  /// Advances as far as the memory allows; returns whether any step was taken.
  bool advance(Decoder& decoder, const OnlineMemory& memory);
  /// No further tokens will come.
  bool done() const { return done_; }
  /// Whether advance() could make progress right now (input arrived or finished since the
  /// last blocked attempt).
  bool blocked_on(const OnlineMemory& memory) const;
  /// The best hypothesis so far: the best finished one when done, else the best live one
  /// (a finished one only while none is live).
  const Hypothesis& best() const;
  /// The first memory entry that any live hypothesis can still read (the minimum of
  /// Attention::first_needed over their states; memory.size() when the search is done):
  /// the entries before it can be released (OnlineMemory::release_before).
  int64_t first_needed(const Attention& attention, const OnlineMemory& memory) const;

 private:
  bool advance_greedy(Decoder& decoder, const OnlineMemory& memory);
  bool advance_beam(Decoder& decoder, const OnlineMemory& memory);
  int64_t limit(const OnlineMemory& memory) const;
  bool eos_allowed(const OnlineMemory& memory, const DecoderStep& step) const;
  SearchOptions options_;
  std::vector<Hypothesis> live_, finished_;
  bool done_ = false;
  int64_t blocked_size_ = -1;  // memory size at the last blocked attempt
  bool blocked_finished_ = false;
};

/// Offline decoding of one input with the soft expected alignment (the training
/// computation in eval mode, no noise): `memory` is a prepared memory with B = 1.
Hypothesis decode_expected(Decoder& decoder, const Memory& memory, const SearchOptions& options);

}  // namespace mona::nn
