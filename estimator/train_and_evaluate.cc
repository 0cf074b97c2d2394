#include "cadre/estimator/train_and_evaluate.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "cadre/checkpoint/contents.h"
#include "cadre/checkpoint/state_file.h"
#include "checkpoint/parts.h"
#include "checkpoint/restore_rows.h"
#include "core/base/clock.h"
#include "core/base/strings.h"
#include "estimator/coordinated_tasks.h"
#include "estimator/evaluator_task.h"
#include "estimator/stop_notice.h"
#include "estimator/training_finished.h"
#include "strategies/ps/parameter_servers.h"
#include "strategies/ps/part_snapshot.h"
#include "strategies/ps/ps_server.h"
#include "strategies/strategy_extended.h"

namespace cadre {

namespace {

using Clock = std::chrono::steady_clock;

// Evaluates a checkpoint right after it is saved, in the training process, once
// throttle_secs have passed since the previous evaluation, and the last one when training
// ends (TensorFlow's local-mode _NewCheckpointListenerForEvaluate). Training continues
// meanwhile from its state in memory.
class EvaluateOnSave : public CheckpointSaverListener {
 public:
  EvaluateOnSave(Estimator& estimator, const EvalSpec& spec, EvalArgs args,
                 TrainAndEvaluateResult* result)
      : estimator_(estimator), spec_(spec), args_(std::move(args)), result_(result) {
    next_eval_ = Clock::now() + from_seconds(spec.start_delay_secs);
  }

  bool after_save(int64_t global_step, const std::string& path) override {
    if (Clock::now() < next_eval_) return false;
    evaluate(path, /*is_final=*/false);
    return false;
  }

  void end(int64_t global_step) override {
    if (std::optional<std::string> latest = estimator_.latest_checkpoint()) {
      if (evaluated_ != *latest) evaluate(*latest, /*is_final=*/true);
    }
  }

  // The final evaluation of a checkpoint not evaluated yet (training had nothing to do).
  void finish() {
    std::optional<std::string> latest = estimator_.latest_checkpoint();
    if (!latest) throw FailedPreconditionError("train_and_evaluate: training saved no checkpoint");
    if (evaluated_ != *latest) evaluate(*latest, /*is_final=*/true);
  }

 private:
  void evaluate(const std::string& path, bool is_final) {
    args_.checkpoint_path = path;
    EvalResult eval = estimator_.evaluate(spec_.input_fn, args_);
    for (const auto& exporter : spec_.exporters) {
      std::string dir = exporter->export_model(estimator_, path, eval, is_final);
      if (!dir.empty()) result_->exports.push_back(dir);
    }
    result_->final_eval = std::move(eval);
    evaluated_ = path;
    next_eval_ = Clock::now() + from_seconds(spec_.throttle_secs);
  }

