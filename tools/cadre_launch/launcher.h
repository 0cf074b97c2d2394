// A local cluster for one program: free loopback ports, TF_CONFIG per task, each task's
// output prefixed with "[type:index] ", and restarts (../shared/CONTRACTS.md,
// tools/cadre_launch).
#pragma once

#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/estimator/planned_stop.h"

namespace cadre::launch {

struct LaunchOptions {
  // Coordinator mode (docs/DEPLOY.md): a client task drives the workers, in place of the
  // chief (0 or 1; with a client, chief must be 0).
  int client = 0;
  int chief = 1;
  int workers = 0;
  int ps = 0;
  int evaluator = 0;
  // Restarts after a task dies. Collective strategies (no ps tasks): the training tasks
  // restart together and resume from the last checkpoint. With ps tasks: a worker restarts
  // alone and rejoins; a ps task or the chief restarts the whole cluster, which resumes from
  // the last checkpoint. Without restarts left, a dead worker of a ps cluster is left
  // behind (the others finish; the exit status is 1); any other death of a training or ps
  // task stops the cluster. With a client, the client too restarts alone, and the new one
  // resumes from the last checkpoint while the workers keep running. The evaluator restarts
  // alone, up to max(max_restarts, 3) times of its own (it holds no training state), and its
  // death never stops training (without restarts left the exit status is 1). A task that
  // ends in a planned stop (exit status kRestartExitCode, after a checkpoint) is restarted
  // in the same way without counting against these, up to kMaxPlannedRestarts times.
  int max_restarts = 0;
  // Elastic MultiWorkerMirrored (the program's --elastic): a worker killed by a signal
  // restarts alone, within max_restarts, while the others step on; it rejoins their group.
  bool elastic = false;
  // The time the tasks get between a planned stop's notice (SIGTERM, from the launcher or
  // from outside) and SIGKILL: PlannedStopOptions::grace_secs.
  double grace_secs = 25;
  // How the tasks authenticate each other (docs/SECURITY.md). kSecret: a fresh secret for
  // the job in every task's CADRE_JOB_SECRET; kTls: that and mutual TLS, with a CA and
  // certificates made for the job in a private temporary directory (CADRE_TLS_*), removed
  // at the end; kInsecure: CADRE_INSECURE=1. A secret or TLS files the launcher's own
  // environment already names are passed on instead.
  enum class Security { kSecret, kTls, kInsecure };
  Security security = Security::kSecret;
  std::vector<std::string> command;  // the program and its arguments
  // A model server beside the job ("server:0"; docs/SERVING.md): this command line (empty:
  // none). It gets no TF_CONFIG and no job secret, it is no part of the cluster, its output
  // is prefixed "[server:0] ", it is stopped (SIGTERM, then SIGKILL after grace_secs) once
  // the job has ended or the launcher is asked to stop, and it never outlives the launcher.
  // Its failure is reported and not restarted; the launcher's exit status depends on the
  // training tasks and the evaluator only.
  std::vector<std::string> server_command;
};

inline constexpr int kMaxPlannedRestarts = 100;

// Runs the cluster until every training task and the evaluator have exited; returns 0 when
// all of them succeeded, else 1 (after stopping the others). SIGINT, SIGTERM or SIGHUP
// are a planned stop: the signal goes to every task but the ps tasks, which serve the
// chief's last checkpoint and get it once the others have exited; what has not exited
// after grace_secs, or at a second signal, gets SIGKILL. The result is kRestartExitCode
// when every task stopped cleanly (the same command then resumes and loses no step), else
// 128 + the signal. Tasks get SIGKILL when the launcher dies (PR_SET_PDEATHSIG), so none
// outlives it. Throws InvalidArgumentError for options that describe no cluster.
int run_cluster(const LaunchOptions& options);

// The TF_CONFIG of each task for the given ports, "type:index" -> JSON (for --explain and
// tests).
std::vector<std::pair<std::string, std::string>> tf_configs(const LaunchOptions& options,
                                                            const std::vector<int>& ports);

}  // namespace cadre::launch
