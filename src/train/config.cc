// Configuration <-> YAML; see include/mona/train/config.h.
#include "mona/train/config.h"

#include <cmath>
#include <ostream>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>
#include <thread>

#include "mona/core/error.h"
#include "mona/data/tokens.h"
#include "mona/io/yaml.h"

namespace mona::train {

// Keys of model.attention in earlier versions and their names now.
const std::pair<const char*, const char*> kRenamedAttentionKeys[] = {
    {"threshold", "tau"},
    {"num_heads", "gmm.num_heads"},
    {"gmm_window_radius", "gmm.window_radius"},
    {"gmm_window_width", "gmm.window_width"},
    {"gmm_max_step", "gmm.max_step"},
    {"gmm_min_variance", "gmm.min_variance"},
};

namespace {

// The range a numeric field must lie in (the run settings'; the model's, SpecAugment's and the
// search's options are checked by their own validate()). NaN lies in no range.
struct Range {
  double lo = -INFINITY, hi = INFINITY;
  bool lo_open = false, hi_open = false;
  static Range at_least(double lo) { return {lo, INFINITY, false, true}; }
  static Range above(double lo) { return {lo, INFINITY, true, true}; }
  static Range in(double lo, bool lo_open, double hi, bool hi_open) { return {lo, hi, lo_open, hi_open}; }
  bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  // "must be >= 1", "must be finite and > 0" (a floating field: inf is refused too), "must lie
  // in (0, 1]"
  std::string requirement(bool floating = false) const {
    std::ostringstream s;
    if (std::isinf(hi)) {  // hi_open: infinity itself is refused, and the message says so
      s << "must be " << (std::isinf(lo) ? "finite" : floating && hi_open ? "finite and " : "");
      if (!std::isinf(lo)) {
        s << (lo_open ? "> " : ">= ");
        detail::put(s, lo);
      }
    } else {
      s << "must lie in " << (lo_open ? "(" : "[");
      detail::put(s, lo);
      s << ", ";
      detail::put(s, hi);
      s << (hi_open ? ")" : "]");
    }
    return s.str();
  }
};

// Every field of a configuration, listed once: its key, the struct member it is, and for the
// run settings the range it must lie in. The reader (Reader), the writer (Writer) and
// Config::validate (Validator) all walk this list; a visitor has
//   section(key, body)       a nested mapping, body() lists its fields
//   field(key, member[, range])
//   renamed(old_key, new_key) a key of an earlier version (migrate_config renames those).
template <class C, class V>
void visit_config(C& c, V& v) {
  v.section("data", [&] {
    v.field("train", c.data.train);
    v.field("dev", c.data.dev);
    v.field("test", c.data.test);
  });
  v.section("model", [&] {
    auto& o = c.model;
    v.field("input_kind", o.input_kind);
    v.field("feature_dim", o.feature_dim);
    v.field("embedding_dim", o.embedding_dim);
    v.field("append_eos", o.append_eos);
    v.field("conv_channels", o.conv_channels);
    v.field("encoder_layers", o.encoder_layers);
    v.field("encoder_hidden", o.encoder_hidden);
    v.field("bidirectional", o.bidirectional);
    v.field("lookahead", o.lookahead);
    v.field("projection_dim", o.projection_dim);
    v.field("time_reduction_layers", o.time_reduction_layers);
    v.field("decoder_embedding_dim", o.decoder_embedding_dim);
    v.field("decoder_hidden", o.decoder_hidden);
    v.field("dropout", o.dropout);
    v.field("p_eos", o.p_eos);
    v.field("ctc_weight", o.ctc_weight);
    v.section("features", [&] {  // audio::FbankOptions (mona/audio/fbank.h), read for input_kind audio
      auto& f = o.features;
      v.field("sample_rate", f.sample_rate);
      v.field("frame_length_ms", f.frame_length_ms);
      v.field("frame_shift_ms", f.frame_shift_ms);
      v.field("dither", f.dither);
      v.field("preemphasis", f.preemphasis);
      v.field("remove_dc_offset", f.remove_dc_offset);
      v.field("window", f.window);
      v.field("blackman_coeff", f.blackman_coeff);
      v.field("round_to_power_of_two", f.round_to_power_of_two);
      v.field("num_mel_bins", f.num_mel_bins);
      v.field("low_freq", f.low_freq);
      v.field("high_freq", f.high_freq);
      v.field("energy_floor", f.energy_floor);
      v.field("use_energy", f.use_energy);
      v.field("use_log_fbank", f.use_log_fbank);
      v.field("use_power", f.use_power);
      v.field("snip_edges", f.snip_edges);
      v.field("raw_energy", f.raw_energy);
    });
    v.section("attention", [&] {
      auto& a = o.attention_options;
      v.field("type", o.attention);
      v.field("energy", a.energy);
      v.field("monotonic_energy", a.monotonic_energy);
      v.field("attention_dim", a.attention_dim);
      v.field("init_r", a.init_r);
      v.field("noise_std", a.noise_std);
      v.field("chunk_size", a.chunk_size);
      v.field("tau", a.tau);
      v.field("sample", a.sample);
      v.section("gmm", [&] {
        v.field("num_heads", a.gmm.num_heads);
        v.field("window_radius", a.gmm.window_radius);
        v.field("window_width", a.gmm.window_width);
        v.field("max_step", a.gmm.max_step);
        v.field("min_variance", a.gmm.min_variance);
        v.field("max_variance", a.gmm.max_variance);
        v.field("init_step_bias", a.gmm.init_step_bias);
      });
      for (const auto& r : kRenamedAttentionKeys) v.renamed(r.first, r.second);
    });
  });
  v.section("train", [&] {
    auto& r = c.train;
    v.field("output_dir", r.output_dir);
    v.field("seed", r.seed);
    v.field("init_from", r.init_from);
    v.field("threads", r.threads);  // >= 1, checked (and clamped) by usable_threads
    v.field("batch_size", r.batch_size, Range::at_least(1));
    v.field("max_steps", r.max_steps, Range::at_least(0));
    // At most a million years: the run's time budget in seconds must be a finite double.
    v.field("max_minutes", r.max_minutes, Range::in(0, false, 5.256e11, false));
    v.field("eval_every", r.eval_every, Range::at_least(1));
    v.field("eval_limit", r.eval_limit, Range::at_least(0));
    v.field("patience", r.patience, Range::at_least(0));
    v.field("log_every", r.log_every, Range::at_least(1));
    v.field("plot_every", r.plot_every, Range::at_least(0));
    v.field("plot_examples", r.plot_examples, Range::at_least(0));
    v.field("length_penalty", r.length_penalty, Range::at_least(0));
    v.field("length_penalty_until", r.length_penalty_until);
    v.field("normalize_features", r.normalize_features);
    v.section("spec_augment", [&] {  // audio::SpecAugmentOptions (mona/audio/spec_augment.h; its validate())
      auto& a = r.spec_augment;
      v.field("max_time_warp_frames", a.max_time_warp_frames);
      v.field("num_freq_masks", a.num_freq_masks);
      v.field("max_freq_mask_bins", a.max_freq_mask_bins);
      v.field("num_time_masks", a.num_time_masks);
      v.field("max_time_mask_frames", a.max_time_mask_frames);
      v.field("max_time_mask_fraction", a.max_time_mask_fraction);
    });
    v.section("optimizer", [&] {
      auto& o = r.optimizer;
      v.field("learning_rate", o.learning_rate, Range::above(0));
      v.field("beta1", o.beta1, Range::in(0, false, 1, true));
      v.field("beta2", o.beta2, Range::in(0, false, 1, true));
      v.field("eps", o.eps, Range::above(0));
      v.field("clip_norm", o.clip_norm, Range::at_least(0));
      v.field("weight_decay", o.weight_decay, Range::at_least(0));
      v.field("decay_every", o.decay_every, Range::at_least(0));
      v.field("decay_factor", o.decay_factor, Range::in(0, true, 1, false));
    });
    v.section("smoothing", [&] {
      // nn::SmoothingOptions (mona/nn/seq2seq.h; its validate(), from Config::validate)
      v.field("uniform", r.smoothing.uniform);
      v.field("localized", r.smoothing.localized);
    });
  });
  v.section("decode", [&] {
    v.field("beam", c.decode.beam);
    v.field("prune_margin", c.decode.prune_margin);
    v.field("length_ratio", c.decode.length_ratio);
    v.field("length_bonus", c.decode.length_bonus);
    v.field("eos_only_after_input", c.decode.eos_only_after_input);
    v.field("eos_only_at_last_entry", c.decode.eos_only_at_last_entry);
    v.renamed("threshold", "prune_margin");
  });
}

// Dotted key of `key` under the sections `path`.
std::string dotted(const std::vector<std::string>& path, const std::string& key) {
  std::string s;
  for (const auto& p : path) s += p + ".";
  return s + key;
}

template <class T>
const char* type_name() {
  if (std::is_same<T, bool>::value) return "a boolean";
  if (std::is_integral<T>::value && std::is_unsigned<T>::value) return "an integer >= 0";
  if (std::is_integral<T>::value) return "an integer";
  if (std::is_floating_point<T>::value) return "a number";
  if (std::is_same<T, std::string>::value) return "a string";
  return "a list of numbers";
}

// Reads a YAML tree into a Config, refusing unknown keys, keys of earlier versions and values
// of the wrong type, naming the key and what set it (the file, or a --set override).
class Reader {
 public:
  Reader(const YAML::Node& root, std::string source, const std::vector<std::string>& overrides)
      : source_(std::move(source)), overrides_(overrides) {
    nodes_.push_back(root);
    expect_mapping(root, "");
  }
  template <class F>
  void section(const char* key, F&& body) {
    known_.back().insert(key);
    const YAML::Node& parent = nodes_.back();
    const YAML::Node node = parent && parent.IsMap() ? parent[key] : YAML::Node();
    path_.push_back(key);
    expect_mapping(node, dotted({path_.begin(), path_.end() - 1}, key));
    nodes_.push_back(node);
    known_.emplace_back();
    body();
    finish();
    known_.pop_back();
    nodes_.pop_back();
    path_.pop_back();
  }
  template <class T>
  void field(const char* key, T& member, const Range& = {}) {
    known_.back().insert(key);
    const YAML::Node& node = nodes_.back();
    if (!node || !node.IsMap()) return;
    const YAML::Node v = node[key];
    if (!v || v.IsNull()) return;
    try {
      member = v.as<T>();
    } catch (const YAML::Exception&) {
      const std::string name = dotted(path_, key);
      detail::fail(source_for(name), ": ", name, ": cannot read \"", YAML::Dump(v), "\" as ",
                   type_name<T>());
    }
  }
  // Not a known key (finish() does not list it): present, it is refused here, naming its new name.
  void renamed(const char* old_key, const char* new_key) {
    const YAML::Node& node = nodes_.back();
    if (!node || !node.IsMap() || !node[old_key]) return;
    const std::string name = dotted(path_, old_key);
    detail::fail(source_for(name), ": ", name, " is now called ", dotted(path_, new_key),
                 " (rename the key; checkpoints of earlier versions are read either way)");
  }
  // The top level's unknown keys (sections check theirs when they end).
  void finish() const {
    const YAML::Node& node = nodes_.back();
    if (!node || !node.IsMap()) return;
    for (const auto& kv : node) {
      const std::string k = io::key_text(kv.first);
      if (known_.back().count(k)) continue;
      std::string allowed;
      for (const auto& a : known_.back()) allowed += (allowed.empty() ? "" : ", ") + a;
      const std::string name = dotted(path_, k);
      detail::fail(source_for(name), ": unknown key \"", name, "\" (known keys of ",
                   path_.empty() ? std::string("the top level") : dotted({path_.begin(), path_.end() - 1}, path_.back()),
                   ": ", allowed, ")");
    }
  }

