// mona/train/trainer.h: training runs, checkpoints, evaluation (LibTorch side).
//
// A checkpoint holds everything needed to decode and to resume exactly: the model
// parameters and buffers, the Adam state, the step, the position in the data order, the
// random generators (LibTorch's global one, for dropout, and the attention's noise
// generator), the best dev score so far, the effective configuration (YAML) and both
// vocabularies. It is a LibTorch archive wrapped in mona's checkpoint container
// (mona/io/files.h: magic, version, length, CRC-32) and written atomically (temporary
// file + rename), so an interrupted write never leaves a broken file; a truncated or
// corrupt checkpoint is refused with a message naming the file.
//
// Training (Trainer::run): length-bucketed batches (examples are shuffled with the seed of
// their epoch, cut into windows of 50 batches, sorted by input length inside a window,
// batched, and the batches shuffled), Adam, global-norm clipping, step learning-rate
// decay, L2 weight decay, label smoothing; every eval_every steps the dev set is decoded
// greedily with the online (hard) attention, the token and sequence error rates and the
// streaming latency (average proportion, average lagging, early token share; metrics.h;
// null when no token was emitted) logged, `last.ckpt` (written before the evaluation too, so
// that an evaluation that fails loses no training) and (when dev token error improves)
// `best.ckpt` written, and training stops early after
// `patience` evaluations without improvement. With train.threads = n each batch is cut into
// at most n shards of about equal cost (shard_batch) trained at once, one thread each, their
// gradients added; clipping and Adam then run in n parts of the parameters at once
// (PartitionedAdam, mona/train/optimizer.h). Between these parts a waiting thread polls for
// up to 2 ms before it sleeps (src/train/worker_team.h: a sleeping virtual CPU took 46-91 us
// on average to start its part). With the same seed and thread count a run is
// deterministic, and a run resumed from `last.ckpt` continues exactly as if uninterrupted.
//
// Output directory: a run holds a lock on train.output_dir while it runs
// (io::DirectoryLock; a second run there is refused). A fresh run refuses a
// train.output_dir that already holds a run
// (last.ckpt, best.ckpt or train.jsonl), changing nothing, unless told to resume it or to
// overwrite it (RunOptions). A resumed run first checks that the configuration's model
// options (every `model` key) equal the checkpoint's and refuses, naming each key that
// differs with both values, before anything is written; it then drops the records of
// train.jsonl past the checkpoint's step (rewritten atomically), so each step is logged
// once however often the run was killed and resumed. A stop request (RunOptions::stop,
// mona's SIGINT/SIGTERM) is honoured between steps and between the inputs of a dev
// evaluation (which then ends unrecorded): `last.ckpt` is saved at the step reached
// (atomically, as always) and run() returns with TrainResult::stopped set.
//
// Data: symbol sequences (TSV, mona/data/dataset.h), or for audio models (input_kind
// "audio") speech manifests (mona/data/manifest.h): every training utterance is read once
// at the start, its log-mel frames (model.features) computed and held in memory as float32
// (80 bins at a 10 ms shift: 115 MB per hour of audio), and the global mean and variance of
// the frames estimated and stored in the model (train.normalize_features); SpecAugment
// (train.spec_augment) masks each batch. Feature-frame models (input_kind "features") are
// built and streamed through mona/nn and mona/stream directly; Trainer::run refuses them.
#pragma once

#include <csignal>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "mona/data/dataset.h"
#include "mona/data/manifest.h"
#include "mona/data/vocabulary.h"
#include "mona/nn/search.h"
#include "mona/nn/seq2seq.h"
#include "mona/train/config.h"
#include "mona/train/optimizer.h"
#include "mona/io/metrics.h"

namespace mona::train {

/// A trained model with what it needs to read inputs and write outputs.
struct TrainedModel {
  Config config;
  data::Vocabulary input_vocab, output_vocab;
  std::shared_ptr<nn::Seq2Seq> model;
  int64_t step = 0;

