#include "cadre/estimator/train_and_evaluate.h"

#include <glog/logging.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/base/env.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/watcher.h"
#include "cadre/estimator/early_stopping.h"
#include "core/base/strings.h"
#include "strategies/ps/parameter_servers.h"
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
    next_eval_ = Clock::now() + seconds(spec.start_delay_secs);
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
  static Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }

  void evaluate(const std::string& path, bool is_final) {
    args_.checkpoint_path = path;
    EvalResult eval = estimator_.evaluate(spec_.input_fn, args_);
    for (const auto& exporter : spec_.exporters) {
      std::string dir = exporter->export_model(estimator_, path, eval, is_final);
      if (!dir.empty()) result_->exports.push_back(dir);
    }
    result_->final_eval = std::move(eval);
    evaluated_ = path;
    next_eval_ = Clock::now() + seconds(spec_.throttle_secs);
  }

  Estimator& estimator_;
  const EvalSpec& spec_;
  EvalArgs args_;
  TrainAndEvaluateResult* result_;
  Clock::time_point next_eval_;
  std::string evaluated_;
};

constexpr char kTrainingFinishedFile[] = "training_finished";

void mark_training_finished(Env& env, const std::string& model_dir, std::optional<int64_t> step) {
  std::string path = join_path(model_dir, kTrainingFinishedFile);
  if (!step) {
    env.remove_file(path);
    return;
  }
  write_file_atomically(env, path, str_cat("training finished at step ", *step, "\n"));
}

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

EvalArgs eval_args_of(const EvalSpec& eval_spec) {
  EvalArgs args;
  if (eval_spec.steps > 0) args.steps = eval_spec.steps;
  args.name = eval_spec.name;
  args.hooks = eval_spec.hooks;
  return args;
}

// Whether `step` is to be evaluated under the policy; the final step always is.
bool wanted(const EvalSpec& spec, Env& env, const std::string& model_dir, int64_t step,
            std::optional<int64_t> final_step) {
  if (final_step && step >= *final_step) return true;
  switch (spec.evaluator_policy) {
    case EvaluatorPolicy::kAll:
      return true;
    case EvaluatorPolicy::kEveryKSteps:
      return step % spec.every_k_steps == 0;
    case EvaluatorPolicy::kLatest: {
      auto files = checkpoint::list_checkpoint_files(env, model_dir);
      return files.empty() || files.back().first <= step;
    }
  }
  return true;
}

TrainAndEvaluateResult run_evaluator(Estimator& estimator, const EvalSpec& eval_spec) {
  const std::string& model_dir = estimator.model_dir();
  if (model_dir.empty()) throw InvalidArgumentError("evaluator: RunConfig.model_dir is empty");
  std::shared_ptr<Env> env = estimator.config().file_system();
  TrainAndEvaluateResult result;
  EvalArgs args = eval_args_of(eval_spec);
  std::string eval_dir = join_path(model_dir, eval_dir_name(eval_spec.name));
  // The durable cursor: the steps this evaluator (or an earlier run of it) recorded.
  auto history = read_eval_history(eval_dir, "loss");
  int64_t cursor = history.empty() ? -1 : history.back().first;
  if (cursor >= 0)
    LOG(INFO) << "evaluator: resuming after step " << cursor << " (" << eval_dir << ")";
  std::this_thread::sleep_for(std::chrono::duration<double>(eval_spec.start_delay_secs));
  checkpoint::WatcherOptions options;
  options.after_step = cursor;
  options.protect_unseen = eval_spec.evaluator_policy == EvaluatorPolicy::kAll;
  options.env = env;
  checkpoint::CheckpointWatcher watcher(model_dir, options);
  Clock::time_point next_eval = Clock::now();
  Clock::time_point last_wait_log = Clock::now();
  while (true) {
    std::optional<int64_t> final_step = read_training_finished(model_dir, env);
    if (final_step && watcher.last_step() >= *final_step) break;
    std::unique_ptr<checkpoint::CheckpointReader> reader = watcher.next(/*timeout_seconds=*/2);
    if (!reader) {
      if (Clock::now() - last_wait_log > std::chrono::seconds(30)) {
        LOG(INFO) << "evaluator: waiting for a checkpoint after step " << watcher.last_step()
                  << " in " << model_dir;
        last_wait_log = Clock::now();
      }
      continue;
    }
    int64_t step = reader->global_step();
    final_step = read_training_finished(model_dir, env);
    if (!wanted(eval_spec, *env, model_dir, step, final_step)) {
      LOG(INFO) << "evaluator: skipping step " << step << " per its policy";
      continue;
    }
    std::this_thread::sleep_until(next_eval);
    args.checkpoint_path = reader->path();
    LOG(INFO) << "evaluator: evaluating " << reader->path();
    EvalResult eval = estimator.evaluate(eval_spec.input_fn, args);
    next_eval = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(eval_spec.throttle_secs));
    bool is_final = final_step && step >= *final_step;
    for (const auto& exporter : eval_spec.exporters) {
      std::string dir = exporter->export_model(estimator, reader->path(), eval, is_final);
      if (!dir.empty()) result.exports.push_back(dir);
    }
    result.final_eval = std::move(eval);
  }
  if (result.final_eval.empty()) {
    // Restarted after the final evaluation: report the recorded one.
    for (const char* tag : {"loss", "accuracy"}) {
      auto recorded = read_eval_history(eval_dir, tag);
      if (!recorded.empty()) {
        result.final_eval.set(tag, recorded.back().second);
        result.final_eval.set("global_step", static_cast<double>(recorded.back().first));
      }
    }
  }
  LOG(INFO) << "evaluator: training finished at step "
            << read_training_finished(model_dir, env).value_or(-1)
            << " and its last checkpoint is evaluated; exiting";
  return result;
}

