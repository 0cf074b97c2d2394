// The evaluations a client of coordinator mode runs itself (TensorFlow 2's inline
// evaluation) when its cluster lists no evaluator task: the checkpoints it saves, at most
// every EvalSpec::throttle_secs after start_delay_secs, and always the final one, with the
// exporters after each. With an evaluator task listed in the cluster (sidecar evaluation)
// it evaluates nothing. Internal to the estimator module.
#pragma once

#include <chrono>
#include <string>

#include "cadre/estimator/train_and_evaluate.h"

namespace cadre::estimator_internal {

class ClientEvaluation {
 public:
  ClientEvaluation(Estimator& estimator, const EvalSpec& spec);
  // After a checkpoint was saved at `path` (which retention keeps until the next save).
  void checkpoint_saved(const std::string& path);
  // The final result: the evaluation of the checkpoint of `step` at `path` (evaluated now
  // unless it was already), or just the global step when an evaluator task evaluates.
  TrainAndEvaluateResult finish(int64_t step, const std::string& path);

 private:
  void evaluate(const std::string& path, bool is_final);

  Estimator& estimator_;
  const EvalSpec& spec_;
  bool inline_;
  std::chrono::steady_clock::time_point next_;
  std::string evaluated_;
  TrainAndEvaluateResult result_;
};

}  // namespace cadre::estimator_internal