 private:
  void expect_mapping(const YAML::Node& node, const std::string& name) const {
    detail::check(!node || node.IsNull() || node.IsMap(), source_for(name), ": ",
                  name.empty() ? std::string("the top level") : name,
                  ": expected a mapping of keys to values");
  }
  // What to blame for `key` (dotted): the last override that set it, a key inside it or a
  // map holding it ("--set a.b=1"), else the file.
  std::string source_for(const std::string& key) const {
    for (auto o = overrides_.rbegin(); o != overrides_.rend(); ++o) {
      std::string k = o->substr(0, o->find('='));
      k.erase(0, k.find_first_not_of(" \t"));
      k.erase(k.find_last_not_of(" \t") + 1);
      auto within = [](const std::string& inner, const std::string& outer) {
        return inner == outer || (inner.size() > outer.size() &&
                                  inner.compare(0, outer.size(), outer) == 0 && inner[outer.size()] == '.');
      };
      if (!key.empty() && (within(key, k) || within(k, key))) return "--set " + *o;
    }
    return source_;
  }
  std::string source_;
  const std::vector<std::string>& overrides_;
  std::vector<YAML::Node> nodes_;
  std::vector<std::string> path_;
  std::vector<std::set<std::string>> known_{1};
};

// Writes every field (defaults included).
class Writer {
 public:
  explicit Writer(YAML::Node root) { nodes_.push_back(root); }
  template <class F>
  void section(const char* key, F&& body) {
    YAML::Node node(YAML::NodeType::Map);
    nodes_.push_back(node);
    body();
    nodes_.pop_back();
    nodes_.back()[key] = node;
  }
  template <class T>
  void field(const char* key, const T& member, const Range& = {}) {
    nodes_.back()[key] = member;
  }
  void field(const char* key, const std::vector<double>& member, const Range& = {}) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (double w : member) list.push_back(w);
    nodes_.back()[key] = list;
  }
  void renamed(const char*, const char*) {}

