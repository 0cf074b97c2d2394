// The check that a run which lost tasks, or stopped and resumed, ends where an undisturbed
// one does: two checkpoints with the same logical variables, bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "cadre/checkpoint/reader.h"

namespace cadre::testing {

inline void expect_same_variables(const std::string& a_path, const std::string& b_path) {
  auto a = checkpoint::CheckpointReader::open(a_path);
  auto b = checkpoint::CheckpointReader::open(b_path);
  ASSERT_EQ(a->variables().size(), b->variables().size());
  for (const auto& [name, info] : a->variables()) {
    Tensor x = a->read(name), y = b->read(name);
    ASSERT_EQ(x.nbytes(), y.nbytes()) << name;
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0) << name << " differs";
  }
}

}  // namespace cadre::testing
