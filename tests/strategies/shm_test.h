// What the shared-memory collective's tests share (shm_test.cc, shm_process_test.cc).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/base/strings.h"

namespace cadre::testing {

// The names this process's segments have in /dev/shm (they should have none once every
// rank has joined).
inline std::vector<std::string> own_segment_names() {
  std::vector<std::string> names;
  std::string pid = str_cat("-", ::getpid(), "-");
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = entry.path().filename().string();
    if (name.rfind("cadre-", 0) == 0 && name.find(pid) != std::string::npos) names.push_back(name);
  }
  return names;
}

}  // namespace cadre::testing
