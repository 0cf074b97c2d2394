// What the launcher does when a task ends (LaunchOptions::max_restarts): which tasks
// restart, how the restarts are counted, and when the cluster is done. Two policies, one per
// kind of cluster: collective (collective_restarts.cc) and parameter server (ps_restarts.cc);
// the evaluator's restarts are the same in both.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tools/cadre_launch/launcher.h"
#include "tools/cadre_launch/processes.h"

namespace cadre::launch {

class RestartPolicy {
 public:
  // The policy for the cluster `options` describe (with ps tasks or without).
  static std::unique_ptr<RestartPolicy> make(const LaunchOptions& options, Processes& processes);
  virtual ~RestartPolicy() = default;

  // One look at the tasks, after reaping: restarts those that ended and may restart, stops
  // the cluster when one may not. Returns the launcher's exit status once the cluster is done.
  std::optional<int> step();

 protected:
  RestartPolicy(const LaunchOptions& options, Processes& processes)
      : options_(options), processes_(processes) {}

  // The part of step() that differs between the kinds of cluster.
  virtual std::optional<int> step_training() = 0;

  // Whether a task that ended with `status` may be restarted: a planned stop always (up to
  // kMaxPlannedRestarts), a failure while `used` < `allowed` (counted in `used`).
  bool take_restart(int status, int& used, int allowed);
  // " (restart N of M)" for a failure, "" for a planned stop.
  static std::string restart_count(int status, int used, int allowed);
  // How a task that ended with `status` ended, in words.
  static std::string ended(int status);
  // Prints that the task failed, then what the launcher does about it (`then`).
  static void report_failure(const Child& c, const std::string& then);
  // Once every task but the ps tasks (which serve until training ends) has exited, stops the
  // rest; 0 when all of them succeeded, else 1.
  std::optional<int> finished_status();

  const LaunchOptions& options_;
  Processes& processes_;
  int training_restarts_ = 0;

 private:
  // The evaluator only reads checkpoints: its death never touches training. It restarts
  // alone (its durable cursor says where it was), up to max(max_restarts, 3) times of its
  // own; after that training goes on without it and the launcher's exit status is 1.
  void restart_failed_evaluator();
  // The model server is no part of the job: its end is reported once, never restarted.
  void report_failed_server();

  int evaluator_restarts_ = 0;
  int planned_restarts_ = 0;
};

// The policies, for RestartPolicy::make.
std::unique_ptr<RestartPolicy> make_collective_restarts(const LaunchOptions& options,
                                                        Processes& processes);
std::unique_ptr<RestartPolicy> make_ps_restarts(const LaunchOptions& options, Processes& processes);

}  // namespace cadre::launch
