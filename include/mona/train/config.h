// mona/train/config.h: every hyperparameter of a training run, with defaults, read from
// and written to YAML. Unknown keys are refused (a typo never silently falls back to a
// default); values of the wrong type or range are refused naming the key and the value; a
// key an earlier version called otherwise is refused naming its new name.
//
//   data:    train, dev, test: TSV files (mona/data/dataset.h); for audio models,
//            manifests (audio path TAB transcript, mona/data/manifest.h). Training reads
//            train and dev; test is not read: it records, in the run's config.yaml and
//            checkpoints, which set the run is to be scored on (`mona eval CKPT DATA`)
//   model:   nn::ModelOptions (mona/nn/seq2seq.h); model.attention: type (one of
//            nn::mechanisms(), mona/nn/attention.h) and nn::AttentionOptions, the GMM
//            family's under model.attention.gmm (nn::GmmAttentionOptions)
//   train:   RunConfig below, with train.optimizer and train.smoothing
//   decode:  nn::SearchOptions (mona/nn/search.h)
//
// The keys are the member names; the one list of them (and of the run settings' ranges) is
// visit_config in src/train/config.cc, which the reader, the writer and validate() walk.
// config_to_yaml(Config{}) prints every key with its default.
//
// Defaults follow the papers where they say something: Adam beta1 0.9, beta2 0.999,
// eps 1e-6 (002 D.1, 000 A.1), global-norm clipping, L2 weight decay 1e-6 (000 A.1),
// r initialised to -4 (000), beam 8 with prune margin 3 when beam search is used.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "mona/audio/spec_augment.h"
#include "mona/nn/search.h"
#include "mona/nn/seq2seq.h"

namespace mona::train {

struct OptimizerConfig {
  double learning_rate = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-6;
  double clip_norm = 1.0;        ///< global gradient norm clip (0: off)
  double weight_decay = 1e-6;    ///< L2 coefficient
  int64_t decay_every = 0;       ///< multiply the learning rate by decay_factor every N steps (0: never)
  double decay_factor = 0.5;
};

struct RunConfig {
  std::string output_dir = "runs/default";
  uint64_t seed = 1;
  /// A checkpoint whose parameters and buffers (the feature normalisation included) start
  /// this run instead of random ones: fine-tuning, e.g. 003 Table 4a's SAGMM-fixed from the
  /// adaptive model. Every parameter and buffer of this run's model must be in it under its
  /// name with the same shape; the model options may otherwise differ (the attention type,
  /// ctc_weight, dropout, ...); what this model lacks (e.g. a CTC head) is left out and
  /// listed. The run keeps the checkpoint's vocabularies (training data with a token outside
  /// them is refused). Only the model: optimizer, step and random state start afresh. Read
  /// by a fresh run, ignored by a resumed one (its own last.ckpt). Empty: none.
  std::string init_from;
  int64_t threads = 2;           ///< shards of each batch trained in parallel, one thread each
                                 ///< (TrainingRun; determinism needs a fixed count)
  int64_t batch_size = 32;
  int64_t max_steps = 10000;
  double max_minutes = 0;        ///< wall-clock budget (0: none)
  int64_t eval_every = 500;
  int64_t eval_limit = 0;        ///< dev inputs per evaluation (0: all)
  int64_t patience = 0;          ///< early stop after N evaluations without improvement (0: off)
  int64_t log_every = 50;
  int64_t plot_every = 0;        ///< alignment PNGs every N steps (0: only at the end)
  int64_t plot_examples = 2;
  OptimizerConfig optimizer;
  nn::SmoothingOptions smoothing;
  /// Length penalty of 003 eq. 13 for the GMM family (ignored by other mechanisms);
  /// lambda = 0 switches it off.
  double length_penalty = 0.0;
  /// Training step from which it is off (nn::LengthPenaltyOptions::until_step's default, 003).
  int64_t length_penalty_until = nn::LengthPenaltyOptions{}.until_step;
  /// Audio and feature models: estimate the global mean and variance of the training
  /// frames (audio::GlobalCmvn) and store them in the model, which normalises every frame
  /// with them (nn::Encoder::normalize), in training and in decoding.
  bool normalize_features = true;
  /// Audio models: SpecAugment's time warp and masks on the training frames
  /// (mona/audio/spec_augment.h), drawn from the run's seed; none by default (no warp,
  /// 0 masks).
  audio::SpecAugmentOptions spec_augment = no_spec_augment();

