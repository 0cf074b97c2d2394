// Helpers shared by the checkpoint tests.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cadre/checkpoint/contents.h"
#include "cadre/tensor/tensor.h"
#include "tests/checkpoint/test_model.h"

namespace cadre::checkpoint::testing {

// A fresh directory under $TMPDIR, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cadre_ckpt_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void expect_equal_tensors(const Tensor& expected, const Tensor& actual,
                                 const std::string& name) {
  ASSERT_EQ(expected.shape(), actual.shape()) << name;
  ASSERT_EQ(expected.dtype(), actual.dtype()) << name;
  Tensor a = expected.to(Device::cpu()).contiguous();
  Tensor b = actual.to(Device::cpu()).contiguous();
  ASSERT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.nbytes())) << name;
}

// Flips one bit of the byte at `offset` in `path`.
inline void flip_byte(const std::string& path, std::streamoff offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  char byte = 0;
  file.read(&byte, 1);
  byte ^= 0x10;
  file.seekp(offset);
  file.write(&byte, 1);
}

inline std::string read_text(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace cadre::checkpoint::testing
