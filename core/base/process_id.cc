#include "core/base/process_id.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <sstream>

namespace cadre {
namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

// The text of /proc/<pid>/stat, or nullopt when it cannot be read. Read with read(2), not a
// stream: reading the file of a process that is reaped meanwhile fails with ESRCH, and
// libstdc++'s filebuf throws on a failed read (a chief once died of "basic_filebuf::underflow
// error reading the file: No such process" while checking a killed evaluator's lease).
std::optional<std::string> proc_stat_of(int64_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[1024];
  while (true) {
    ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      ::close(fd);
      if (got < 0) return std::nullopt;
      return text;
    }
    text.append(buffer, static_cast<size_t>(got));
  }
}

// Field 22 of /proc/<pid>/stat's text, after the command name (which may hold spaces and
// parentheses, so fields are counted from the last ')').
std::optional<uint64_t> start_ticks_in(const std::string& text) {
  size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  uint64_t ticks = 0;
  auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), ticks);
  if (error != std::errc() || end != field.data() + field.size()) return std::nullopt;
  return ticks;
}

std::optional<uint64_t> start_ticks_of(int64_t pid) {
  std::optional<std::string> stat = proc_stat_of(pid);
  if (!stat) return std::nullopt;
  return start_ticks_in(*stat);
}

// A process that has exited and waits to be reaped (state Z, or X while it goes): it runs
// no more, though its /proc entry stays until its parent (init, for an orphan, which may
// take a second or more) reaps it.
bool has_exited(const std::string& stat) {
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() &&
         (stat[close + 2] == 'Z' || stat[close + 2] == 'X');
}

template <typename T>
std::optional<T> number(std::string_view text) {
  T value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

const ProcessId& this_process() {
  // Once per thread, and again in a fork()ed child (whose pid differs from its parent's).
  thread_local ProcessId id;
  if (id.pid != ::getpid()) {
    id.host = host_name();
    id.pid = ::getpid();
    id.start_ticks = start_ticks_of(id.pid).value_or(0);
  }
  return id;
}

std::optional<ProcessId> process_on_this_host(int64_t pid) {
  std::optional<uint64_t> ticks = start_ticks_of(pid);
  if (!ticks) return std::nullopt;
  return ProcessId{this_process().host, pid, *ticks};
}

std::string to_token(const ProcessId& id) {
  return std::to_string(id.pid) + "-" + std::to_string(id.start_ticks) + "-" + id.host;
}

std::optional<ProcessId> parse_process_token(std::string_view token) {
  size_t first = token.find('-');
  if (first == std::string_view::npos) return std::nullopt;
  size_t second = token.find('-', first + 1);
  if (second == std::string_view::npos || second + 1 >= token.size()) return std::nullopt;
  auto pid = number<int64_t>(token.substr(0, first));
  auto ticks = number<uint64_t>(token.substr(first + 1, second - first - 1));
  if (!pid || !ticks || *pid <= 0) return std::nullopt;
  ProcessId id;
  id.pid = *pid;
  id.start_ticks = *ticks;
  id.host = std::string(token.substr(second + 1));
  if (id.host.find('/') != std::string::npos) return std::nullopt;
  return id;
}

Liveness liveness(const ProcessId& id) {
  if (id.host != this_process().host) return Liveness::kUnknown;
  std::optional<std::string> stat = proc_stat_of(id.pid);
  if (!stat || has_exited(*stat)) return Liveness::kDead;
  std::optional<uint64_t> ticks = start_ticks_in(*stat);
  return ticks && *ticks == id.start_ticks ? Liveness::kAlive : Liveness::kDead;
}

}  // namespace cadre
