#include "tools/cadre_launch/processes.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "cadre/base/errors.h"
#include "cadre/estimator/planned_stop.h"
#include "core/base/clock.h"
#include "core/base/strings.h"
#include "tools/cadre_launch/stop_signals.h"

namespace cadre::launch {

namespace {

// In the forked child: becomes the task, or exits 127.
[[noreturn]] void exec_task(const Child& c, int pipe_out, const std::vector<std::string>& command,
                            int threads) {
  ::dup2(pipe_out, STDOUT_FILENO);
  ::dup2(pipe_out, STDERR_FILENO);
  ::close(pipe_out);
  ::setpgid(0, 0);
  if (!std::getenv("CADRE_NUM_THREADS")) {
    ::setenv("CADRE_NUM_THREADS", std::to_string(threads).c_str(), 1);
  }
  ::setenv("GOMP_SPINCOUNT", "1000", 0);
  // A process outside the cluster (the model server) must not take the launcher's own
  // TF_CONFIG, if it has one, for a role.
  if (!c.env.count("TF_CONFIG")) ::unsetenv("TF_CONFIG");
  for (const auto& [name, value] : c.env) ::setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "cadre_launch: cannot run %s\n", argv[0]);
  ::_exit(127);
}

}  // namespace

std::string Task::name() const { return str_cat(type, ":", index); }

bool stopped_for_restart(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == kRestartExitCode;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return str_cat("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return str_cat("killed by signal ", WTERMSIG(status));
  return "stopped";
}

Processes::Processes(std::vector<Child> children, std::vector<std::string> command, int threads,
                     double grace_secs)
    : children_(std::move(children)),
      command_(std::move(command)),
      threads_(threads),
      grace_secs_(grace_secs),
      launcher_(::getpid()) {}

Processes::~Processes() { stop_all(); }

Processes::Clock::time_point Processes::deadline_after(double secs) {
  return Clock::now() + from_seconds(secs);
}

void Processes::start(Child& c) {
  // Asked to stop while a restart stopped the tasks it replaces (each within its grace
  // period): start nothing, and shut_down ends the cluster at the next look.
  if (stop_requests() > 0) return;
  int fds[2];
  if (::pipe(fds) != 0) throw UnavailableError("cadre_launch: pipe failed");
  pid_t pid = ::fork();
  if (pid == 0) {
    // A task never outlives its launcher, even one killed with SIGKILL.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher_) ::_exit(1);  // the launcher died before prctl
    ::close(fds[0]);
    exec_task(c, fds[1], c.command.empty() ? command_ : c.command, threads_);
  }
  ::close(fds[1]);
  c.out.open(fds[0], "[" + c.task.name() + "] ");
  c.pid = pid;
  c.done = false;
  c.status = 0;
  c.reported = false;
  print_line("", str_cat("started ", c.task.name(), " pid=", pid));
}

void Processes::stop(Child& c) {
  if (!c.done && c.pid > 0) {
    ::kill(-c.pid, SIGTERM);  // a planned stop: a checkpoint of the step it reached
    auto deadline = deadline_after(grace_secs_);
    while (Clock::now() < deadline) {
      if (::waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
        c.done = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(c);
  }
  c.out.close();
}

void Processes::stop_all() {
  for (Child& c : children_) stop(c);
}

bool Processes::kill(Child& c) {
  if (c.done || c.pid <= 0) return false;
  ::kill(-c.pid, SIGKILL);
  ::waitpid(c.pid, &c.status, 0);
  c.done = true;
  return true;
}

void Processes::pump_output(int timeout_ms) {
  std::vector<pollfd> fds;
  for (Child& c : children_) {
    if (c.out.fd() >= 0) fds.push_back({c.out.fd(), POLLIN, 0});
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return;
  }
  ::poll(fds.data(), fds.size(), timeout_ms);
  for (Child& c : children_) c.out.drain();
}

void Processes::reap() {
  for (Child& c : children_) {
    if (c.done || c.pid <= 0) continue;
    if (::waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
      c.done = true;
      c.out.drain();
    }
  }
}

void Processes::watch_until(Clock::time_point deadline, const std::function<bool()>& go_on) {
  while (Clock::now() < deadline && go_on()) {
    pump_output(100);
    reap();
  }
}

}  // namespace cadre::launch
