// Speech manifests (mona/data/manifest.h).
#include "mona/data/manifest.h"

#include <algorithm>
#include <filesystem>

#include "mona/core/error.h"
#include "mona/io/files.h"
#include "text.h"

namespace mona::data {

std::vector<Example> parse_manifest(const std::string& text, const std::string& base_dir,
                                    const std::string& source_name) {
  namespace fs = std::filesystem;
  std::vector<Example> examples;
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
    const fs::path audio = fs::path(relative).is_absolute() ? fs::path(relative) : fs::path(base_dir) / relative;
    detail::check_data(fs::is_regular_file(audio), where, "audio file ", relative, " (", audio.string(),
                       ") does not exist");
    ex.input = {audio.lexically_normal().string()};
    examples.push_back(std::move(ex));
  });
  return examples;
}

std::vector<Example> read_manifest(const std::string& path) {
  const std::string base = std::filesystem::path(path).parent_path().string();
  return parse_manifest(io::read_file(path), base.empty() ? "." : base, path);
}

}  // namespace mona::data
