// Configuration <-> YAML; see include/mona/train/config.h.
#include "mona/train/config.h"

#include <cmath>
#include <ostream>
#include <set>
#include <thread>

#include "mona/core/error.h"
#include "mona/io/yaml.h"

namespace mona::train {
namespace {

// Reads the keys of one YAML mapping into typed fields, refusing unknown keys.
class Section {
 public:
  Section(const YAML::Node& node, std::string path, std::string source,
          const std::vector<std::string>& overrides)
      : node_(node), path_(std::move(path)), source_(std::move(source)), overrides_(overrides) {
    detail::check(!node_ || node_.IsNull() || node_.IsMap(), source_for(path_), ": ", path_,
                  ": expected a mapping of keys to values");
  }
  template <class T>
  void get(const char* key, T& field) {
    known_.insert(key);
    if (!node_ || node_.IsNull()) return;
    const YAML::Node v = node_[key];
    if (!v || v.IsNull()) return;
    try {
      field = v.as<T>();
    } catch (const YAML::Exception&) {
      detail::fail(source_for(name(key)), ": ", name(key), ": cannot read \"", YAML::Dump(v),
                   "\" as ", type_name<T>());
    }
  }
  /// A key of an earlier version, now called `new_key`: refused, naming the new name.
  void renamed(const char* old_key, const char* new_key) {
    known_.insert(old_key);
    if (!node_ || !node_.IsMap() || !node_[old_key]) return;
    detail::fail(source_for(name(old_key)), ": ", name(old_key), " is now called ", name(new_key),
                 " (rename the key; checkpoints of earlier versions are read either way)");
  }
  Section sub(const char* key) {
    known_.insert(key);
    return Section(node_ && node_.IsMap() ? node_[key] : YAML::Node(), name(key), source_,
                   overrides_);
  }
  /// Call after all get()/sub(): refuses keys nobody asked for.
  void finish() const {
    if (!node_ || !node_.IsMap()) return;
    for (const auto& kv : node_) {
      const std::string k = kv.first.as<std::string>();
      if (!known_.count(k)) {
        std::string allowed;
        for (const auto& a : known_) allowed += (allowed.empty() ? "" : ", ") + a;
        detail::fail(source_for(name(k.c_str())), ": unknown key \"", name(k.c_str()),
                     "\" (known keys of ",
                     path_.empty() ? "the top level" : path_, ": ", allowed, ")");
      }
    }
  }

