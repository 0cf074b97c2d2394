// Who left a file behind (a lease, a temporary file of a save in flight), in a form that
// another process can check later: the host, the pid and the process's start time, so that
// a pid reused by an unrelated process is not taken for the owner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cadre {

struct ProcessId {
  std::string host;
  int64_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/<pid>/stat's starttime: clock ticks after boot

  bool operator==(const ProcessId&) const = default;
};

// The calling process.
const ProcessId& this_process();
// Process `pid` of this host, or nullopt when there is none.
std::optional<ProcessId> process_on_this_host(int64_t pid);

// "<pid>-<start_ticks>-<host>", which file names may hold (a host name has no '/'), and back;
// nullopt for text that is not one.
std::string to_token(const ProcessId& id);
std::optional<ProcessId> parse_process_token(std::string_view token);

enum class Liveness { kAlive, kDead, kUnknown };

// Whether `id` still runs: kDead when it is on this host and no process with that pid and
// start time exists, or that process has exited and is not yet reaped (a zombie); kUnknown
// for another host's process.
Liveness liveness(const ProcessId& id);

}  // namespace cadre