  /// Loads a checkpoint (model in eval mode). Throws mona::Error naming the file when it is
  /// missing, truncated, corrupt or not a mona checkpoint.
  static TrainedModel load(const std::string& path);
  /// Input tokens -> ids; throws mona::Error listing the symbols outside the vocabulary.
  std::vector<int64_t> encode_input(const std::vector<std::string>& tokens) const;
  /// Output ids -> tokens.
  std::vector<std::string> decode_output(const std::vector<int64_t>& ids) const;
  /// Whether the model reads audio (ModelOptions::input_kind "audio").
  bool takes_audio() const;
  /// Audio models: the log-mel frames [T, F] float of an audio file (read, mixed down,
  /// resampled to features.sample_rate, audio::compute_fbank; normalised by the model).
  /// Throws mona::DataError naming the file when it cannot be read as audio.
  at::Tensor audio_features(const std::string& path) const;
  /// The model's input for one example's input side: symbol ids [T] int64 (unknown
  /// symbols as <unk>), or for an audio model the frames of the one audio file it names.
  at::Tensor input_tensor(const std::vector<std::string>& input) const;
};

/// The examples of a data file of `config`: a TSV dataset (mona/data/dataset.h), or for an
/// audio model a manifest (mona/data/manifest.h). `lines`, when given, receives each
/// example's 1-based line number in the file. Throws mona::DataError naming the file or
/// file:line (the audio files of a manifest are not opened).
std::vector<data::Example> read_examples(const Config& config, const std::string& path,
                                         std::vector<int64_t>* lines = nullptr);

/// Result of decoding a reference set.
struct EvalResult {
  io::ErrorCounts counts;
  /// Streaming latency (metrics.h) of greedy online decoding: each input is fed one element
  /// at a time, as a live stream receives it (stream::recognize_incrementally), and g(i) is
  /// the number of elements received when output token i appeared. Empty (no sequences) for beam search (its best
  /// hypothesis can change until the end, and mona's beam search commits only then) and for
  /// expected-alignment decoding (offline). The tokens are the same as when the whole input
  /// is accepted at once, unless the search's </s> rule asks whether the input is still
  /// arriving (nn::SearchOptions::eos_only_after_input, eos_only_at_last_entry), in which
  /// case beam search is fed one element at a time too; `seconds` includes the per-element
  /// calls (for the G2P recipe's models about a third more time than whole-word decoding).
  io::LatencyCounts latency;
  /// Emission delays after each word's end (io::EmissionDelays), for greedy online decoding
  /// of an audio model when evaluate() is given word times: output token i counts as emitted
  /// when the audio of the last feature frame read was complete, at the end of frame
  /// g(i) - 1 (audio::FbankOptions::frame_end_ms, ms after the start; as the stream's
  /// times_ms, but not capped at the end of the audio). Empty otherwise.
  io::EmissionDelays word_delays;
  /// One decoded input: its index into evaluate()'s `sets` and its counts.
  struct Scored {
    size_t set_index = 0;
    io::ErrorCounts counts;
  };
  /// Every decoded input, in decoding order (their counts sum to `counts`): error rates of a
  /// subset of the inputs without decoding them again (mona eval: by voice group).
  std::vector<Scored> scored;
  int64_t inputs = 0;
  /// EvalProgress::stop ended the evaluation early: `inputs` is less than asked for.
  bool stopped = false;
  /// Inputs decoded at once (evaluate()'s `threads`, at most the number of inputs).
  int64_t threads = 1;
  /// Wall-clock time of the whole evaluation (the throughput: inputs_per_second).
  double seconds = 0;
  /// The sum over the inputs of the wall-clock time spent on each: reading it (for audio,
  /// its features) and decoding it, on whichever thread decoded it. What one stream costs,
  /// whatever the number of threads (with one thread, `seconds` less the set-up).
  double decode_seconds = 0;
  /// Audio models: seconds of audio up to the end of each decoded input's last feature
  /// frame (audio::FbankOptions::frame_end_ms(frames - 1)), summed: each waveform's length
  /// to within one frame shift short of it with snip_edges, at most half a window past it
  /// without; 0 otherwise.
  double audio_seconds = 0;
  double inputs_per_second() const { return seconds > 0 ? inputs / seconds : 0; }
  /// decode_seconds / audio_seconds (audio models; 0 otherwise), a stream's own real-time
  /// factor: below 1 is faster than real time. Decoding several inputs at once raises the
  /// throughput, not this.
  double real_time_factor() const { return audio_seconds > 0 ? decode_seconds / audio_seconds : 0; }
};

/// Where evaluate() shows its progress (mona/io/log.h, counting display, one update per
/// input): nowhere when `out` is null.
struct EvalProgress {
  std::ostream* out = nullptr;
  bool is_tty = false;         ///< a bar redrawn in place; otherwise plain lines
  std::string label = "eval";  ///< printed before the count
  /// Polled before each input (a training run's RunOptions::stop): when it holds a non-zero
  /// value, evaluate() takes no further input and returns what it decoded, with
  /// EvalResult::stopped set. Null: runs to the end.
  const volatile std::sig_atomic_t* stop = nullptr;
};

/// Decodes every input of `sets` (or `limit` of them, evenly spaced, 0 = all) and scores it against its
/// references. `expected_attention` decodes with the soft expected alignment instead of
/// the online hard attention (decode_with_expected_alignment). Inputs with unknown symbols are mapped to <unk>. Throws
/// mona::Error when `sets` is empty or `limit` is negative (an error rate of nothing is no
/// result). `word_times` (audio models; data::read_word_times, keyed by the audio path of
/// sets[k].input) adds EvalResult::word_delays; an input it lacks, or whose words differ
/// from the input's first reference, is a mona::DataError naming the audio file.
///
/// `threads` inputs are decoded at once, each on its own thread with one operator thread
/// (nn::run_operators_on_this_thread) and its own model replica computing with `t`'s
/// parameters: whole inputs in parallel, which is what scales on a few cores (an input's
/// own operators are too small to share; bench/notes.md). Each input is decoded as it would
/// be alone, and the results are added up in input order, so that everything but the times
/// is the same for every thread count. When inputs fail, the error of the first of them in
/// input order is thrown (the others stop taking inputs). Throws mona::ArgumentError when
/// threads < 1.
EvalResult evaluate(const TrainedModel& t, const std::vector<data::ReferenceSet>& sets,
                    const nn::SearchOptions& search, bool expected_attention = false,
                    int64_t limit = 0, const EvalProgress& progress = {},
                    const data::WordTimes* word_times = nullptr, int64_t threads = 1);

/// Decodes one input offline with the soft expected alignment instead of the online hard
/// attention: the encoder reads the whole input (`input_ids`, T ids of t.input_vocab), the
/// attention's memory is prepared for one sequence (T' entries: T + 1 when the model
/// appends </s>), and nn::decode_expected searches, greedily or with a beam as `search`
/// says, attending at each step with the expected alignment of training, in eval mode and
/// without noise (hard monotonic attention: 002 eqs. 9-14; MoChA: 000 eq. 17; MAtChA:
/// 000 App. C; soft and GMM attention use their usual weights). Offline: nothing is emitted
/// before the input ends. Puts the model in eval mode (as evaluate() does) and records no
/// gradients. Returns the best hypothesis: output token ids (no <s>, </s>), per token the
/// memory entry of largest weight, and its score (log-probability). Throws
/// mona::ArgumentError when an id lies outside [0, input vocabulary size) or `search` is
/// invalid.
nn::Hypothesis decode_with_expected_alignment(const TrainedModel& t, const std::vector<int64_t>& input_ids,
                                              const nn::SearchOptions& search);
/// The same for a model input as TrainedModel::input_tensor returns it (ids [T] or audio
/// frames [T, F]); ids are not range-checked here (the encoder checks them).
nn::Hypothesis decode_with_expected_alignment(const TrainedModel& t, const at::Tensor& inputs,
                                              const nn::SearchOptions& search);

/// Teacher-forced expected attention weights [U+1, T'] of one example (for plots); T' is
/// the memory length (the encoder's output_length of the input, with </s> when the model
/// appends it and time reduction; one more with p_eos > 0).
std::vector<float> alignment_weights(const TrainedModel& t, const data::Example& example);

/// Labels of the memory entries of an input, for plots: the input token each entry keeps
/// (its tokens, and "</s>" when the model appends it; with time reduction every 2^r-th;
/// audio: every 10th entry's time, the end of the last frame it has read, as
/// audio::FbankOptions::frame_end_ms gives it), and "EOS frame" for 003's frame
/// (ModelOptions::p_eos > 0), so that there is one label per column of alignment_weights.
std::vector<std::string> memory_labels(const TrainedModel& t, const std::vector<std::string>& input);

/// Outcome of a run.
struct TrainResult {
  int64_t steps = 0;
  double minutes = 0;
  /// The best dev token error rate of the run (a resumed run's included): empty when no dev
  /// evaluation took place (no data.dev, or a stop before the first one). Without data.dev,
  /// best_checkpoint holds the model of the last evaluation step (at the end: the final one).
  std::optional<double> best_token_error_rate;
  std::string best_checkpoint, last_checkpoint;
  bool early_stopped = false;
  /// Non-zero when RunOptions::stop ended the run early: the value it held (mona: the
  /// signal number). last_checkpoint then holds the state at `steps`.
  int stopped = 0;
};

/// How data-parallel training (train.threads = n > 1) cuts a batch into at most n shards, one
/// per thread. A recurrent pass over a padded shard of r rows takes about
/// (fixed_rows + r) * S: S is its longest row's sequential steps (encoder memory entries plus
/// output tokens, each a step whose operators cost a fixed dispatch plus arithmetic per row),
/// and fixed_rows is that fixed cost in rows' worth of arithmetic. The shards minimise the
/// largest such cost, so that no thread waits long for another: `steps[b]` is row b's S.
/// Returns the shards as lists of row positions into `steps` (each non-empty, rows in
/// descending order of steps, ties by position; every row in exactly one). The shards are
/// contiguous in that order (a shard's cost depends only on its size and its longest row, so
/// an optimal cut never needs to interleave rows), each taking as many rows as fit under a
/// bound that bisection lowers to the optimum (to a relative 1e-12). Deterministic: it
/// depends on the lengths only. Throws mona::ArgumentError when `steps` is empty or holds a
/// value < 1, when `shards` < 1 or `fixed_rows` is negative or not finite.
std::vector<std::vector<size_t>> shard_batch(const std::vector<int64_t>& steps, size_t shards, double fixed_rows);

/// How Trainer::run starts, shows progress and stops (see the header comment).
struct RunOptions {
  /// Continue from output_dir/last.ckpt (its model options must equal the configuration's).
  bool resume = false;
  /// Start afresh in an output_dir that holds a run: its last.ckpt, best.ckpt and plots are
  /// removed and train.jsonl restarted. Excludes `resume`.
  bool overwrite = false;
  /// Progress (training, and each dev evaluation) as a bar redrawn in place; otherwise plain
  /// lines.
  bool progress_is_tty = false;
  /// Polled before every step; when it holds a non-zero value the run saves last.ckpt at the
  /// step reached and returns with TrainResult::stopped set to it. Null: never stops early.
  const volatile std::sig_atomic_t* stop = nullptr;
};

/// A training run (see the header comment).
class Trainer {
 public:
  /// Throws mona::ArgumentError naming the key for an invalid configuration (Config::validate).
  explicit Trainer(Config config);
  /// Trains (see RunOptions). Progress and notices (e.g. a thread count clamped to the
  /// machine's) go to `progress_out`. Throws mona::Error, with nothing on disk changed, when
  /// model.input_kind is "features" (mona::ArgumentError naming it: the trainer reads symbols
  /// or audio), when the output directory holds a run and neither resume nor overwrite is
  /// set, when a training or dev file cannot be read (an audio file of either manifest
  /// included: mona::DataError naming data.train or data.dev, manifest:line and the file),
  /// or when the checkpoint to resume does not match the configuration.
  TrainResult run(const RunOptions& options, std::ostream& progress_out);

