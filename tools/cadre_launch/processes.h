// The tasks' processes: each started in its own process group with its TF_CONFIG and
// environment, its output read through a pipe, stopped with a planned stop's notice
// (SIGTERM, then SIGKILL after the grace period), and reaped.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tools/cadre_launch/task_output.h"

namespace cadre::launch {

struct Task {
  std::string type;
  int index = 0;
  std::string name() const;  // "type:index"
  bool trains() const { return type == "chief" || type == "worker"; }
  // The model server beside the job (LaunchOptions::server_command): not a cluster task.
  bool serves() const { return type == "server"; }
};

// One task and the process that runs it now.
struct Child {
  Task task;
  std::map<std::string, std::string> env{};  // set in its environment (TF_CONFIG, security)
  std::vector<std::string> command{};        // its own command line (empty: the job's)
  pid_t pid = -1;
  TaskOutput out{};  // its stdout and stderr
  bool done = false;
  int status = 0;         // waitpid's, once done
  bool reported = false;  // its failure was told (and the cluster went on without it)
  // An elastic group's worker that died once the chief had finished training: the job's
  // result stands (a restart would find no group), so its end fails nothing.
  bool after_training = false;
};

// Whether a task that ended with `status` exited after a planned stop, asking to be run
// again (kRestartExitCode).
bool stopped_for_restart(int status);
// `status` in words: "exit status N", "killed by signal N".
std::string describe(int status);

// The children of one launcher. Not thread-safe: the launcher's one thread drives it. The
// destructor stops every task still running.
class Processes {
 public:
  using Clock = std::chrono::steady_clock;

  // Each task runs `command` with CADRE_NUM_THREADS=`threads` (unless the launcher's own
  // environment sets it), and gets `grace_secs` to stop.
  Processes(std::vector<Child> children, std::vector<std::string> command, int threads,
            double grace_secs);
  Processes(const Processes&) = delete;
  Processes& operator=(const Processes&) = delete;
  ~Processes();

  std::vector<Child>& children() { return children_; }
  double grace_secs() const { return grace_secs_; }
  static Clock::time_point deadline_after(double secs);

  // Starts the task anew (its earlier process must have been stopped); starts nothing once
  // the launcher was asked to stop, since the next look at the cluster shuts it down.
  // Throws UnavailableError when no pipe can be made.
  void start(Child& c);
  // A planned stop: SIGTERM to its process group, SIGKILL after the grace period; then its
  // remaining output is printed and its pipe closed.
  void stop(Child& c);
  void stop_all();
  // SIGKILL to a task still running, and waits for it; whether it was running.
  bool kill(Child& c);

  // Waits up to `timeout_ms` for output, and prints what came.
  void pump_output(int timeout_ms);
  // Notes the tasks that exited (done, status) and prints the rest of their output.
  void reap();
  // Pumps output and reaps while `go_on()` holds, until `deadline`.
  void watch_until(Clock::time_point deadline, const std::function<bool()>& go_on);

 private:
  std::vector<Child> children_;
  std::vector<std::string> command_;
  int threads_;
  double grace_secs_;
  pid_t launcher_;
};

}  // namespace cadre::launch