  Estimator& estimator_;
  const EvalSpec& spec_;
  EvalArgs args_;
  TrainAndEvaluateResult* result_;
  Clock::time_point next_eval_;
  std::string evaluated_;
};

void check_args(const TrainSpec& train_spec, const EvalSpec& eval_spec) {
  if (!train_spec.input_fn) throw InvalidArgumentError("TrainSpec.input_fn is empty");
  if (!eval_spec.input_fn) throw InvalidArgumentError("EvalSpec.input_fn is empty");
  if (eval_spec.steps < 0) {
    throw InvalidArgumentError(str_cat("EvalSpec.steps must be >= 0, got ", eval_spec.steps));
  }
  if (eval_spec.throttle_secs < 0 || eval_spec.start_delay_secs < 0) {
    throw InvalidArgumentError("EvalSpec.throttle_secs and start_delay_secs must be >= 0");
  }
  if (eval_spec.evaluator_policy == EvaluatorPolicy::kEveryKSteps && eval_spec.every_k_steps <= 0) {
    throw InvalidArgumentError(
        str_cat("EvalSpec.every_k_steps must be positive with the "
                "every-k-steps policy, got ",
                eval_spec.every_k_steps));
  }
  if (train_spec.max_steps && *train_spec.max_steps <= 0) {
    throw InvalidArgumentError(
        str_cat("TrainSpec.max_steps must be positive, got ", *train_spec.max_steps));
  }
}

// The chief's start: a training-finished marker that already ends this run (an evaluate-only
// rerun, max_steps reached) stays, and is returned, so that a model_dir this run does not
// train is not written to (it may be read-only); any other is removed, so that an evaluator
// does not take an earlier run's end for this one's.
std::optional<estimator_internal::TrainingFinished> take_over_finished_marker(
    const RunConfig& config, const Estimator& estimator, const TrainSpec& train_spec) {
  std::shared_ptr<Env> file_system = config.file_system();
  Env& env = *file_system;
  const std::string& model_dir = estimator.model_dir();
  std::optional<estimator_internal::TrainingFinished> marker;
  try {
    marker = estimator_internal::read_finished_marker(env, model_dir);
  } catch (const DataLossError& error) {
    LOG(WARNING) << error.what() << "; replacing it";
    estimator_internal::remove_finished_marker(env, model_dir);
    return std::nullopt;
  }
  if (!marker) return std::nullopt;
  if (train_spec.max_steps && marker->step >= *train_spec.max_steps) return marker;
  estimator_internal::remove_finished_marker(env, model_dir);
  return std::nullopt;
}

// The ps tasks the training strategy keeps its variables on, or null.
const ps::ParameterServers* parameter_servers(const RunConfig& config) {
  return config.train_distribute ? config.train_distribute->extended().parameter_servers()
                                 : nullptr;
}

// A ps task's part of a sharded checkpoint, in the checkpoint module's format.
std::pair<uint64_t, uint32_t> write_part(const std::string& task, const std::string& directory,
                                         const std::string& file_name, int64_t step,
                                         const ps::PartSnapshot& snapshot) {
  checkpoint::CheckpointData data;
  checkpoint::RowSources sources;
  data.global_step = step;
  for (const ps::SnapshotItem& item : snapshot.items) {
    std::string name = checkpoint::part_dataset_name(item.name, item.first_row);
    if (item.read) {
      // Streamed from the task's copy-on-write snapshot; the tensor only gives the dtype
      // and shape (one row of memory).
      data.variables[name] = Tensor::zeros(item.shape.with_dim(0, 1), item.dtype, Device::cpu(0))
                                 .broadcast_to(item.shape);
      sources[name] = item.read;
    } else {
      data.variables[name] = item.value;
    }
    if (!item.slot_of.empty()) {
      data.slot_of[name] = checkpoint::part_dataset_name(item.slot_of, item.first_row);
    }
  }
  data.attributes["task"] = task;
  checkpoint::WrittenPart written =
      checkpoint::write_part_file(directory, file_name, data, sources);
  return {written.bytes, written.crc32c};
}

}  // namespace

void serve_parameters(const RunConfig& config) {
  if (config.task_type != "ps" || !config.cluster) {
    throw InvalidArgumentError(str_cat("serve_parameters: this task is '", config.task_type,
                                       "', not a ps task of a cluster (TF_CONFIG)"));
  }
  ps::ServerOptions options;
  options.task = config.cluster->task.to_string();
  options.security = config.cluster->security;
  options.write_part = [task = options.task](const std::string& directory,
                                             const std::string& file_name, int64_t step,
                                             const ps::PartSnapshot& snapshot) {
    return write_part(task, directory, file_name, step, snapshot);
  };
  if (!config.model_dir.empty()) {
    options.read_rows = [model_dir = config.model_dir](const std::string& checkpoint,
                                                       const std::string& name, int64_t first_row,
                                                       const Tensor& destination) {
      checkpoint::read_own_rows(model_dir, checkpoint, name, first_row, destination);
    };
  }
  if (const ps::ParameterServers* servers = parameter_servers(config)) {
    options.max_message_bytes = servers->options().max_message_bytes;
  }
  std::unique_ptr<ps::ParameterServer> server =
      ps::ParameterServer::start(config.cluster->address(config.cluster->task), options);
  LOG(INFO) << options.task << ": serving variables until the job ends";
  // After a planned stop's notice the chief (or the client) saves from these variables once
  // its step is done: serve on until no task has called for a while, within the grace period.
  estimator_internal::StopNotice notice(config.planned_stop);
  std::optional<std::chrono::steady_clock::time_point> noticed;
  constexpr double kQuietSecs = 3;
  while (!server->wait_for(0.2)) {
    if (!noticed) {
      if (!notice.requested()) continue;
      noticed = std::chrono::steady_clock::now();
      // The training tasks stop after their step (the chief saving from these variables),
      // told in the responses to their pulls and pushes.
      server->begin_planned_stop();
      LOG(INFO) << options.task << ": " << notice.reason()
                << ": telling the training tasks to stop; serving until they stop calling";
    }
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - *noticed).count();
    if (server->seconds_since_last_call() >= std::min(kQuietSecs, waited + 1) ||
        waited >= std::max(1.0, config.planned_stop.grace_secs - 2)) {
      estimator_internal::throw_planned_stop(
          str_cat(options.task, ": a planned stop (", notice.reason(), ")"), -1);
    }
  }
  throw AbortedError(str_cat(options.task, ": the parameter server stopped"));
}

