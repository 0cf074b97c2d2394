// What the CheckpointManager tests share (manager_test.cc, manager_retention_test.cc).
#pragma once

#include <filesystem>
#include <initializer_list>
#include <set>
#include <string>

#include "cadre/checkpoint/state_file.h"

namespace cadre::checkpoint::testing {

// The names of the regular files in `dir`.
inline std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) names.insert(entry.path().filename().string());
  }
  return names;
}

// The state file and the checkpoint files of `steps` ("model.ckpt-<step>.h5").
inline std::set<std::string> checkpoint_files(std::initializer_list<int> steps) {
  std::set<std::string> names = {"checkpoint"};
  for (int step : steps) names.insert(checkpoint_file_name("model.ckpt", step));
  return names;
}

}  // namespace cadre::checkpoint::testing
