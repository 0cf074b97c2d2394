// A task's output on the launcher's stdout, each complete line prefixed with "[type:index] ".
#pragma once

#include <string>

namespace cadre::launch {

// Writes prefix + line + "\n" to stdout and flushes it, so that the lines of different
// tasks never mix.
void print_line(const std::string& prefix, const std::string& line);

// The read end of the pipe a task writes its stdout and stderr to, and the output not yet
// ended by a newline. Owns the descriptor (closed on destruction); movable, not copyable.
class TaskOutput {
 public:
  TaskOutput() = default;
  TaskOutput(TaskOutput&& other) noexcept;
  TaskOutput& operator=(TaskOutput&& other) noexcept;
  TaskOutput(const TaskOutput&) = delete;
  TaskOutput& operator=(const TaskOutput&) = delete;
  ~TaskOutput();

  // Takes `fd` (made non-blocking), whose lines are printed after `prefix`; forgets the
  // output of the pipe it had before (which must be closed).
  void open(int fd, std::string prefix);
  // The descriptor to poll, -1 once closed.
  int fd() const { return fd_; }
  // Prints the complete lines written so far. At the end of the output (the task and
  // everything that inherited the pipe exited) prints the unfinished line too and closes
  // the pipe, so that poll() does not report it ready again and again.
  void drain();
  // Drains, then closes the pipe; an unfinished line is dropped.
  void close();

 private:
  int fd_ = -1;
  std::string prefix_;
  std::string partial_;  // output not yet ended by a newline
};

}  // namespace cadre::launch