 private:
  std::vector<YAML::Node> nodes_;
};

// Checks each field that has a range, naming its key and value.
class Validator {
 public:
  template <class F>
  void section(const char* key, F&& body) {
    path_.push_back(key);
    body();
    path_.pop_back();
  }
  template <class T>
  void field(const char* key, const T& member, const Range& range = {}) {
    if constexpr (std::is_arithmetic<T>::value && !std::is_same<T, bool>::value) {
      detail::check(range.contains(static_cast<double>(member)), dotted(path_, key), " ",
                    range.requirement(std::is_floating_point<T>::value), ", got ", member);
    }
  }
  void field(const char* key, const std::vector<double>& member, const Range& range) {
    for (double w : member) {
      detail::check(range.contains(w), dotted(path_, key), ": each weight ", range.requirement(),
                    ", got ", w);
    }
  }
  template <class T>
  void field(const char*, const std::vector<T>&) {}
  void renamed(const char*, const char*) {}

 private:
  std::vector<std::string> path_;
};

}  // namespace

Config config_from_yaml(const YAML::Node& root, const std::string& source,
                        const std::vector<std::string>& overrides) {
  Config c;
  Reader reader(root, source, overrides);
  visit_config(c, reader);
  reader.finish();
  return c;
}

namespace {
// Moves root[path..., from] to root[path..., to] (a dotted `to` makes the maps on the way)
// unless the new key is already there.
void rename_key(const YAML::Node& root, const std::vector<std::string>& path,
                const std::string& from, const std::string& to) {
  YAML::Node node = root;
  for (const auto& p : path) {
    if (!node.IsMap() || !node[p]) return;
    node.reset(node[p]);  // rebind (operator= would overwrite the node's value)
  }
  if (!node.IsMap() || !node[from]) return;
  const YAML::Node value = YAML::Clone(node[from]);
  node.remove(from);
  YAML::Node target = node;
  std::string rest = to;
  for (std::size_t dot; (dot = rest.find('.')) != std::string::npos; rest.erase(0, dot + 1)) {
    const std::string part = rest.substr(0, dot);
    if (!target[part]) target[part] = YAML::Node(YAML::NodeType::Map);
    target.reset(target[part]);
  }
  if (!target[rest]) target[rest] = value;
}
}  // namespace

