// What the checkpoint tests of several processes look at in a model_dir: its files by name,
// a file as it is created (to kill a task while it writes), and cadre_ckpt's verdicts.
#pragma once

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/processes.h"

namespace cadre::testing {

// The names of the files in `dir` that contain `pattern`.
inline std::vector<std::string> files_matching(const std::string& dir, const std::string& pattern) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename();
    if (name.find(pattern) != std::string::npos) found.push_back(name);
  }
  return found;
}

// Blocks (up to 60 s) until a file whose name begins with `a` and contains `b` is created in
// the directory `inotify` watches (IN_CREATE); returns its name, or "" on timeout.
inline std::string await_created(int inotify, const std::string& a, const std::string& b) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  alignas(inotify_event) char buffer[16384];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd ready{inotify, POLLIN, 0};
    if (::poll(&ready, 1, 100) <= 0) continue;
    ssize_t got = ::read(inotify, buffer, sizeof(buffer));
    for (ssize_t at = 0; at < got;) {
      auto* event = reinterpret_cast<inotify_event*>(buffer + at);
      std::string name = event->len ? event->name : "";
      if (name.starts_with(a) && name.find(b) != std::string::npos) return name;
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  return "";
}

// "<exit status>: <output>" of `cadre_ckpt ARGS`.
inline std::string ckpt_tool(const std::string& args) {
  auto [status, output] = run_command(std::string(CADRE_CKPT) + " " + args + " 2>&1");
  return std::to_string(status) + ": " + output;
}

}  // namespace cadre::testing
