// The restart policy of a cluster whose training tasks step together (no ps tasks): a failed
// training task restarts all of them, which resume from the last checkpoint. In coordinator
// mode a client that dies restarts alone; the workers register with the new one and resume
// from the last checkpoint. With --elastic a worker that fails restarts alone.
#include <sys/wait.h>

#include <optional>

#include "core/base/strings.h"
#include "tools/cadre_launch/restart_policy.h"
#include "tools/cadre_launch/stop_signals.h"
#include "tools/cadre_launch/task_output.h"

namespace cadre::launch {

namespace {

class CollectiveRestarts : public RestartPolicy {
 public:
  CollectiveRestarts(const LaunchOptions& options, Processes& processes)
      : RestartPolicy(options, processes) {}

 private:
  std::optional<int> step_training() override {
    if (std::optional<int> status = restart_failed_client()) return status;
    return restart_failed_training();
  }

  // 1 when a client failed with no restarts left (the cluster is stopped).
  std::optional<int> restart_failed_client() {
    for (Child& c : processes_.children()) {
      if (c.task.type != "client" || !c.done || c.status == 0) continue;
      if (!take_restart(c.status, training_restarts_, options_.max_restarts)) {
        report_failure(c, "stopping the cluster");
        processes_.stop_all();
        return 1;
      }
      print_line("",
                 str_cat("cadre_launch: ", c.task.name(), " ", ended(c.status), "; restarting it",
                         restart_count(c.status, training_restarts_, options_.max_restarts)));
      processes_.stop(c);
      processes_.start(c);
    }
    return std::nullopt;
  }

  // An elastic group's worker that was killed (a signal: preempted, out of memory): restarted
  // alone, or left behind without restarts left. A worker that exits with an error, or after
  // a planned stop (every task's), restarts the training tasks together, as a group that is
  // not elastic does: before the group's first step its members fail with a dead one.
  bool restart_failed_worker() {
    bool chief_finished = false;  // then a restarted worker would find no group to join
    for (const Child& c : processes_.children()) {
      chief_finished |= c.task.type == "chief" && c.done && c.status == 0;
    }
    for (Child& c : processes_.children()) {
      if (c.task.type != "worker" || !c.done || c.status == 0 || c.reported ||
          !WIFSIGNALED(c.status)) {
        continue;
      }
      if (chief_finished) {
        print_line("", str_cat("cadre_launch: ", c.task.name(), " ", ended(c.status),
                               " after the chief finished training; the job's result stands"));
        c.reported = c.after_training = true;
        continue;
      }
      if (!take_restart(c.status, training_restarts_, options_.max_restarts)) {
        report_failure(c, "the others step on without it (--elastic)");
        c.reported = true;
        continue;
      }
      print_line("", str_cat("cadre_launch: ", c.task.name(), " ", ended(c.status),
                             "; restarting it alone, the others step on (--elastic)",
                             restart_count(c.status, training_restarts_, options_.max_restarts)));
      processes_.stop(c);
      processes_.start(c);
      return true;
    }
    return false;
  }

  std::optional<int> restart_failed_training() {
    if (options_.elastic && restart_failed_worker()) return std::nullopt;
    bool failed_training = false;
    int why = 0;  // a planned stop's status when every training task that ended asks for a restart
    for (const Child& c : processes_.children()) {
      if (!c.task.trains() || !c.done || c.status == 0 || c.reported) continue;
      if (!failed_training || stopped_for_restart(why)) why = c.status;
      failed_training = true;
    }
    if (!failed_training) return finished_status();
    if (take_restart(why, training_restarts_, options_.max_restarts)) {
      restart_training_tasks(why);
      return std::nullopt;
    }
    for (const Child& c : processes_.children()) {
      if (c.task.trains() && c.done && c.status != 0) report_failure(c, "stopping the cluster");
    }
    processes_.stop_all();
    return 1;
  }

  void restart_training_tasks(int why) {
    print_line("", str_cat("cadre_launch: a training task ", ended(why),
                           "; restarting the training tasks together",
                           restart_count(why, training_restarts_, options_.max_restarts)));
    // Workers that step together stop after the same step: the others are saving or
    // exiting, and a signal now would be their second, which kills.
    if (stopped_for_restart(why)) wait_for_training_tasks();
    for (Child& c : processes_.children()) {
      if (c.task.trains()) processes_.stop(c);
    }
    for (Child& c : processes_.children()) {
      if (c.task.trains()) processes_.start(c);
    }
  }

  // Until every training task has exited, or for the grace period.
  void wait_for_training_tasks() {
    auto running = [&] {
      for (const Child& c : processes_.children()) {
        if (c.task.trains() && !c.done && c.pid > 0) return true;
      }
      return false;
    };
    processes_.watch_until(Processes::deadline_after(processes_.grace_secs()),
                           [&] { return running() && stop_requests() == 0; });
  }
};

}  // namespace

std::unique_ptr<RestartPolicy> make_collective_restarts(const LaunchOptions& options,
                                                        Processes& processes) {
  return std::make_unique<CollectiveRestarts>(options, processes);
}

}  // namespace cadre::launch