 private:
  std::string name(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
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
  template <class T>
  static const char* type_name() {
    if (std::is_same<T, bool>::value) return "a boolean";
    if (std::is_integral<T>::value) return "an integer";
    if (std::is_floating_point<T>::value) return "a number";
    if (std::is_same<T, std::string>::value) return "a string";
    return "a list of numbers";
  }
  YAML::Node node_;
  std::string path_, source_;
  const std::vector<std::string>& overrides_;
  std::set<std::string> known_;
};

}  // namespace

Config config_from_yaml(const YAML::Node& root, const std::string& source,
                        const std::vector<std::string>& overrides) {
  Config c;
  Section top(root, "", source, overrides);
  {
    Section d = top.sub("data");
    d.get("train", c.data.train);
    d.get("dev", c.data.dev);
    d.get("test", c.data.test);
    d.finish();
  }
  {
    Section m = top.sub("model");
    auto& o = c.model;
    m.get("input_kind", o.input_kind);
    m.get("feature_dim", o.feature_dim);
    m.get("embedding_dim", o.embedding_dim);
    m.get("append_eos", o.append_eos);
    m.get("conv_channels", o.conv_channels);
    m.get("encoder_layers", o.encoder_layers);
    m.get("encoder_hidden", o.encoder_hidden);
    m.get("bidirectional", o.bidirectional);
    m.get("lookahead", o.lookahead);
    m.get("projection_dim", o.projection_dim);
    m.get("decoder_embedding_dim", o.decoder_embedding_dim);
    m.get("decoder_hidden", o.decoder_hidden);
    m.get("dropout", o.dropout);
    Section a = m.sub("attention");
    a.get("type", o.attention);
    auto& ao = o.attention_options;
    a.get("energy", ao.energy);
    a.get("monotonic_energy", ao.monotonic_energy);
    a.get("attention_dim", ao.attention_dim);
    a.get("init_r", ao.init_r);
    a.get("noise_std", ao.noise_std);
    a.get("chunk_size", ao.chunk_size);
    a.get("tau", ao.tau);
    a.renamed("threshold", "tau");
    a.get("sample", ao.sample);
    a.get("num_heads", ao.num_heads);
    a.get("gmm_window_radius", ao.gmm_window_radius);
    a.get("gmm_window_width", ao.gmm_window_width);
    a.get("gmm_max_step", ao.gmm_max_step);
    a.get("gmm_min_variance", ao.gmm_min_variance);
    a.finish();
    m.finish();
  }
  {
    Section t = top.sub("train");
    auto& r = c.train;
    t.get("output_dir", r.output_dir);
    t.get("seed", r.seed);
    t.get("threads", r.threads);
    t.get("batch_size", r.batch_size);
    t.get("max_steps", r.max_steps);
    t.get("max_minutes", r.max_minutes);
    t.get("eval_every", r.eval_every);
    t.get("eval_limit", r.eval_limit);
    t.get("patience", r.patience);
    t.get("log_every", r.log_every);
    t.get("plot_every", r.plot_every);
    t.get("plot_examples", r.plot_examples);
    t.get("length_penalty", r.length_penalty);
    t.get("length_penalty_until", r.length_penalty_until);
    Section o = t.sub("optimizer");
    o.get("learning_rate", r.optimizer.learning_rate);
    o.get("beta1", r.optimizer.beta1);
    o.get("beta2", r.optimizer.beta2);
    o.get("eps", r.optimizer.eps);
    o.get("clip_norm", r.optimizer.clip_norm);
    o.get("weight_decay", r.optimizer.weight_decay);
    o.get("decay_every", r.optimizer.decay_every);
    o.get("decay_factor", r.optimizer.decay_factor);
    o.finish();
    Section s = t.sub("smoothing");
    s.get("uniform", r.smoothing.uniform);
    s.get("localized", r.smoothing.localized);
    s.finish();
    t.finish();
  }
  {
    Section d = top.sub("decode");
    d.get("beam", c.decode.beam);
    d.get("prune_margin", c.decode.prune_margin);
    d.renamed("threshold", "prune_margin");
    d.get("length_ratio", c.decode.length_ratio);
    d.get("length_bonus", c.decode.length_bonus);
    d.finish();
  }
  top.finish();
  return c;
}

namespace {
// Moves root[path..., from] to root[path..., to] unless the new key is already there.
void rename_key(const YAML::Node& root, const std::vector<std::string>& path,
                const std::string& from, const std::string& to) {
  YAML::Node node = root;
  for (const auto& p : path) {
    if (!node.IsMap() || !node[p]) return;
    node.reset(node[p]);  // rebind (operator= would overwrite the node's value)
  }
  if (!node.IsMap() || !node[from]) return;
  if (!node[to]) node[to] = YAML::Clone(node[from]);
  node.remove(from);
}
}  // namespace

void migrate_config(YAML::Node& root) {
  rename_key(root, {"model", "attention"}, "threshold", "tau");
  rename_key(root, {"decode"}, "threshold", "prune_margin");
}

YAML::Node config_to_yaml(const Config& c) {
  YAML::Node root;
  root["data"]["train"] = c.data.train;
  root["data"]["dev"] = c.data.dev;
  root["data"]["test"] = c.data.test;
  const auto& o = c.model;
  YAML::Node m = root["model"];
  m["input_kind"] = o.input_kind;
  m["feature_dim"] = o.feature_dim;
  m["embedding_dim"] = o.embedding_dim;
  m["append_eos"] = o.append_eos;
  m["conv_channels"] = o.conv_channels;
  m["encoder_layers"] = o.encoder_layers;
  m["encoder_hidden"] = o.encoder_hidden;
  m["bidirectional"] = o.bidirectional;
  m["lookahead"] = o.lookahead;
  m["projection_dim"] = o.projection_dim;
  m["decoder_embedding_dim"] = o.decoder_embedding_dim;
  m["decoder_hidden"] = o.decoder_hidden;
  m["dropout"] = o.dropout;
  const auto& ao = o.attention_options;
  YAML::Node a = m["attention"];
  a["type"] = o.attention;
  a["energy"] = ao.energy;
  a["monotonic_energy"] = ao.monotonic_energy;
  a["attention_dim"] = ao.attention_dim;
  a["init_r"] = ao.init_r;
  a["noise_std"] = ao.noise_std;
  a["chunk_size"] = ao.chunk_size;
  a["tau"] = ao.tau;
  a["sample"] = ao.sample;
  a["num_heads"] = ao.num_heads;
  a["gmm_window_radius"] = ao.gmm_window_radius;
  a["gmm_window_width"] = ao.gmm_window_width;
  a["gmm_max_step"] = ao.gmm_max_step;
  a["gmm_min_variance"] = ao.gmm_min_variance;
  const auto& r = c.train;
  YAML::Node t = root["train"];
  t["output_dir"] = r.output_dir;
  t["seed"] = r.seed;
  t["threads"] = r.threads;
  t["batch_size"] = r.batch_size;
  t["max_steps"] = r.max_steps;
  t["max_minutes"] = r.max_minutes;
  t["eval_every"] = r.eval_every;
  t["eval_limit"] = r.eval_limit;
  t["patience"] = r.patience;
  t["log_every"] = r.log_every;
  t["plot_every"] = r.plot_every;
  t["plot_examples"] = r.plot_examples;
  t["length_penalty"] = r.length_penalty;
  t["length_penalty_until"] = r.length_penalty_until;
  t["optimizer"]["learning_rate"] = r.optimizer.learning_rate;
  t["optimizer"]["beta1"] = r.optimizer.beta1;
  t["optimizer"]["beta2"] = r.optimizer.beta2;
  t["optimizer"]["eps"] = r.optimizer.eps;
  t["optimizer"]["clip_norm"] = r.optimizer.clip_norm;
  t["optimizer"]["weight_decay"] = r.optimizer.weight_decay;
  t["optimizer"]["decay_every"] = r.optimizer.decay_every;
  t["optimizer"]["decay_factor"] = r.optimizer.decay_factor;
  t["smoothing"]["uniform"] = r.smoothing.uniform;
  YAML::Node loc(YAML::NodeType::Sequence);
  for (double w : r.smoothing.localized) loc.push_back(w);
  t["smoothing"]["localized"] = loc;
  root["decode"]["beam"] = c.decode.beam;
  root["decode"]["prune_margin"] = c.decode.prune_margin;
  root["decode"]["length_ratio"] = c.decode.length_ratio;
  root["decode"]["length_bonus"] = c.decode.length_bonus;
  return root;
}

void Config::validate() const {
  const auto& r = train;
  detail::check(r.batch_size >= 1, "train.batch_size must be >= 1, got ", r.batch_size);
  usable_threads(r.threads, "train.threads", nullptr);  // >= 1 (clamped where it is used)
  detail::check(r.max_steps >= 0, "train.max_steps must be >= 0, got ", r.max_steps);
  detail::check(r.max_minutes >= 0, "train.max_minutes must be >= 0, got ", r.max_minutes);
  detail::check(r.eval_every >= 1, "train.eval_every must be >= 1, got ", r.eval_every);
  detail::check(r.eval_limit >= 0, "train.eval_limit must be >= 0, got ", r.eval_limit);
  detail::check(r.patience >= 0, "train.patience must be >= 0, got ", r.patience);
  detail::check(r.log_every >= 1, "train.log_every must be >= 1, got ", r.log_every);
  detail::check(r.plot_every >= 0, "train.plot_every must be >= 0, got ", r.plot_every);
  detail::check(r.length_penalty >= 0 && std::isfinite(r.length_penalty),
                "train.length_penalty must be finite and >= 0, got ", r.length_penalty);
  detail::check(r.plot_examples >= 0, "train.plot_examples must be >= 0, got ", r.plot_examples);
  const auto& o = r.optimizer;
  detail::check(o.learning_rate > 0, "train.optimizer.learning_rate must be > 0, got ", o.learning_rate);
  detail::check(o.beta1 >= 0 && o.beta1 < 1, "train.optimizer.beta1 must lie in [0, 1), got ", o.beta1);
  detail::check(o.beta2 >= 0 && o.beta2 < 1, "train.optimizer.beta2 must lie in [0, 1), got ", o.beta2);
  detail::check(o.eps > 0, "train.optimizer.eps must be > 0, got ", o.eps);
  detail::check(o.clip_norm >= 0, "train.optimizer.clip_norm must be >= 0, got ", o.clip_norm);
  detail::check(o.weight_decay >= 0, "train.optimizer.weight_decay must be >= 0, got ", o.weight_decay);
  detail::check(o.decay_every >= 0, "train.optimizer.decay_every must be >= 0, got ", o.decay_every);
  detail::check(o.decay_factor > 0 && o.decay_factor <= 1,
                "train.optimizer.decay_factor must lie in (0, 1], got ", o.decay_factor);
  detail::check(r.smoothing.uniform >= 0 && r.smoothing.uniform < 1,
                "train.smoothing.uniform must lie in [0, 1), got ", r.smoothing.uniform);
  detail::check(r.smoothing.localized.empty() || r.smoothing.localized.size() == 4,
                "train.smoothing.localized must list 4 weights (offsets -2, -1, +1, +2), got ",
                r.smoothing.localized.size());
  for (double w : r.smoothing.localized) {
    detail::check(w >= 0, "train.smoothing.localized weights must be >= 0, got ", w);
  }
  try {
    decode.validate();
  } catch (const std::exception& e) {
    detail::fail("decode: ", e.what());
  }
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  YAML::Node root = io::load_yaml(path);
  for (const auto& o : overrides) io::apply_override(root, o);
  Config c = config_from_yaml(root, path, overrides);
  c.validate();
  return c;
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