  static audio::SpecAugmentOptions no_spec_augment() {
    audio::SpecAugmentOptions a;
    a.num_freq_masks = 0;
    a.num_time_masks = 0;
    return a;
  }
};

struct DataConfig {
  std::string train, dev, test;  ///< test: recorded only (see the header comment)
};

/// A whole run.
struct Config {
  DataConfig data;
  nn::ModelOptions model;
  RunConfig train;
  /// Decoding of `mona eval` / `decode` (beam 8, prune margin 3: 000 A.1). Dev evaluation
  /// during training always decodes greedily, for speed.
  nn::SearchOptions decode = default_decode();

  static nn::SearchOptions default_decode() {
    nn::SearchOptions s;
    s.beam = 8;
    s.prune_margin = 3.0;
    return s;
  }

  /// Throws mona::ArgumentError for an invalid value, naming it: the run settings' by key
  /// ("train.batch_size must be >= 1, got 0"); the sections whose structs check themselves
  /// by the section and the struct's message, which names the field and the value:
  /// model (nn::ModelOptions::validate), model.features (audio models,
  /// audio::FbankOptions::validate), model.attention (nn::AttentionOptions::validate, e.g.
  /// "model.attention: chunk_size w must be >= 1, got 0"), train.spec_augment
  /// (audio::SpecAugmentOptions::validate) and decode (nn::SearchOptions::validate). The
  /// vocabulary sizes, which only the training data gives, are checked when the model is
  /// built, not here.
  void validate() const;
};

/// The model options a run builds its model with: `model` with the vocabulary sizes of its
/// data (input_vocab, output_vocab) and, for audio models, feature_dim =
/// features.num_bins(). Checks nothing (Config::validate checks these options).
nn::ModelOptions with_data_sizes(const nn::ModelOptions& model, int64_t input_vocab, int64_t output_vocab);

/// Reads a configuration; missing keys keep their defaults, unknown keys are errors.
/// `source` names the file in messages; `overrides` are the assignments ("a.b=value",
/// config_io.h) applied to `root` after reading it, so that an error about a key one of them
/// set (or created) names that assignment instead: "--set train.bogus=3: unknown key ...".
Config config_from_yaml(const YAML::Node& root, const std::string& source,
                        const std::vector<std::string>& overrides = {});
/// Renames, in place, the keys of a configuration written by an earlier version of mona (as
/// stored in its checkpoints) to today's names: model.attention.threshold -> tau,
/// model.attention.num_heads and gmm_* -> model.attention.gmm.*, decode.threshold ->
/// prune_margin. Configuration files given by a user are not migrated:
/// an old key there is an error naming the new one.
void migrate_config(YAML::Node& root);
/// The full effective configuration (every key, defaults included).
YAML::Node config_to_yaml(const Config& config);
/// io::load_yaml(path) + overrides ("a.b=value") + config_from_yaml.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

/// `config` (a trained model's, say) with assignments ("decode.key=value") to its decode
/// settings, the only ones that can change after training: e.g. a model trained with
/// decode.eos_only_at_last_entry evaluated without it. `source` names the configuration in
/// messages. Throws mona::Error naming the assignment for a key outside decode, an
/// unknown key or a bad value.
Config with_decode_overrides(const Config& config, const std::vector<std::string>& overrides,
                             const std::string& source);

/// The thread count to use for `requested`, given as `what` (an option or configuration
/// key, e.g. "--threads" or "train.threads"): below 1 throws mona::Error naming `what` and
/// the value; above the machine's hardware threads (std::thread::hardware_concurrency(),
/// when known) returns that number and, when `notice` is not null, writes one line to it
/// saying so. The one check for mona's --threads and for train.threads.
int64_t usable_threads(int64_t requested, const std::string& what, std::ostream* notice);

}  // namespace mona::train
