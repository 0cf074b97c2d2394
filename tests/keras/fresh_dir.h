// Model directories of the Keras tests (not of their helper program, which has no gtest).
#pragma once

#include <filesystem>
#include <string>

#include "tests/support/temp_dir.h"

namespace cadre::keras::testing {

// An empty directory for `name`, inside one that is this process's own (tests running at
// once never share it) and goes with everything in it when the process exits.
inline std::string fresh_dir(const std::string& name) {
  static const ::cadre::testing::TempDir root;
  std::string dir = root.file(name);
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace cadre::keras::testing
