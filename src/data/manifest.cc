// Speech manifests (mona/data/manifest.h).
#include "mona/data/manifest.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "mona/core/error.h"
#include "mona/io/files.h"
#include "text.h"

namespace mona::data {

namespace {

std::filesystem::path resolve(const std::string& relative, const std::string& base_dir) {
  namespace fs = std::filesystem;
  return (fs::path(relative).is_absolute() ? fs::path(relative) : fs::path(base_dir) / relative).lexically_normal();
}

// A line's TAB-separated fields.
std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  for (size_t begin = 0;;) {
    const size_t tab = line.find('\t', begin);
    fields.push_back(line.substr(begin, tab == std::string::npos ? std::string::npos : tab - begin));
    if (tab == std::string::npos) break;
    begin = tab + 1;
  }
  return fields;
}

// The side file of a manifest X.tsv named X<suffix>, or "" if none exists.
std::string side_file_path(const std::string& manifest_path, const char* suffix) {
  std::filesystem::path p(manifest_path);
  if (p.extension() != ".tsv") return "";
  p.replace_extension(suffix);
  return std::filesystem::is_regular_file(p) ? p.string() : "";
}

}  // namespace

std::vector<Example> parse_manifest(const std::string& text, const std::string& base_dir,
                                    const std::string& source_name, std::vector<int64_t>* lines) {
  namespace fs = std::filesystem;
  std::vector<Example> examples;
  if (lines) lines->clear();
  for_each_nonblank_line(text, [&](const std::string& line, int64_t line_no) {
    const std::string where = source_name + ":" + std::to_string(line_no) + ": ";
    const auto tabs = std::count(line.begin(), line.end(), '\t');
    detail::check_data(tabs == 1, where, "expected 1 TAB separating the audio path and the transcript, found ", tabs);
    const std::size_t tab = line.find('\t');
    const std::string relative = line.substr(0, tab);
    detail::check_data(!relative.empty(), where, "empty audio path (nothing before the TAB)");
    Example ex;
    ex.output = tokenize(line.substr(tab + 1));
    detail::check_data(!ex.output.empty(), where, "empty transcript (no tokens after the TAB)");
    check_no_reserved_symbols(ex.output, where, "transcript");
    const fs::path audio = resolve(relative, base_dir);
    detail::check_data(fs::is_regular_file(audio), where, "audio file ", relative, " (", audio.string(),
                       ") does not exist");
    ex.input = {audio.string()};
    examples.push_back(std::move(ex));
    if (lines) lines->push_back(line_no);
  });
  return examples;
}

std::vector<Example> read_manifest(const std::string& path, std::vector<int64_t>* lines) {
  const std::string base = std::filesystem::path(path).parent_path().string();
  return parse_manifest(io::read_file(path), base.empty() ? "." : base, path, lines);
}

WordTimes parse_word_times(const std::string& text, const std::string& base_dir, const std::string& source_name) {
  WordTimes times;
  for_each_nonblank_line(text, [&](const std::string& line, int64_t line_no) {
    const std::string where = source_name + ":" + std::to_string(line_no) + ": ";
    const std::vector<std::string> fields = split_tabs(line);
    detail::check_data(fields.size() == 4, where, "expected 4 TAB-separated fields (audio path, word, start s, end s), found ",
                       fields.size());
    detail::check_data(!fields[0].empty() && !fields[1].empty(), where, "empty audio path or word");
    auto seconds = [&](const std::string& field, const char* what) {
      char* end = nullptr;
      const double v = std::strtod(field.c_str(), &end);
      detail::check_data(!field.empty() && *end == '\0' && std::isfinite(v) && v >= 0, where, what,
                         ": expected seconds >= 0, got \"", field, "\"");
      return v;
    };
    WordTime w{fields[1], seconds(fields[2], "start"), seconds(fields[3], "end")};
    detail::check_data(w.end >= w.start, where, "end ", w.end, " s is before start ", w.start, " s");
    times[resolve(fields[0], base_dir).string()].push_back(std::move(w));
  });
  return times;
}

WordTimes read_word_times(const std::string& path) {
  const std::string base = std::filesystem::path(path).parent_path().string();
  return parse_word_times(io::read_file(path), base.empty() ? "." : base, path);
}

std::string word_times_path(const std::string& manifest_path) { return side_file_path(manifest_path, ".words.tsv"); }

VoiceGroups parse_voice_groups(const std::string& text, const std::string& base_dir, const std::string& source_name) {
  VoiceGroups groups;
  for_each_nonblank_line(text, [&](const std::string& line, int64_t line_no) {
    const std::string where = source_name + ":" + std::to_string(line_no) + ": ";
    const std::vector<std::string> fields = split_tabs(line);
    detail::check_data(fields.size() == 3, where, "expected 3 TAB-separated fields (audio path, voice, speaker), found ",
                       fields.size());
    detail::check_data(!fields[0].empty() && !fields[1].empty() && !fields[2].empty(), where,
                       "empty audio path, voice or speaker");
    const std::string group = fields[1].substr(0, fields[1].find('/'));
    detail::check_data(!group.empty(), where, "voice '", fields[1], "': expected <group>/<name> with a group before the '/'");
    const std::string path = resolve(fields[0], base_dir).string();
    const bool added = groups.emplace(path, group).second;
    detail::check_data(added, where, "audio file ", fields[0], " is listed twice");
  });
  return groups;
}

VoiceGroups read_voice_groups(const std::string& path) {
  const std::string base = std::filesystem::path(path).parent_path().string();
  return parse_voice_groups(io::read_file(path), base.empty() ? "." : base, path);
}

std::string voices_path(const std::string& manifest_path) { return side_file_path(manifest_path, ".voices.tsv"); }

}  // namespace mona::data
