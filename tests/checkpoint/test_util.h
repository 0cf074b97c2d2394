// Helpers shared by the checkpoint tests.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/contents.h"
#include "cadre/checkpoint/reader.h"
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

// Flips every 7th byte of the checkpoint at `path` in turn (writing each damaged copy to
// `scratch`): each flip must be harmless (padding, free space) or reported as an error,
// never a crash or a wrong value; most must be reported.
inline void expect_every_flip_noticed(const std::string& path, const std::string& scratch) {
  std::map<std::string, std::string> expected;
  int64_t step = 0;
  {
    auto reader = CheckpointReader::open(path);
    step = reader->global_step();
    for (const auto& [name, info] : reader->variables()) {
      Tensor value = reader->read(name);
      expected[name] = std::string(static_cast<const char*>(value.raw_data()), value.nbytes());
    }
  }
  std::string original = read_file(path);
  int harmless = 0, detected = 0;
  for (size_t at = 0; at < original.size(); at += 7) {
    std::string damaged = original;
    damaged[at] ^= 0x10;
    write_file(scratch, damaged);
    try {
      auto reader = CheckpointReader::open(scratch);
      if (!reader->verify().empty()) {
        ++detected;
        continue;
      }
      std::map<std::string, std::string> actual;
      for (const auto& [name, info] : reader->variables()) {
        Tensor value = reader->read(name);
        actual[name] = std::string(static_cast<const char*>(value.raw_data()), value.nbytes());
      }
      EXPECT_EQ(actual, expected) << "byte " << at << " changed values unnoticed";
      EXPECT_EQ(reader->global_step(), step) << "byte " << at;
      ++harmless;
    } catch (const Error& error) {
      ++detected;
    }
  }
  EXPECT_GT(detected, harmless);
}

}  // namespace cadre::checkpoint::testing
