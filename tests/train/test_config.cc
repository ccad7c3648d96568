// Run configurations (mona/train/config.h): every key is read into its field and written
// back, ranges are checked naming the key, keys of earlier versions are refused naming the
// new key in files and migrated in checkpoints.
#include "mona/train/config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "mona/core/error.h"
#include "mona/io/yaml.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

// A configuration that sets every key to something other than its default, written out
// by hand (not by config_to_yaml), so that reader and writer are checked against it.
const char* kEveryKey = R"(
data: {train: a.tsv, dev: b.tsv, test: c.tsv}
model:
  input_kind: features
  feature_dim: 40
  embedding_dim: 7
  append_eos: false
  conv_channels: 5
  encoder_layers: 3
  encoder_hidden: 11
  bidirectional: true
  lookahead: 0
  projection_dim: 13
  time_reduction_layers: 0
  decoder_embedding_dim: 17
  decoder_hidden: 19
  dropout: 0.25
  p_eos: 0.125
  ctc_weight: 0.375
  features: {sample_rate: 8000, frame_length_ms: 20, frame_shift_ms: 12.5, dither: 0.5, preemphasis: 0.5,
             remove_dc_offset: false, window: hamming, blackman_coeff: 0.5, round_to_power_of_two: false,
             num_mel_bins: 30, low_freq: 40, high_freq: -100, energy_floor: 0.25, use_energy: true,
             use_log_fbank: false, use_power: false, snip_edges: false, raw_energy: false}
  attention:
    type: sagmm-fixed
    energy: dot
    monotonic_energy: dot
    attention_dim: 23
    init_r: -2
    noise_std: 0.5
    chunk_size: 3
    tau: 0.25
    sample: true
    gmm: {num_heads: 4, window_radius: 1.5, window_width: 6, max_step: 2.5, min_variance: 0.001, max_variance: 9, init_step_bias: 0.75}
train:
  output_dir: somewhere
  seed: 9
  init_from: elsewhere/best.ckpt
  threads: 1
  batch_size: 5
  max_steps: 77
  max_minutes: 1.5
  eval_every: 7
  eval_limit: 3
  patience: 2
  log_every: 4
  plot_every: 8
  plot_examples: 1
  length_penalty: 0.01
  length_penalty_until: 99
  normalize_features: false
  spec_augment: {max_time_warp_frames: 7, num_freq_masks: 3, max_freq_mask_bins: 5, num_time_masks: 4, max_time_mask_frames: 6, max_time_mask_fraction: 0.5}
  optimizer: {learning_rate: 0.5, beta1: 0.5, beta2: 0.75, eps: 0.001, clip_norm: 2, weight_decay: 0.125, decay_every: 10, decay_factor: 0.25}
  smoothing: {uniform: 0.125, localized: [0.5, 1, 1, 0.5]}
decode: {beam: 3, prune_margin: 1.5, length_ratio: 2.5, length_bonus: 4, eos_only_after_input: true,
         eos_only_at_last_entry: true}
)";

// Dotted names of the leaves of a YAML mapping.
void leaves(const YAML::Node& node, const std::string& prefix, std::set<std::string>& out) {
  for (const auto& kv : node) {
    const std::string key = prefix + kv.first.as<std::string>();
    if (kv.second.IsMap()) {
      leaves(kv.second, key + ".", out);
    } else {
      out.insert(key);
    }
  }
}

