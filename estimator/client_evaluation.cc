#include "estimator/client_evaluation.h"

#include "cadre/estimator/estimator.h"
#include "core/base/clock.h"
#include "estimator/evaluator_task.h"

namespace cadre::estimator_internal {

ClientEvaluation::ClientEvaluation(Estimator& estimator, const EvalSpec& spec)
    : estimator_(estimator),
      spec_(spec),
      inline_(!estimator.config().cluster->has_job("evaluator")),
      next_(std::chrono::steady_clock::now() + from_seconds(spec.start_delay_secs)) {}

void ClientEvaluation::checkpoint_saved(const std::string& path) {
  if (inline_ && std::chrono::steady_clock::now() >= next_) evaluate(path, /*is_final=*/false);
}

TrainAndEvaluateResult ClientEvaluation::finish(int64_t step, const std::string& path) {
  if (!inline_) {
    result_.final_eval.set("global_step", static_cast<double>(step));
  } else if (evaluated_ != path) {
    evaluate(path, /*is_final=*/true);
  }
  return result_;
}

void ClientEvaluation::evaluate(const std::string& path, bool is_final) {
  EvalArgs args = eval_args_of(spec_);
  args.checkpoint_path = path;
  EvalResult eval = estimator_.evaluate(spec_.input_fn, args);
  for (const auto& exporter : spec_.exporters) {
    std::string dir = exporter->export_model(estimator_, path, eval, is_final);
    if (!dir.empty()) result_.exports.push_back(dir);
  }
  result_.final_eval = std::move(eval);
  evaluated_ = path;
  next_ = std::chrono::steady_clock::now() + from_seconds(spec_.throttle_secs);
}

}  // namespace cadre::estimator_internal
