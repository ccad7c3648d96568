// Scratch directories for tests: created unique (mkdtemp), removed with everything in them
// at scope exit; EXPECT_ERROR_CONTAINS for mona::Error messages.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mona/core/error.h"

namespace mona::test {

class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "mona_test_XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string operator/(const std::string& name) const { return file(name); }

  /// Names of the entries in the directory (sorted).
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

inline void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

inline std::string read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace mona::test

/// Asserts that `stmt` throws mona::Error whose message contains every given substring.
#define EXPECT_ERROR_CONTAINS(stmt, ...)                                              \
  do {                                                                                \
    bool thrown_ = false;                                                             \
    try {                                                                             \
      stmt;                                                                           \
    } catch (const mona::Error& e_) {                                                 \
      thrown_ = true;                                                                 \
      for (const std::string& part_ : std::vector<std::string>{__VA_ARGS__}) {       \
        EXPECT_NE(std::string(e_.what()).find(part_), std::string::npos)              \
            << "message \"" << e_.what() << "\" lacks \"" << part_ << "\"";          \
      }                                                                               \
    }                                                                                 \
    EXPECT_TRUE(thrown_) << #stmt " did not throw mona::Error";                       \
  } while (0)
