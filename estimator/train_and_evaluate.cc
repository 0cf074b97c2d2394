#include "estimator/train_and_evaluate.h"

#include <glog/logging.h>

#include <chrono>
#include <thread>

#include "core/base/strings.h"

namespace cadre {

namespace {

using Clock = std::chrono::steady_clock;

// Stops training after a checkpoint is saved once throttle_secs have passed since the last
// evaluation (TensorFlow's local-mode _NewCheckpointListenerForEvaluate).
class EvaluateAfterSave : public CheckpointSaverListener {
 public:
  EvaluateAfterSave(double throttle_secs, Clock::time_point last_eval)
      : throttle_secs_(throttle_secs), last_eval_(last_eval) {}
  bool after_save(int64_t global_step, const std::string& path) override {
    double since = std::chrono::duration<double>(Clock::now() - last_eval_).count();
    if (since < throttle_secs_) return false;
    triggered_ = true;
    return true;
  }
  bool triggered() const { return triggered_; }

 private:
  double throttle_secs_;
  Clock::time_point last_eval_;
  bool triggered_ = false;
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

  // The first evaluation waits start_delay_secs; later ones throttle_secs.
  Clock::time_point last_eval = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(
                                                       eval_spec.start_delay_secs -
                                                       eval_spec.throttle_secs));
  std::optional<int64_t> last_evaluated_step;
  while (true) {
    auto listener = std::make_shared<EvaluateAfterSave>(eval_spec.throttle_secs, last_eval);
    TrainArgs train_args;
    train_args.max_steps = train_spec.max_steps;
    train_args.hooks = train_spec.hooks;
    train_args.saving_listeners = {listener};
    estimator.train(train_spec.input_fn, train_args);

    std::optional<std::string> latest = estimator.latest_checkpoint();
    if (!latest) throw FailedPreconditionError("train_and_evaluate: training saved no checkpoint");
    eval_args.checkpoint_path = *latest;
    EvalResult eval = estimator.evaluate(eval_spec.input_fn, eval_args);
    last_eval = Clock::now();
    int64_t step = static_cast<int64_t>(eval.at("global_step"));
    // Training ended by itself (max_steps, the end of the input, a hook), or the listener
    // stopped it at a checkpoint that happens to be the last.
    bool finished = !listener->triggered() ||
                    (train_spec.max_steps && step >= *train_spec.max_steps);
    if (last_evaluated_step == step && !finished) {
      throw InternalError(str_cat("train_and_evaluate: no progress past step ", step));
    }
    last_evaluated_step = step;
    for (const auto& exporter : eval_spec.exporters) {
      std::string dir = exporter->export_model(estimator, *latest, eval, finished);
      if (!dir.empty()) result.exports.push_back(dir);
    }
    result.final_eval = std::move(eval);
    if (finished) break;
  }
  return result;
}

}  // namespace cadre
