#include "tools/cadre_launch/stop_signals.h"

#include <signal.h>

#include <csignal>

#include "cadre/estimator/planned_stop.h"
#include "core/base/strings.h"
#include "tools/cadre_launch/processes.h"
#include "tools/cadre_launch/task_output.h"

namespace cadre::launch {

namespace {

// The signal that asked the launcher to stop (0: none) and how many such signals came.
volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_stop_requests = 0;

void on_stop_signal(int signal) {
  g_stop_signal = signal;
  g_stop_requests = g_stop_requests + 1;
}

}  // namespace

void catch_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &action, nullptr);
}

int stop_requests() { return g_stop_requests; }
int stop_signal() { return g_stop_signal; }

int shut_down(Processes& processes, int signal, double grace_secs) {
  print_line("", str_cat("cadre_launch: got signal ", signal, "; a planned stop of every task ",
                         "within ", grace_secs, " s (again to kill them at once)"));
  auto deadline = Processes::deadline_after(grace_secs);
  auto all_done = [&](bool ps) {
    for (const Child& c : processes.children()) {
      if ((c.task.type == "ps") == ps && !c.done && c.pid > 0) return false;
    }
    return true;
  };
  for (bool ps : {false, true}) {
    for (Child& c : processes.children()) {
      if ((c.task.type == "ps") == ps && !c.done && c.pid > 0) ::kill(-c.pid, signal);
    }
    processes.watch_until(deadline, [&] { return stop_requests() < 2 && !all_done(ps); });
  }
  bool clean = true;
  for (Child& c : processes.children()) {
    bool killed = processes.kill(c);
    c.out.drain();
    if (c.task.serves()) continue;  // the model server is no part of the job's state
    clean = clean && !killed && (c.status == 0 || stopped_for_restart(c.status));
  }
  if (clean) {
    print_line("", "cadre_launch: every task stopped cleanly; the same command resumes");
    return kRestartExitCode;
  }
  return 128 + signal;
}

}  // namespace cadre::launch
