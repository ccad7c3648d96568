// YAML configs and overrides (mona/io/yaml.h).
#include "mona/io/yaml.h"

#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "mona/core/error.h"
#include "mona/io/files.h"

namespace mona::io {
namespace {

using detail::check;
using detail::fail;
using detail::fail_data;

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool is_index(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

const char* type_name(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a sequence";
    case YAML::NodeType::Map: return "a map";
    default: return "undefined";
  }
}

// Refuses a map that holds a key twice. YAML says keys are unique, but yaml-cpp keeps both
// entries and every lookup finds the first, so a value appended at the end of a file (a
// second `batch_size:`, a second `train:` block) would be ignored without a word. `path`:
// the keys above `node`, dotted, for the message.
// Sets dst[key] = value, but a map value over a map is merged into it key by key (and so
// on down), so that --set 'train.optimizer={learning_rate: 0.01}' keeps the file's other
// optimizer keys instead of resetting them to their defaults.
void assign(YAML::Node dst, const std::string& key, const YAML::Node& value) {
  YAML::Node existing = dst[key];
  if (value.IsMap() && existing.IsDefined() && existing.IsMap()) {
    for (const auto& kv : value) assign(existing, key_text(kv.first), kv.second);
  } else {
    dst[key] = value;
  }
}

void check_unique_keys(const YAML::Node& node, const std::string& source_name, const std::string& path) {
  if (node.IsMap()) {
    std::map<std::string, int> first_line;
    for (const auto& entry : node) {
      const std::string key = key_text(entry.first);
      const std::string at = path.empty() ? key : path + "." + key;
      const int line = entry.first.Mark().line + 1;
      const auto [seen, fresh] = first_line.emplace(key, line);
      if (!fresh) {
        fail_data(source_name, ":", line, ": duplicate key \"", at, "\" (first on line ", seen->second,
                  "); YAML keys are unique: keep one");
      }
      check_unique_keys(entry.second, source_name, at);
    }
  } else if (node.IsSequence()) {
    for (std::size_t k = 0; k < node.size(); ++k) {
      check_unique_keys(node[k], source_name, path + "[" + std::to_string(k) + "]");
    }
  }
}

}  // namespace

YAML::Node parse_yaml(const std::string& text, const std::string& source_name) {
  try {
    // One document: a second one ("---" and more) would otherwise be dropped unread.
    const std::vector<YAML::Node> documents = YAML::LoadAll(text);
    if (documents.size() > 1) {
      fail_data(source_name, ": expected one YAML document, found ", documents.size(),
                " (separated by '---'); put every setting in one mapping");
    }
    YAML::Node root = documents.empty() ? YAML::Node() : documents.front();
    check_unique_keys(root, source_name, "");
    return root;
  } catch (const YAML::ParserException& e) {
    fail_data(source_name, ":", e.mark.line + 1, ":", e.mark.column + 1, ": YAML parse error: ", e.msg);
  } catch (const YAML::Exception& e) {
    fail_data(source_name, ": YAML error: ", e.what());
  }
}

std::string key_text(const YAML::Node& key) { return key.IsScalar() ? key.Scalar() : YAML::Dump(key); }

YAML::Node load_yaml(const std::string& path) { return parse_yaml(read_file(path), path); }

void apply_override(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  // The example is the key given, when there is one: `eval --set decode.beam` is shown
  // decode.beam=VALUE, not a training key.
  check(eq != std::string::npos, "override \"", assignment, "\": expected key=value (e.g. ",
        trim(assignment).empty() ? std::string("train.batch_size=32") : trim(assignment) + "=VALUE", "), found no '='");
  const std::string key = trim(assignment.substr(0, eq));
  const std::string value_text = trim(assignment.substr(eq + 1));
  check(!key.empty(), "override \"", assignment, "\": empty key before '='");
  check(!value_text.empty(), "override \"", assignment,
        "\": empty value after '=' (write key=null or key=\"\" to set null or an empty string)");

  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const auto dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? dot : dot - start);
    check(!part.empty(), "override \"", assignment, "\": empty component in key \"", key, "\"");
    parts.push_back(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }

  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    fail("override \"", assignment, "\": value is not valid YAML: ", e.what());
  }

  check(root.IsNull() || root.IsMap() || !root.IsDefined() || root.IsSequence(), "override \"",
        assignment, "\": the configuration root is ", type_name(root), ", expected a map");
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);

  // Walk down, creating maps as needed. Node::reset rebinds `cur` (operator= would assign
  // through it and overwrite the parent's value).
  YAML::Node cur;
  cur.reset(root);
  std::string walked;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const std::string& part = parts[k];
    const bool last = k + 1 == parts.size();
    if (cur.IsSequence()) {
      check(is_index(part), "override \"", assignment, "\": \"", walked,
            "\" is a sequence, expected a numeric index after it, got \"", part, "\"");
      const std::size_t i = std::stoul(part);
      check(i < cur.size(), "override \"", assignment, "\": index ", i, " out of range for \"",
            walked, "\" (", cur.size(), " elements)");
      if (last) {
        cur[i] = value;
      } else {
        YAML::Node next;
        next.reset(cur[i]);
        cur.reset(next);
      }
    } else {
      check(cur.IsMap() || cur.IsNull(), "override \"", assignment, "\": \"", walked, "\" is ",
            type_name(cur), ", cannot set \"", key, "\" inside it");
      if (last) {
        assign(cur, part, value);
      } else {
        YAML::Node next;
        next.reset(cur[part]);
        if (!next.IsDefined() || next.IsNull()) {
          cur[part] = YAML::Node(YAML::NodeType::Map);
          next.reset(cur[part]);
        }
        cur.reset(next);
      }
    }
    walked += (walked.empty() ? "" : ".") + part;
  }
}

std::string to_yaml_text(const YAML::Node& root) {
  YAML::Emitter emitter;
  emitter << root;
  check(emitter.good(), "YAML emitter: ", emitter.GetLastError());
  std::string text = emitter.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

void save_yaml_atomic(const std::string& path, const YAML::Node& root) {
  std::string text;
  try {
    text = to_yaml_text(root);
  } catch (const Error& e) {
    fail_data("write ", path, ": ", e.what());
  }
  write_file_atomic(path, text);
}

}  // namespace mona::io
