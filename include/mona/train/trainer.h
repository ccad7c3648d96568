// mona/train/trainer.h: training runs, checkpoints, evaluation (LibTorch side).
//
// A checkpoint holds everything needed to decode and to resume exactly: the model
// parameters and buffers, the Adam state, the step, the position in the data order, the
// random generators (LibTorch's global one, for dropout, and the attention's noise
// generator), the best dev score so far, the effective configuration (YAML) and both
// vocabularies. It is a LibTorch archive wrapped in mona's checkpoint container
// (mona/train/files.h: magic, version, length, CRC-32) and written atomically (temporary
// file + rename), so an interrupted write never leaves a broken file; a truncated or
// corrupt checkpoint is refused with a message naming the file.
//
// Training (Trainer::run): length-bucketed batches (examples are shuffled with the seed of
// their epoch, cut into windows of 50 batches, sorted by input length inside a window,
// batched, and the batches shuffled), Adam, global-norm clipping, step learning-rate
// decay, L2 weight decay, label smoothing; every eval_every steps the dev set is decoded
// greedily with the online (hard) attention, the token and sequence error rates and the
// streaming latency (average proportion, average lagging, early token share; metrics.h;
// null when no token was emitted) logged, `last.ckpt` and (when dev token error improves)
// `best.ckpt` written, and training stops early after
// `patience` evaluations without improvement. With the same seed and thread count a run is
// deterministic, and a run resumed from `last.ckpt` continues exactly as if uninterrupted.
//
// Symbol-sequence data (TSV, mona/data/dataset.h) only: feature-frame models are built and
// streamed through mona/nn and mona/stream directly.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "mona/data/dataset.h"
#include "mona/data/vocabulary.h"
#include "mona/nn/seq2seq.h"
#include "mona/train/config.h"
#include "mona/train/metrics.h"

namespace mona::train {

/// A trained model with what it needs to read inputs and write outputs.
struct Transducer {
  Config config;
  data::Vocabulary input_vocab, output_vocab;
  std::shared_ptr<nn::Seq2Seq> model;
  int64_t step = 0;

  /// Loads a checkpoint (model in eval mode). Throws mona::Error naming the file when it is
  /// missing, truncated, corrupt or not a mona checkpoint.
  static Transducer load(const std::string& path);
  /// Input tokens -> ids; throws mona::Error listing the symbols outside the vocabulary.
  std::vector<int64_t> encode_input(const std::vector<std::string>& tokens) const;
  /// Output ids -> tokens.
  std::vector<std::string> decode_output(const std::vector<int64_t>& ids) const;
};

/// Result of decoding a reference set.
struct EvalResult {
  ErrorCounts counts;
  /// Streaming latency (metrics.h) of greedy online decoding: each input is fed one element
  /// at a time, as a live stream receives it, and g(i) is the number of elements received
  /// when output token i appeared. Empty (no sequences) for beam search (its best
  /// hypothesis can change until the end, and mona's beam search commits only then) and for
  /// expected-alignment decoding (offline). The tokens are the same as when the whole input
  /// is accepted at once; `seconds` includes the per-element calls (for the G2P recipe's
  /// models about a third more time than whole-word decoding).
  LatencyCounts latency;
  int64_t inputs = 0;
  double seconds = 0;
  double inputs_per_second() const { return seconds > 0 ? inputs / seconds : 0; }
};

/// Decodes every input of `sets` (or `limit` of them, evenly spaced, 0 = all) and scores it against its
/// references. `expected_attention` decodes with the soft expected alignment instead of
/// the online hard attention. Inputs with unknown symbols are mapped to <unk>.
EvalResult evaluate(const Transducer& t, const std::vector<data::ReferenceSet>& sets,
                    const nn::SearchOptions& search, bool expected_attention = false,
                    int64_t limit = 0);

/// Teacher-forced expected attention weights [U+1, T'] of one example (for plots); T' is
/// the memory length (T + 1 when the model appends </s>).
std::vector<float> alignment_weights(const Transducer& t, const data::Example& example);

/// Labels of the memory entries of an input, for plots: its tokens, plus "</s>" when the
/// model appends it.
std::vector<std::string> memory_labels(const Transducer& t, const std::vector<std::string>& input);

/// Outcome of a run.
struct TrainResult {
  int64_t steps = 0;
  double minutes = 0;
  double best_token_error_rate = 0;
  std::string best_checkpoint, last_checkpoint;
  bool early_stopped = false;
};

/// A training run (see the header comment).
class Trainer {
 public:
  explicit Trainer(Config config);
  /// Trains; with `resume`, continues from output_dir/last.ckpt. Progress goes to
  /// `progress_out` (a bar on a terminal, plain lines otherwise).
  TrainResult run(bool resume, std::ostream& progress_out);

 private:
  Config config_;
};

/// Writes a checkpoint of `t` (and, for resumption, the optimizer and run state).
struct RunState {
  int64_t epoch = 0, position = 0;  ///< next batch: epoch and batch index within it
  double best_ter = 1e300;
  int64_t bad_evals = 0;
};
class CheckpointIO {
 public:
  static void save(const std::string& path, const Transducer& t, const torch::optim::Optimizer* optimizer,
                   const RunState& run);
  /// Loads into an existing model/optimizer (resumption).
  static RunState load_into(const std::string& path, Transducer& t, torch::optim::Optimizer* optimizer);
};

}  // namespace mona::train
