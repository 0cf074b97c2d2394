// The one temporary directory of the tests: a fresh directory under $TMPDIR (mkdtemp, so
// tests running at once never share one), removed with everything in it when it goes.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace cadre::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cadre_test_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the directory (created or not).
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline std::string write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// A fixture whose tests each get their own TempDir.
class TempDirTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return temp_.file(name); }
  const std::string& dir() const { return temp_.path(); }
  std::string write_file(const std::string& name, const std::string& bytes) const {
    return testing::write_file(path(name), bytes);
  }
  static std::string read_file(const std::string& p) { return testing::read_file(p); }

 private:
  TempDir temp_;
};

}  // namespace cadre::testing