void migrate_config(YAML::Node& root) {
  for (const auto& r : kRenamedAttentionKeys) rename_key(root, {"model", "attention"}, r.first, r.second);
  rename_key(root, {"decode"}, "threshold", "prune_margin");
}

YAML::Node config_to_yaml(const Config& c) {
  YAML::Node root(YAML::NodeType::Map);
  Writer writer(root);
  visit_config(c, writer);
  return root;
}

namespace {
// Runs `validate`, the own check of the struct `struct_name` that configuration section `key`
// holds, and rethrows its mona::ArgumentError ("<struct_name>: <field> ...") as
// "<key>: <field> ...", naming the section instead of the struct.
template <class F>
void validate_section(const std::string& key, const std::string& struct_name, F&& validate) {
  try {
    validate();
  } catch (const ArgumentError& e) {
    std::string message = e.what();
    const std::string own = struct_name + ": ";
    if (message.compare(0, own.size(), own) == 0) message.erase(0, own.size());
    detail::fail(key, ": ", message);
  }
}
}  // namespace

nn::ModelOptions with_data_sizes(const nn::ModelOptions& model, int64_t input_vocab, int64_t output_vocab) {
  nn::ModelOptions m = model;
  m.input_vocab = input_vocab;
  m.output_vocab = output_vocab;
  if (m.input_kind == "audio") m.feature_dim = m.features.num_bins();
  return m;
}

