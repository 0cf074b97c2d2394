// Helpers shared by the checkpoint tests.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cadre/checkpoint/contents.h"
#include "cadre/tensor/tensor.h"
#include "tests/checkpoint/small_model.h"
#include "tests/support/temp_dir.h"

namespace cadre::checkpoint::testing {

using cadre::testing::read_file;
using cadre::testing::TempDir;
using cadre::testing::write_file;

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

}  // namespace cadre::checkpoint::testing
