#include "tools/cadre_launch/restart_policy.h"

#include <algorithm>

#include "core/base/strings.h"
#include "tools/cadre_launch/task_output.h"

namespace cadre::launch {

std::unique_ptr<RestartPolicy> RestartPolicy::make(const LaunchOptions& options,
                                                   Processes& processes) {
  if (options.ps > 0) return make_ps_restarts(options, processes);
  return make_collective_restarts(options, processes);
}

std::optional<int> RestartPolicy::step() {
  restart_failed_evaluator();
  report_failed_server();
  return step_training();
}

void RestartPolicy::report_failed_server() {
  for (Child& c : processes_.children()) {
    if (!c.task.serves() || !c.done || c.reported) continue;
    print_line("", str_cat("cadre_launch: ", c.task.name(), " ended (", describe(c.status),
                           "); training goes on without it"));
    c.reported = true;
  }
}

void RestartPolicy::restart_failed_evaluator() {
  for (Child& c : processes_.children()) {
    if (c.task.type != "evaluator" || !c.done || c.status == 0 || c.reported) continue;
    const int allowed = std::max(options_.max_restarts, 3);
    if (take_restart(c.status, evaluator_restarts_, allowed)) {
      print_line("", str_cat("cadre_launch: ", c.task.name(), " ", ended(c.status),
                             "; restarting it alone",
                             restart_count(c.status, evaluator_restarts_, allowed)));
      processes_.stop(c);
      processes_.start(c);
    } else {
      report_failure(c, "training goes on without it");
      c.reported = true;
    }
  }
}

bool RestartPolicy::take_restart(int status, int& used, int allowed) {
  if (stopped_for_restart(status)) return planned_restarts_++ < kMaxPlannedRestarts;
  if (used >= allowed) return false;
  ++used;
  return true;
}

std::string RestartPolicy::restart_count(int status, int used, int allowed) {
  if (stopped_for_restart(status)) return "";
  return str_cat(" (restart ", used, " of ", allowed, ")");
}

std::string RestartPolicy::ended(int status) {
  if (stopped_for_restart(status)) return "stopped for a restart (a planned stop)";
  return str_cat("failed (", describe(status), ")");
}

void RestartPolicy::report_failure(const Child& c, const std::string& then) {
  print_line(
      "", str_cat("cadre_launch: ", c.task.name(), " failed (", describe(c.status), "); ", then));
}

std::optional<int> RestartPolicy::finished_status() {
  bool all_succeeded = true;
  for (const Child& c : processes_.children()) {
    if (c.task.serves()) continue;  // stopped below, whatever it was doing
    if (c.task.type != "ps" && !c.done) return std::nullopt;
    if (c.done && c.status != 0 && !c.after_training) all_succeeded = false;
  }
  processes_.stop_all();
  return all_succeeded ? 0 : 1;
}

}  // namespace cadre::launch
