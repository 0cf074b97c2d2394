// Planned stops: what a cluster sends before it takes a process away (Kubernetes evicting a
// pod, a spot instance reclaimed, Slurm at a job's time limit, Ctrl-C) ends training with a
// checkpoint of the step it reached instead of losing the steps since the last one.
//
// While train(), evaluate() or train_and_evaluate() runs, the first of the notice signals
// (or the notice file appearing) asks for a planned stop: the step in flight finishes;
// workers that step together (MultiWorkerMirrored) all stop after the same step; the chief
// (or the client of coordinator mode) saves a durable checkpoint of it; summaries are
// flushed; an evaluation is abandoned and its lease released. Then the call throws
// PlannedStopError. A second notice signal ends the process at once (the signal's default
// action). A program exits with PlannedStopError::exit_code() (kRestartExitCode), which
// cadre_launch, the Kubernetes manifests and the Slurm script take as "restart me": the same
// command resumes from that checkpoint and loses no step.
#pragma once

#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

#include "cadre/base/errors.h"

namespace cadre {

// 128 + SIGTERM: what a process ended by a platform's SIGTERM reports, so that what retries
// those retries this (Kubeflow's restartPolicy ExitCode takes 128-255 as retryable and 1-127
// as permanent, so that a bad flag is not retried forever); cadre_launch tells the two apart
// by waitpid's status.
inline constexpr int kRestartExitCode = 143;

struct PlannedStopOptions {
  // The signals that ask for a planned stop (SIGUSR1 for Slurm's --signal, say). Empty:
  // signals keep whatever action the program gave them.
  std::vector<int> signals = {SIGTERM, SIGINT};
  // A file whose appearance asks for a planned stop, for a platform whose preemption
  // watcher writes one; empty: none. Looked for at most every half second.
  std::string notice_file;
  // The time between the notice and the kill that a platform allows (Kubernetes:
  // terminationGracePeriodSeconds, 30 by default); cadre_launch and the manifests it writes
  // take theirs from here. A save still running at the kill leaves the previous checkpoint
  // intact (checkpoints are published atomically).
  double grace_secs = 25;
};

// Thrown by train(), evaluate() and train_and_evaluate() after a planned stop's work is done.
class PlannedStopError : public AbortedError {
 public:
  PlannedStopError(const std::string& message, int64_t step) : AbortedError(message), step_(step) {}
  // The global step training stopped at (and was saved at, on the chief); -1 where this
  // task does not train.
  int64_t step() const { return step_; }
  int exit_code() const { return kRestartExitCode; }

 private:
  int64_t step_;
};

}  // namespace cadre