TEST(Config, EveryKeyIsReadIntoItsFieldAndWrittenBack) {
  const YAML::Node root = io::parse_yaml(kEveryKey, "every.yaml");
  const train::Config c = train::config_from_yaml(root, "every.yaml");
  EXPECT_EQ(c.data.dev, "b.tsv");
  EXPECT_EQ(c.model.input_kind, "features");
  EXPECT_EQ(c.model.decoder_hidden, 19);
  EXPECT_EQ(c.model.p_eos, 0.125);
  EXPECT_EQ(c.model.ctc_weight, 0.375);
  EXPECT_EQ(c.train.init_from, "elsewhere/best.ckpt");
  EXPECT_EQ(c.model.attention, "sagmm-fixed");
  EXPECT_EQ(c.model.attention_options.tau, 0.25);
  EXPECT_EQ(c.model.attention_options.chunk_size, 3);
  EXPECT_EQ(c.model.attention_options.gmm.num_heads, 4);
  EXPECT_EQ(c.model.attention_options.gmm.window_width, 6);
  EXPECT_EQ(c.model.attention_options.gmm.init_step_bias, 0.75);
  EXPECT_EQ(c.train.max_minutes, 1.5);
  EXPECT_EQ(c.train.optimizer.decay_factor, 0.25);
  EXPECT_EQ(c.train.smoothing.localized, (std::vector<double>{0.5, 1, 1, 0.5}));
  EXPECT_EQ(c.decode.prune_margin, 1.5);
  EXPECT_EQ(c.decode.length_bonus, 4);
  EXPECT_TRUE(c.decode.eos_only_at_last_entry);
  EXPECT_EQ(c.model.features.frame_shift_ms, 12.5);
  EXPECT_EQ(c.model.features.window, "hamming");
  EXPECT_EQ(c.model.features.snip_edges, false);
  EXPECT_EQ(c.train.spec_augment.max_time_mask_frames, 6);
  EXPECT_EQ(c.train.spec_augment.max_time_warp_frames, 7);
  EXPECT_EQ(c.train.normalize_features, false);
  EXPECT_NO_THROW(c.validate());

  // The writer writes exactly the keys of the hand-written file, with its values.
  const YAML::Node written = train::config_to_yaml(c);
  std::set<std::string> expected, got;
  leaves(root, "", expected);
  leaves(written, "", got);
  EXPECT_EQ(got, expected);
  for (const std::string& key : expected) {
    YAML::Node a = root, b = written;
    std::string rest = key;
    for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest.erase(0, dot + 1)) {
      a.reset(a[rest.substr(0, dot)]);
      b.reset(b[rest.substr(0, dot)]);
    }
    if (a[rest].IsSequence()) {
      EXPECT_EQ(a[rest].as<std::vector<double>>(), b[rest].as<std::vector<double>>()) << key;
    } else {
      EXPECT_EQ(a[rest].as<std::string>(), b[rest].as<std::string>()) << key;
    }
  }
  // And the defaults survive a round trip through the text.
  const train::Config d;
  const std::string text = io::to_yaml_text(train::config_to_yaml(d));
  EXPECT_EQ(io::to_yaml_text(train::config_to_yaml(train::config_from_yaml(io::parse_yaml(text, "t"), "t"))), text);
}

train::Config with(const std::string& assignment) {
  YAML::Node root(YAML::NodeType::Map);
  io::apply_override(root, assignment);
  return train::config_from_yaml(root, "cfg.yaml", {assignment});
}

