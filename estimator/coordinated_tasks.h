// train_and_evaluate in coordinator mode (a "client" task in TF_CONFIG, docs/DEPLOY.md):
// the client holds model_dir and the schedule and dispatches units of steps; the workers
// serve, running the steps they are given. Internal to the estimator module.
#pragma once

#include "cadre/estimator/train_and_evaluate.h"

namespace cadre::estimator_internal {

// The client: initialises (or restores from model_dir's last checkpoint) the variables on
// the ps tasks, dispatches units of RunConfig::steps_per_unit steps to whichever worker is
// free until the global step reaches TrainSpec::max_steps (or every worker's input has
// ended), saves checkpoints and its
// progress (client_progress.h), marks training finished and tells the workers. Evaluates the
// final checkpoint itself when the cluster has no evaluator task. Throws
// InvalidArgumentError for a cluster or strategy it cannot drive. At a planned stop's notice
// it dispatches no more units, lets those running finish (half the grace period at most),
// saves a durable checkpoint of the global step reached with its progress, and throws
// PlannedStopError.
TrainAndEvaluateResult run_client(Estimator& estimator, const TrainSpec& train_spec,
                                  const EvalSpec& eval_spec);

// The client when the cluster has no ps tasks (MultiWorkerMirrored workers): hosts the
// coordination service at its TF_CONFIG address, which the workers join to form their
// collective; watches it, and on a worker's failure starts a new round, up to
// RunConfig::client_max_restarts times, in which the workers (restarted by their supervisor)
// resume from the last checkpoint; ends training when worker 0 has saved the checkpoint of
// max_steps, writing the progress and the finished marker. Workers that stop at a planned
// stop restart in a new round without counting. At its own notice it asks the workers for a
// planned stop through the service, waits for it (half the grace period at most), writes
// its progress and throws PlannedStopError.
TrainAndEvaluateResult run_collective_client(Estimator& estimator, const TrainSpec& train_spec,
                                             const EvalSpec& eval_spec);

// A worker of that collective: Estimator::train to max_steps, worker 0 writing checkpoints
// as a chief does. Returns the global step. At a planned stop (PlannedStopError) it passes
// the service's planned-stop barrier before the error leaves.
int64_t train_collective_worker(Estimator& estimator, const TrainSpec& train_spec);

// A worker of coordinator mode with ps tasks: serves the step service on its TF_CONFIG
// address and trains only the steps the client hands it, until the client says training is
// over (or the training-finished marker of this max_steps appears), or its input ends (the
// client's unit then fails OUT_OF_RANGE and goes to another worker). Returns the global step.
// Given its first unit by a new client, it reads its input again from the position of the
// checkpoint that client restored (TrainRun::follow_new_client).
// At a planned stop's notice it stops after the step in flight (or its wait for a unit),
// answers the client's call UNAVAILABLE (the unit goes elsewhere, not a training error) and
// throws PlannedStopError.
int64_t serve_steps(Estimator& estimator, const TrainSpec& train_spec);

}  // namespace cadre::estimator_internal
