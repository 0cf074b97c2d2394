// Starting and waiting for the programs the integration tests run as tasks, and the
// loopback ports they listen on.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <thread>
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

// wait_for with a limit: the exit status, or -1 when the process had not ended after
// `seconds` (it is then killed with SIGKILL and reaped).
inline int wait_for(pid_t pid, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Processes a test started that must not outlive it (ps tasks, which serve until stopped,
// and any task still running when an assertion fails): stop() kills and reaps them with
// SIGKILL, as the destructor does.
class Children {
 public:
  Children() = default;
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() { stop(); }
  pid_t add(pid_t pid) {
    pids_.push_back(pid);
    return pid;
  }
  // Waits for one of them (bounded, as wait_for) and forgets it.
  int wait(pid_t pid, double seconds) {
    int status = wait_for(pid, seconds);
    std::erase(pids_, pid);
    return status;
  }
  void stop() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    pids_.clear();
  }

 private:
  std::vector<pid_t> pids_;
};

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

// Kills one task of a cadre_launch run with SIGKILL, once: the first task of that name to
// start (by the pid of its "started <task> pid=N" line), at the first output line for which
// `when(line)` holds. Pass it as run_command's on_line.
class KillTaskOnce {
 public:
  KillTaskOnce(const std::string& task, std::function<bool(const std::string&)> when)
      : started_("started " + task + " pid=(\\d+)"), when_(std::move(when)) {}
  void operator()(const std::string& line) {
    if (killed_) return;
    std::smatch m;
    if (pid_ < 0 && std::regex_search(line, m, started_)) pid_ = std::stoi(m[1]);
    if (pid_ > 0 && when_(line)) {
      ::kill(pid_, SIGKILL);
      killed_ = true;
    }
  }
  bool killed() const { return killed_; }

 private:
  std::regex started_;
  std::function<bool(const std::string&)> when_;
  pid_t pid_ = -1;
  bool killed_ = false;
};

// Kills tasks of a cadre_launch run, each once, at an output line that matches its trigger:
// the task's latest process (restarts announce their pids in "started" lines), with SIGKILL
// or the signal given (SIGTERM: a planned stop). Task "launcher" is cadre_launch itself, for
// a command that prints "launcher pid=N" first (`echo "launcher pid=$$"; exec cadre_launch
// ...`); one schedule can go on over a rerun of the command. kInOrder looks for a kill's
// trigger only once the kills before it are done (the same task killed again after it came
// back); kAny for every pending kill at each line.
class KillSchedule {
 public:
  enum class Order { kAny, kInOrder };
  explicit KillSchedule(Order order = Order::kAny) : order_(order) {}
  void add(const std::string& task, const std::string& trigger, int signal = SIGKILL) {
    kills_.push_back({task, std::regex(trigger), signal});
  }
  void operator()(const std::string& line) {
    std::smatch m;
    static const std::regex started(R"(^started (\S+) pid=(\d+))");
    static const std::regex launcher(R"(^launcher pid=(\d+))");
    if (std::regex_search(line, m, started)) pids_[m[1]] = std::stoi(m[2]);
    if (std::regex_search(line, m, launcher)) pids_["launcher"] = std::stoi(m[1]);
    for (Kill& kill : kills_) {
      if (kill.done) continue;
      if (std::regex_search(line, kill.trigger)) {
        auto pid = pids_.find(kill.task);
        if (pid != pids_.end()) {
          ::kill(pid->second, kill.signal);
          kill.done = true;
        }
      }
      if (order_ == Order::kInOrder) break;  // the first pending one only
    }
  }
  size_t done() const {
    size_t n = 0;
    for (const Kill& kill : kills_) n += kill.done ? 1 : 0;
    return n;
  }

 private:
  struct Kill {
    std::string task;
    std::regex trigger;
    int signal = SIGKILL;
    bool done = false;
  };
  Order order_;
  std::vector<Kill> kills_;
  std::map<std::string, pid_t> pids_;
};

// A file's whole text (a task's log), empty when it cannot be read.
inline std::string read_log(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The last `n` characters of `text`: what a failed assertion shows of a long log.
inline std::string tail(const std::string& text, size_t n = 3000) {
  return text.size() > n ? text.substr(text.size() - n) : text;
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