void Config::validate() const {
  usable_threads(train.threads, "train.threads", nullptr);  // >= 1 (clamped where it is used)
  detail::check(!train.output_dir.empty(), "train.output_dir: expected a directory, got an empty string");
  Validator validator;
  visit_config(*this, validator);
  // The model's own checks, on the options a run builds (with_data_sizes), with stand-ins for
  // the vocabulary sizes that only the data gives: the filterbank's (audio models), the
  // model's, the attention's (with stand-ins for the sizes the model fills in).
  const int64_t some_vocabulary = data::kNumReserved + 1;
  nn::ModelOptions m = with_data_sizes(model, some_vocabulary, some_vocabulary);
  if (m.input_kind == "audio") validate_section("model.features", "FbankOptions", [&] { m.features.validate(); });
  validate_section("model", "ModelOptions", [&] { m.validate(); });
  m.attention_options.query_dim = m.attention_options.memory_dim = 1;
  m.attention_options.validate("model.attention");
  validate_section("train.spec_augment", "SpecAugmentOptions", [&] { train.spec_augment.validate(); });
  validate_section("train.smoothing", "SmoothingOptions", [&] { train.smoothing.validate(); });
  validate_section("decode", "SearchOptions", [&] { decode.validate(); });
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  YAML::Node root = io::load_yaml(path);
  for (const auto& o : overrides) io::apply_override(root, o);
  Config c = config_from_yaml(root, path, overrides);
  c.validate();
  return c;
}

Config with_decode_overrides(const Config& config, const std::vector<std::string>& overrides,
                             const std::string& source) {
  if (overrides.empty()) return config;
  for (const auto& o : overrides) {
    detail::check(o.rfind("decode.", 0) == 0, "--set ", o,
                  ": only decode.* settings can change after training (the model's are fixed)");
  }
  YAML::Node root = config_to_yaml(config);
  for (const auto& o : overrides) io::apply_override(root, o);
  Config c = config_from_yaml(root, source, overrides);
  c.validate();
  Config out = config;
  out.decode = c.decode;
  return out;
}

int64_t usable_threads(int64_t requested, const std::string& what, std::ostream* notice) {
  detail::check(requested >= 1, what, ": expected a number of threads >= 1, got ", requested);
  const auto hardware = static_cast<int64_t>(std::thread::hardware_concurrency());  // 0: unknown
  if (hardware > 0 && requested > hardware) {
    if (notice) {
      *notice << "mona: " << what << " = " << requested << " is more than this machine's "
              << hardware << " hardware threads; using " << hardware << "\n";
    }
    return hardware;
  }
  return requested;
}

}  // namespace mona::train
