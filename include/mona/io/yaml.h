// mona/io/yaml.h: YAML configuration files and command-line overrides (yaml-cpp).
//
// A configuration is a YAML mapping, possibly nested:
//
//   model:
//     attention: {type: mocha, chunk: 4}
//   optim: {lr: 0.001}
//
// Overrides from the command line (`--set key=value`) address a nested key with dots and
// give its value as YAML:
//
//   optim.lr=0.0005            scalar (kept as the text "0.0005"; yaml-cpp converts on as<>)
//   model.attention.type=gmm   overwrites an existing key
//   data.extra.flag=true       creates the missing maps "extra" on the way
//   train.buckets=[10, 20, 40] flow sequence;  x={a: 1} flow map (over a map: merged key by
//                              key, so x's other keys stay)
//   layers.1.size=256          a numeric component indexes an existing sequence
//   name="a b=c"               quoted string; everything after the first '=' is the value
//
// Malformed assignments are refused with mona::Error naming the assignment and the problem:
// no '=', an empty key or key component ("a..b"), an empty value, a value that is not valid
// YAML, or a path through a scalar ("optim.lr.x=1" when optim.lr is 0.001) or past the end
// of a sequence.
//
// Files are written atomically (mona/io/files.h). Errors name the file; YAML syntax
// errors also the 1-based line and column: "cfg.yaml:3:7: YAML parse error: ...".
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

namespace mona::io {

/// Parses the YAML file at `path`. An empty file gives a Null node. Throws mona::Error
/// naming the file (unreadable), file:line:column (syntax error) or file:line (a key given
/// twice in one map, which yaml-cpp would resolve to the first silently).
YAML::Node load_yaml(const std::string& path);

/// Parses YAML text as load_yaml does; `source_name` stands for the file in error messages.
YAML::Node parse_yaml(const std::string& text, const std::string& source_name);

/// Applies one "a.b.c=value" override to `root` in place (see the file comment). A Null
/// root becomes a map. Throws mona::Error naming `assignment` when it is malformed.
void apply_override(YAML::Node& root, const std::string& assignment);

/// A map key as text: a scalar's value, else the key's YAML (a flow sequence or map).
std::string key_text(const YAML::Node& key);

/// YAML text of `root` (block style as yaml-cpp emits it), ending with a newline.
std::string to_yaml_text(const YAML::Node& root);

/// Writes to_yaml_text(root) to `path` atomically. Errors name the path.
void save_yaml_atomic(const std::string& path, const YAML::Node& root);

}  // namespace mona::io