 private:
  Config config_;
};

/// Writes a checkpoint of `t` (and, for resumption, the optimizer and run state).
struct RunState {
  /// best_ter before any dev evaluation (a finite stand-in for infinity: checkpoints store it).
  static constexpr double kNoDevScore = 1e300;
  int64_t epoch = 0, position = 0;  ///< next batch: epoch and batch index within it
  double best_ter = kNoDevScore;    ///< best dev token error rate so far
  int64_t bad_evals = 0;            ///< dev evaluations since the last improvement
  /// The log's window since its last "train" record: the summed loss and CTC term and the
  /// steps they came from (train.jsonl's "loss" averages them), so that a resumed run
  /// writes the records an uninterrupted one writes.
  double window_loss = 0, window_ctc = 0;
  int64_t window_steps = 0;
  /// Minutes the run has trained, over all its processes up to the checkpoint: the log's
  /// "minutes" go on from there after a resumption (train.max_minutes is a budget per process).
  double minutes = 0;
  /// Whether a dev evaluation has set best_ter.
  bool has_dev_score() const { return best_ter < kNoDevScore; }
};
class CheckpointIO {
 public:
  static void save(const std::string& path, const TrainedModel& t, const PartitionedAdam* optimizer,
                   const RunState& run);
  /// Loads into an existing model/optimizer (resumption). Throws mona::Error naming the file
  /// when its model options (the `model` keys of its configuration) differ from t.config's,
  /// listing each differing key with both values, or its vocabularies differ from t's.
  static RunState load_into(const std::string& path, TrainedModel& t, PartitionedAdam* optimizer);
};

}  // namespace mona::train