TEST(Config, RangesAreCheckedNamingTheKeyAndTheValue) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"train.batch_size=0", "train.batch_size must be >= 1, got 0"},
      {"train.optimizer.learning_rate=0", "train.optimizer.learning_rate must be finite and > 0, got 0"},
      {"train.optimizer.learning_rate=.nan", "train.optimizer.learning_rate must be finite and > 0, got nan"},
      // Infinity is refused and the message says why (it read "must be >= 0, got inf").
      {"train.optimizer.clip_norm=.inf", "train.optimizer.clip_norm must be finite and >= 0, got inf"},
      // A budget whose seconds overflow a double was accepted, and the run failed after it
      // had replaced the output directory's files.
      {"train.max_minutes=1e308", "train.max_minutes must lie in [0, 5.256e+11], got 1e+308"},
      {"train.output_dir=''", "train.output_dir: expected a directory, got an empty string"},
      {"decode.beam=-1", "decode: beam must be >= 0"},
      {"train.optimizer.beta1=1", "train.optimizer.beta1 must lie in [0, 1), got 1"},
      {"train.optimizer.decay_factor=1.5", "train.optimizer.decay_factor must lie in (0, 1], got 1.5"},
      {"train.smoothing.localized=[1, -0.5, 1, 1]", "train.smoothing: localized[1]: expected a finite weight >= 0, got -0.5"},
      {"train.smoothing.localized=[1, 1]", "train.smoothing: localized: expected 4 weights (offsets -2, -1, +1, +2) or none, got 2"},
      {"train.smoothing.uniform=1", "train.smoothing: uniform: expected a value in [0, 1), got 1"},
      {"train.threads=0", "train.threads: expected a number of threads >= 1, got 0"},
      {"decode.prune_margin=-1", "decode: prune_margin must be finite and > 0, got -1"},
      // Beyond these bounds ratio * T + bonus overflowed int64: every hypothesis ended at once
      // (an error rate of 1) or none did.
      {"decode.length_ratio=1e300", "decode: length_ratio must lie in (0, 1000], got 1e+300"},
      {"decode.length_bonus=9223372036854775807",
       "decode: length_bonus must lie in [0, 1000000], got 9223372036854775807"},
      {"model.attention.init_r=.inf", "model.attention: init_r must be finite, got inf"},
      // The sections whose structs check themselves: their messages, naming the section.
      {"model.attention.chunk_size=0", "model.attention: chunk_size w must be >= 1, got 0"},
      {"model.attention.gmm.num_heads=0", "model.attention: gmm.num_heads must lie in [1, 1048576], got 0"},
      {"model.attention.gmm.num_heads=1048577", "model.attention: gmm.num_heads must lie in [1, 1048576], got 1048577"},
      {"model.encoder_layers=0", "model: encoder_layers must be >= 1, got 0"},
      // Sizes whose products overflowed int64 (a model built with the wrong shape) or
      // exhausted memory in LibTorch, naming no key.
      {"model.lookahead=2305843009213693951", "model: lookahead must be <= 1024, got 2305843009213693951"},
      {"model.embedding_dim=9223372036854775807", "model: embedding_dim must be <= 1048576, got 9223372036854775807"},
      {"model.decoder_hidden=100000000000", "model: decoder_hidden must be <= 1048576, got 100000000000"},
      {"model.attention.attention_dim=9223372036854775807",
       "model.attention: query_dim, memory_dim and attention_dim must be <= 1048576"},
      {"model.attention.type=bogus", "model: attention must be one of soft, monotonic"},
      {"train.spec_augment.num_freq_masks=-1", "train.spec_augment: num_freq_masks: expected >= 0, got -1"},
      {"train.spec_augment.max_time_warp_frames=-1",
       "train.spec_augment: max_time_warp_frames: expected >= 0, got -1"},
      {"train.spec_augment.max_time_mask_fraction=1.5",
       "train.spec_augment: max_time_mask_fraction: expected [0, 1], got 1.5"},
  };
  for (const auto& [assignment, message] : refused) {
    expect_error([&] { with(assignment).validate(); }, message);
  }
  expect_error([] { with("train.max_steps=abc"); }, "--set train.max_steps=abc: train.max_steps: cannot read \"abc\" as an integer");
  // An unsigned field says so: -1 is an integer, but not one it can hold.
  expect_error([] { with("train.seed=-1"); }, "--set train.seed=-1: train.seed: cannot read \"-1\" as an integer >= 0");
  // An audio model's filterbank is checked too (a symbols model's is never read).
  const train::Config audio_config = train::config_from_yaml(
      io::parse_yaml("model: {input_kind: audio, features: {num_mel_bins: 2}}", "cfg.yaml"), "cfg.yaml");
  expect_error([&] { audio_config.validate(); }, "model.features: num_mel_bins: expected >= 3, got 2");
  EXPECT_NO_THROW(with("model.features.num_mel_bins=2").validate());
  EXPECT_NO_THROW(with("train.optimizer.decay_factor=1").validate());  // the closed end
}

