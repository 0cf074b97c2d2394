// The restart policy of a parameter-server cluster, whose workers train on their own: a
// worker that dies is restarted alone (it rejoins) or, with no restarts left, left behind
// while the others finish; a ps task or the chief that dies takes the variables or the
// checkpoints with it, so the whole cluster restarts and resumes from the last checkpoint.
// A client that dies is replaced by a new one that resumes from the last checkpoint; the
// workers and ps tasks keep running.
#include <optional>

#include "core/base/strings.h"
#include "tools/cadre_launch/restart_policy.h"
#include "tools/cadre_launch/task_output.h"

namespace cadre::launch {

namespace {

class PsRestarts : public RestartPolicy {
 public:
  PsRestarts(const LaunchOptions& options, Processes& processes)
      : RestartPolicy(options, processes) {}

 private:
  std::optional<int> step_training() override {
    for (Child& c : processes_.children()) {
      if (c.task.type == "evaluator" || c.task.serves() || !c.done || c.status == 0 || c.reported) {
        continue;
      }
      if (take_restart(c.status, training_restarts_, options_.max_restarts)) {
        restart(c);
        return std::nullopt;
      }
      report_failure(
          c, c.task.type == "worker" ? "the others go on without it" : "stopping the cluster");
      c.reported = true;
      if (c.task.type != "worker") {
        processes_.stop_all();
        return 1;
      }
    }
    return finished_status();
  }

  void restart(Child& c) {
    std::string count = restart_count(c.status, training_restarts_, options_.max_restarts);
    if (c.task.type == "worker" || c.task.type == "client") {
      print_line("", str_cat("cadre_launch: ", c.task.name(), " ", ended(c.status),
                             "; restarting it", count));
      processes_.stop(c);
      processes_.start(c);
      return;
    }
    print_line("",
               str_cat("cadre_launch: ", c.task.name(), " ", ended(c.status),
                       "; restarting the cluster, which resumes from the last checkpoint", count));
    for (Child& other : processes_.children()) {
      if (other.task.type != "evaluator" && !other.task.serves()) processes_.stop(other);
    }
    for (Child& other : processes_.children()) {
      if (other.task.type != "evaluator" && !other.task.serves()) processes_.start(other);
    }
  }
};

}  // namespace

std::unique_ptr<RestartPolicy> make_ps_restarts(const LaunchOptions& options,
                                                Processes& processes) {
  return std::make_unique<PsRestarts>(options, processes);
}

}  // namespace cadre::launch