// The ps tasks the training strategy keeps its variables on, or null.
const ps::ParameterServers* parameter_servers(const RunConfig& config) {
  return config.train_distribute ? config.train_distribute->extended().parameter_servers()
                                 : nullptr;
}

// A ps task serves variables until the job ends (the launcher or orchestrator stops it).
[[noreturn]] void serve_parameters(const RunConfig& config) {
  ps::ServerOptions options;
  options.task = config.cluster->task.to_string();
  if (const ps::ParameterServers* servers = parameter_servers(config)) {
    options.max_message_bytes = servers->options().max_message_bytes;
  }
  std::unique_ptr<ps::ParameterServer> server =
      ps::ParameterServer::start(config.cluster->address(config.cluster->task), options);
  LOG(INFO) << options.task << ": serving variables until the job ends";
  server->wait();
  throw AbortedError(str_cat(options.task, ": the parameter server stopped"));
}

}  // namespace

std::optional<int64_t> read_training_finished(const std::string& model_dir,
                                              const std::shared_ptr<Env>& file_system) {
  std::shared_ptr<Env> env = file_system ? file_system : posix_env();
  std::string path = join_path(model_dir, kTrainingFinishedFile);
  if (!env->file_exists(path)) return std::nullopt;
  std::string text = env->read_file(path);
  long long step = 0;
  if (std::sscanf(text.c_str(), "training finished at step %lld", &step) != 1) {
    throw DataLossError(str_cat(path, " does not say \"training finished at step N\": ", text));
  }
  return step;
}

TrainAndEvaluateResult train_and_evaluate(Estimator& estimator, const TrainSpec& train_spec,
                                          const EvalSpec& eval_spec) {
  check_args(train_spec, eval_spec);
  const RunConfig& config = estimator.config();
  if (config.task_type == "evaluator") return run_evaluator(estimator, eval_spec);
  if (config.task_type == "ps") serve_parameters(config);
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
  if (config.is_chief) mark_training_finished(*config.file_system(), estimator.model_dir(), std::nullopt);
  TrainArgs train_args;
  train_args.max_steps = train_spec.max_steps;
  train_args.hooks = train_spec.hooks;
  std::shared_ptr<EvaluateOnSave> listener;
  if (!config.cluster) {
    // Local mode evaluates in this process; in a cluster the evaluator task does.
    listener =
        std::make_shared<EvaluateOnSave>(estimator, eval_spec, eval_args_of(eval_spec), &result);
    train_args.saving_listeners = {listener};
  }
  int64_t step = estimator.train(train_spec.input_fn, train_args);
  if (listener) {
    listener->finish();
  } else {
    result.final_eval.set("global_step", static_cast<double>(step));
  }
  if (config.is_chief && result.final_eval.count("global_step")) {
    mark_training_finished(*config.file_system(), estimator.model_dir(),
                           static_cast<int64_t>(result.final_eval.at("global_step")));
  }
  return result;
}

}  // namespace cadre