TrainAndEvaluateResult train_and_evaluate(Estimator& estimator, const TrainSpec& train_spec,
                                          const EvalSpec& eval_spec) {
  check_args(train_spec, eval_spec);
  const RunConfig& config = estimator.config();
  if (config.task_type == "evaluator") {
    return estimator_internal::run_evaluator(estimator, train_spec, eval_spec);
  }
  if (config.task_type == "ps") serve_parameters(config);
  if (config.cluster && config.cluster->has_job("client")) {
    // Coordinator mode (docs/DEPLOY.md): the client drives; a worker runs the steps the
    // client sends (ps tasks) or joins the collective the client starts.
    bool collective = config.num_ps_replicas == 0;
    if (config.task_type == "client") {
      return collective
                 ? estimator_internal::run_collective_client(estimator, train_spec, eval_spec)
                 : estimator_internal::run_client(estimator, train_spec, eval_spec);
    }
    TrainAndEvaluateResult result;
    int64_t step = collective ? estimator_internal::train_collective_worker(estimator, train_spec)
                              : estimator_internal::serve_steps(estimator, train_spec);
    result.final_eval.set("global_step", static_cast<double>(step));
    return result;
  }
  if (config.num_ps_replicas > 0 && !parameter_servers(config)) {
    throw InvalidArgumentError(
        str_cat("train_and_evaluate: the cluster has ", config.num_ps_replicas,
                " ps task(s), which serve ParameterServerStrategy; set train_distribute = "
                "ParameterServerStrategy::create(*config.cluster)"));
  }
  int workers = config.train_distribute ? config.train_distribute->num_workers() : 1;
  if (config.num_worker_replicas > 1 && workers != config.num_worker_replicas) {
    throw InvalidArgumentError(str_cat(
        "train_and_evaluate: the cluster has ", config.num_worker_replicas,
        " training tasks but RunConfig.train_distribute trains on ", workers,
        " worker(s); set train_distribute = MultiWorkerMirroredStrategy::create(*config.cluster)"));
  }
  TrainAndEvaluateResult result;
  std::optional<estimator_internal::TrainingFinished> finished;
  if (config.is_chief) finished = take_over_finished_marker(config, estimator, train_spec);
  TrainArgs train_args;
  train_args.max_steps = train_spec.max_steps;
  train_args.hooks = train_spec.hooks;
  std::shared_ptr<EvaluateOnSave> listener;
  if (!config.cluster) {
    // Local mode evaluates in this process; in a cluster the evaluator task does.
    listener = std::make_shared<EvaluateOnSave>(
        estimator, eval_spec, estimator_internal::eval_args_of(eval_spec), &result);
    train_args.saving_listeners = {listener};
  }
  int64_t step = estimator.train(train_spec.input_fn, train_args);
  if (listener) {
    listener->finish();
  } else {
    result.final_eval.set("global_step", static_cast<double>(step));
  }
  if (config.is_chief && result.final_eval.count("global_step")) {
    estimator_internal::TrainingFinished marker{
        static_cast<int64_t>(result.final_eval.at("global_step")), train_spec.max_steps};
    if (!finished || finished->step != marker.step || finished->max_steps != marker.max_steps) {
      try {
        estimator_internal::write_finished_marker(*config.file_system(), estimator.model_dir(),
                                                  marker);
      } catch (const PermissionDeniedError& error) {
        LOG(ERROR) << "cannot record in " << estimator.model_dir()
                   << " that training finished at step " << marker.step << " (" << error.what()
                   << "): an evaluator of it waits on";
      }
    }
  }
  return result;
}

}  // namespace cadre
