#include "estimator/train_and_evaluate.h"

#include <glog/logging.h>

#include <chrono>

#include "core/base/strings.h"

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

}  // namespace

TrainAndEvaluateResult train_and_evaluate(Estimator& estimator, const TrainSpec& train_spec,
                                          const EvalSpec& eval_spec) {
  if (!train_spec.input_fn) throw InvalidArgumentError("TrainSpec.input_fn is empty");
  if (!eval_spec.input_fn) throw InvalidArgumentError("EvalSpec.input_fn is empty");
  if (eval_spec.steps < 0) {
    throw InvalidArgumentError(str_cat("EvalSpec.steps must be >= 0, got ", eval_spec.steps));
  }
  if (eval_spec.throttle_secs < 0 || eval_spec.start_delay_secs < 0) {
    throw InvalidArgumentError("EvalSpec.throttle_secs and start_delay_secs must be >= 0");
  }
  if (train_spec.max_steps && *train_spec.max_steps <= 0) {
    throw InvalidArgumentError(
        str_cat("TrainSpec.max_steps must be positive, got ", *train_spec.max_steps));
  }
  TrainAndEvaluateResult result;
  EvalArgs eval_args;
  if (eval_spec.steps > 0) eval_args.steps = eval_spec.steps;
  eval_args.name = eval_spec.name;
  eval_args.hooks = eval_spec.hooks;
  auto listener = std::make_shared<EvaluateOnSave>(estimator, eval_spec, eval_args, &result);
  TrainArgs train_args;
  train_args.max_steps = train_spec.max_steps;
  train_args.hooks = train_spec.hooks;
  train_args.saving_listeners = {listener};
  estimator.train(train_spec.input_fn, train_args);
  listener->finish();
  return result;
}

}  // namespace cadre
