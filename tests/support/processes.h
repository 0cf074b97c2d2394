// Starting and waiting for the programs the integration tests run as tasks, and the
// loopback ports they listen on.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace cadre::testing {

// Forks and runs `argv` with `env` (name, value) set; stderr to `log` when not empty.
inline pid_t spawn(const std::vector<std::string>& argv,
                   const std::vector<std::pair<std::string, std::string>>& env,
                   const std::string& log = "") {
  pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    if (!log.empty() && std::freopen(log.c_str(), "w", stderr) == nullptr) ::_exit(126);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

// The exit status, or 128 + the signal that ended it.
inline int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct CommandResult {
  int status = -1;  // the exit status, -1 when a signal ended it
  std::string output;
};

// Runs a shell command to its end, handing each line of its output to `on_line` as it comes
// (which may, say, kill one of the processes it started).
template <typename F>
CommandResult run_command(const std::string& command, F on_line) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe)) {
    result.output += line;
    on_line(std::string(line));
  }
  int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline CommandResult run_command(const std::string& command) {
  return run_command(command, [](const std::string&) {});
}

// A loopback port nobody listens on right now (the kernel's choice for port 0).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace cadre::testing
