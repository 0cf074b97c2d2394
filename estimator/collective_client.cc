// The client of coordinator mode with collective workers (MultiWorkerMirroredStrategy, no
// ps tasks; coordinated_tasks.h): it hosts the coordination service the workers join, which
// starts their collective; watches it; and restarts the collective when a worker fails.
// Worker 0 writes the checkpoints, as a chief does; the client ends training once the
// checkpoint of max_steps exists and every worker has passed the shutdown barrier.
// Planned stops: workers that stop together (a notice to any one) pass the service's
// planned-stop barrier after worker 0's checkpoint, and the service takes their restart for
// a new round, not a failure; a notice to the client asks every worker for a planned stop
// through the service and ends the client once they have stopped.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/estimator.h"
#include "cadre/strategies/multi_worker_options.h"
#include "core/base/strings.h"
#include "estimator/client_evaluation.h"
#include "estimator/client_progress.h"
#include "estimator/coordinated_tasks.h"
#include "estimator/stop_notice.h"
#include "estimator/training_finished.h"
#include "strategies/cluster/coordination_service.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

using Clock = std::chrono::steady_clock;

// The step of model_dir's latest checkpoint (0 when it has none).
int64_t latest_step(Env& env, const std::string& model_dir) {
  std::optional<std::string> latest = checkpoint::latest_checkpoint(model_dir, &env);
  if (!latest) return 0;
  return checkpoint::checkpoint_step(base_name(*latest), "model.ckpt").value_or(0);
}

// A planned stop of the client: asks every worker for one (they stop after the same step,
// worker 0 saves it) and waits, within half the grace period, until they have passed the
// planned-stop barrier (or are not training: not formed, failed, or done); then the
// progress, and PlannedStopError. The restarted workers register with the next client.
[[noreturn]] void stop_collective(CoordinationService& service, const StopNotice& notice,
                                  const RunConfig& config, Env& env, const std::string& model_dir,
                                  int64_t max_steps, ClientProgress& progress) {
  LOG(WARNING) << notice.reason() << ": a planned stop; asking the workers to stop after the "
               << "same step, with worker 0's checkpoint of it";
  service.request_planned_stop();
  auto deadline =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
          std::max(1.0, config.planned_stop.grace_secs / 2 - notice.seconds_since_notice())));
  while (service.formed() && !service.stopped_as_planned() && service.failure().empty() &&
         latest_step(env, model_dir) < max_steps && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  bool stopped = service.stopped_as_planned();
  // The restarted workers wait for the next client (the service holds their registrations).
  service.stop();
  progress.checkpoint_step = latest_step(env, model_dir);
  write_client_progress(env, model_dir, progress);
  if (!stopped) {
    LOG(WARNING) << "the workers did not all report their planned stop; the last checkpoint is "
                 << "of step " << progress.checkpoint_step;
  }
  throw_planned_stop(
      str_cat("a planned stop (", notice.reason(), ") at step ", progress.checkpoint_step,
              ", worker 0's checkpoint; the same command resumes from it"),
      progress.checkpoint_step);
}

}  // namespace

TrainAndEvaluateResult run_collective_client(Estimator& estimator, const TrainSpec& train_spec,
                                             const EvalSpec& eval_spec) {
  const RunConfig& config = estimator.config();
  const ClusterConfig& cluster = *config.cluster;
  if (!train_spec.max_steps) {
    throw InvalidArgumentError("a client needs TrainSpec.max_steps: it ends training at that step");
  }
  const int64_t max_steps = *train_spec.max_steps;
  StopNotice notice(config.planned_stop);
  std::shared_ptr<Env> file_system = config.file_system();
  Env& env = *file_system;
  const std::string& model_dir = estimator.model_dir();
  env.create_dir(model_dir);
  remove_finished_marker(env, model_dir);
  std::optional<ClientProgress> previous = read_client_progress(env, model_dir);
  ClientProgress progress;
  progress.generation = (previous ? previous->generation : 0) + 1;
  progress.max_steps = max_steps;
  progress.checkpoint_step = latest_step(env, model_dir);
  write_client_progress(env, model_dir, progress);

  CoordinationOptions options;
  std::unique_ptr<CoordinationService> service = CoordinationService::start(
      cluster.address(cluster.task), cluster.training_tasks(), options, cluster.security);
  LOG(INFO) << "client (generation " << progress.generation << "): the collective of "
            << cluster.num_worker_replicas() << " worker(s) starts at their registration; "
            << "training resumes from step " << progress.checkpoint_step;
  int restarts = 0;
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    int64_t step = latest_step(env, model_dir);
    if (step != progress.checkpoint_step) {
      progress.checkpoint_step = step;
      write_client_progress(env, model_dir, progress);
    }
    if (step >= max_steps) break;
    std::string failure = service->failure();
    if (failure.empty() && notice.requested()) {
      stop_collective(*service, notice, config, env, model_dir, max_steps, progress);
    }
    if (failure.empty()) continue;
    if (restarts >= config.client_max_restarts) {
      throw AbortedError(str_cat("the workers' collective failed (", failure, ") after ", restarts,
                                 " restart(s), RunConfig::client_max_restarts"));
    }
    ++restarts;
    progress.lost = restarts;
    write_client_progress(env, model_dir, progress);
    // A new round at once: the survivors' next heartbeats are refused, so they stop, and
    // every worker, restarted by its supervisor, registers again and resumes from the last
    // checkpoint.
    LOG(WARNING) << "client: the collective failed (" << failure << "); restarting it from the "
                 << "checkpoint of step " << step << " (restart " << restarts << " of "
                 << config.client_max_restarts << ")";
    service->begin_round();
  }
  // Worker 0 saved the checkpoint of max_steps; every worker passes the shutdown barrier
  // before it exits, and the service stays until then. Workers that finished in an earlier
  // client's round (this one never formed) have nothing left to ask of it.
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (service->formed() && !service->barrier_complete("shutdown") &&
         service->failure().empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  service->stop();
  progress.finished = true;
  write_client_progress(env, model_dir, progress);
  write_finished_marker(env, model_dir, {progress.checkpoint_step, max_steps});
  LOG(INFO) << "client: training finished at step " << progress.checkpoint_step << " after "
            << restarts << " restart(s) of the collective";
  // Only the final checkpoint: worker 0's retention may delete earlier ones while the client
  // would read them (an evaluator task leases what it reads).
  ClientEvaluation evaluation(estimator, eval_spec);
  std::optional<std::string> latest = estimator.latest_checkpoint();
  TrainAndEvaluateResult result =
      evaluation.finish(progress.checkpoint_step, latest ? *latest : std::string());
  return result;
}

int64_t train_collective_worker(Estimator& estimator, const TrainSpec& train_spec) {
  // Worker 0 plays the chief's part in the collective (rank 0 writes the checkpoints).
  RunConfig config = estimator.config();
  config.is_chief = config.cluster->global_task_id() == 0;
  config.tf_random_seed = estimator.seed();
  Estimator worker(estimator.model_fn(), config, estimator.params(), estimator.warm_start_from());
  TrainArgs args;
  args.max_steps = train_spec.max_steps;
  args.hooks = train_spec.hooks;
  try {
    return worker.train(train_spec.input_fn, args);
  } catch (const PlannedStopError&) {
    // Every worker stopped after the same step (worker 0's checkpoint is durable): the
    // client's service takes their restart for a new round.
    const double timeout_seconds = config.planned_stop.grace_secs / 2;
    if (config.train_distribute) {
      config.train_distribute->extended().leave_after_planned_stop(timeout_seconds);
    }
    throw;
  }
}

}  // namespace cadre::estimator_internal