TEST(Config, KeysOfEarlierVersionsAreRefusedNamingTheNewKey) {
  const std::vector<std::pair<std::string, std::string>> renamed = {
      {"model.attention.threshold=0.4", "model.attention.threshold is now called model.attention.tau"},
      {"model.attention.num_heads=2", "model.attention.num_heads is now called model.attention.gmm.num_heads"},
      {"model.attention.gmm_window_radius=2", "model.attention.gmm_window_radius is now called model.attention.gmm.window_radius"},
      {"model.attention.gmm_window_width=4", "model.attention.gmm_window_width is now called model.attention.gmm.window_width"},
      {"model.attention.gmm_max_step=3", "model.attention.gmm_max_step is now called model.attention.gmm.max_step"},
      {"model.attention.gmm_min_variance=0.1", "model.attention.gmm_min_variance is now called model.attention.gmm.min_variance"},
      {"decode.threshold=3", "decode.threshold is now called decode.prune_margin"},
  };
  for (const auto& [assignment, message] : renamed) {
    expect_error([&] { with(assignment); }, "--set " + assignment + ": " + message);
  }
  expect_error([] { with("model.attention.gmm.radius=2"); },
                 "unknown key \"model.attention.gmm.radius\" (known keys of model.attention.gmm: "
                 "init_step_bias, max_step, max_variance, min_variance, num_heads, window_radius, window_width)");
  // The known keys listed are today's: a renamed key (gmm_max_step, threshold, ...) is refused
  // with its own message above, never offered.
  expect_error([] { with("model.attention.bogus=1"); },
               "unknown key \"model.attention.bogus\" (known keys of model.attention: attention_dim, chunk_size, "
               "energy, gmm, init_r, monotonic_energy, noise_std, sample, tau, type)");
  expect_error([] { with("decode.bogus=1"); },
               "unknown key \"decode.bogus\" (known keys of decode: beam, eos_only_after_input, "
               "eos_only_at_last_entry, length_bonus, length_ratio, prune_margin)");
  // A key that is not a scalar is named as written (yaml-cpp's "bad conversion" named nothing).
  expect_error([] { train::config_from_yaml(io::parse_yaml("train: {[a, b]: 1}", "cfg.yaml"), "cfg.yaml"); },
               "unknown key \"train.[a, b]\"");
}

// The model's values are checked when the configuration is loaded, not when the model is
// built (after the training data has been read, minutes into a run).
TEST(Config, ModelValuesAreRefusedWhenTheConfigurationIsLoaded) {
  const std::string recipe = std::string(MONA_RECIPES) + "/g2p-cmudict/configs/mocha_w4.yaml";
  EXPECT_NO_THROW(train::load_config(recipe));
  expect_error([&] { train::load_config(recipe, {"model.attention.chunk_size=0"}); },
               "model.attention: chunk_size w must be >= 1, got 0");
  expect_error([&] { train::load_config(recipe, {"model.lookahead=2", "model.bidirectional=true"}); },
               "model: lookahead must be 0 with a bidirectional encoder");
}

TEST(Config, CheckpointsOfEarlierVersionsAreMigrated) {
  YAML::Node old = io::parse_yaml(
      "model: {attention: {type: sagmm-tr, threshold: 0.3, num_heads: 2, gmm_window_radius: 1.25, "
      "gmm_window_width: 7, gmm_max_step: 2, gmm_min_variance: 0.01}}\n"
      "decode: {beam: 4, threshold: 2.5}\n",
      "old.ckpt:config");
  train::migrate_config(old);
  const train::Config c = train::config_from_yaml(old, "old.ckpt:config");
  const auto& a = c.model.attention_options;
  EXPECT_EQ(a.tau, 0.3);
  EXPECT_EQ(a.gmm.num_heads, 2);
  EXPECT_EQ(a.gmm.window_radius, 1.25);
  EXPECT_EQ(a.gmm.window_width, 7);
  EXPECT_EQ(a.gmm.max_step, 2);
  EXPECT_EQ(a.gmm.min_variance, 0.01);
  EXPECT_EQ(c.decode.beam, 4);
  EXPECT_EQ(c.decode.prune_margin, 2.5);
  // A current configuration is left as it is.
  YAML::Node now = train::config_to_yaml(c);
  const std::string before = io::to_yaml_text(now);
  train::migrate_config(now);
  EXPECT_EQ(io::to_yaml_text(now), before);
}

// Every configuration the recipes ship (recipes/*/configs/*.yaml and recipes/*/demo.yaml)
// is read and validated: a key renamed or a value out of range in mona breaks this test, not
// a user's run an hour in.
TEST(Config, EveryRecipeConfigurationLoads) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const auto& recipe : fs::directory_iterator(MONA_RECIPES)) {
    if (fs::exists(recipe.path() / "demo.yaml")) files.push_back(recipe.path() / "demo.yaml");
    if (!fs::is_directory(recipe.path() / "configs")) continue;
    for (const auto& f : fs::directory_iterator(recipe.path() / "configs")) {
      if (f.path().extension() == ".yaml") files.push_back(f.path());
    }
  }
  EXPECT_GE(files.size(), 15u) << "the G2P and spoken-commands recipes' configurations";
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    EXPECT_NO_THROW(train::load_config(f.string()).validate());
  }
}

}  // namespace
}  // namespace mona::test
