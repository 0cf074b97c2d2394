// Controls driven by the evaluation history: early stopping, and reducing the learning rate
// on a plateau. Both read the metric from the eval directory's event files (as TensorFlow's
// stop_if_no_decrease_hook does), so they work whether evaluations run in this process
// (train_and_evaluate in local mode) or in a separate evaluator task, and they pick up where
// they were after a restart without keeping state of their own.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cadre/estimator/basic_hooks.h"
#include "cadre/nn/schedules.h"

namespace cadre {

// (global step, value) of `metric` in the event files of `eval_dir`, by step (a step
// evaluated twice keeps its latest value). Empty when the directory does not exist yet.
std::vector<std::pair<int64_t, double>> read_eval_history(const std::string& eval_dir,
                                                          const std::string& metric);

struct PlateauOptions {
  std::string eval_dir;  // e.g. model_dir + "/eval"
  std::string metric = "loss";
  bool higher_is_better = false;
  // An evaluation improves on the best so far by more than this.
  double min_delta = 0;
  // Evaluations without improvement that trigger the action.
  int patience = 3;
  // Look at the history every this many steps.
  int64_t check_every_steps = 100;
};

// Requests a stop once `patience` evaluations in a row have not improved on the best before
// them (TensorFlow: stop_if_no_decrease_hook / stop_if_no_increase_hook).
class EarlyStoppingHook : public Hook {
 public:
  explicit EarlyStoppingHook(PlateauOptions options);
  void after_create(Run& run) override;
  void after_run(Run& run, const StepResult& result, RunContext& context) override;
  bool stopped() const { return stopped_; }

 private:
  bool should_stop() const;
  PlateauOptions options_;
  StepTimer timer_;
  bool stopped_ = false;
};

// Multiplies the learning rate by `factor` each time `patience` evaluations in a row have
// not improved on the best (tf.keras's ReduceLROnPlateau), never below min_learning_rate.
// Add it to the training hooks, and build the optimizer's rate with scaled():
//
//   auto plateau = std::make_shared<ReduceLrOnPlateau>(options);
//   ... nn::optimizers::adam(plateau->scaled(1e-3)) ...   // in model_fn
//   TrainSpec train_spec(input_fn, max_steps, {plateau});
//
// The factor is a function of the evaluation history, so a restarted run continues with
// the learning rate it had.
class ReduceLrOnPlateau : public Hook {
 public:
  ReduceLrOnPlateau(PlateauOptions options, double factor = 0.1, double min_learning_rate = 0);
  // `base` (a constant or a schedule) times the current reduction.
  nn::LearningRate scaled(nn::LearningRate base) const;
  // The current multiplier (factor^reductions).
  double multiplier() const { return multiplier_->load(); }
  int reductions() const { return reductions_; }

  void after_create(Run& run) override;
  void after_run(Run& run, const StepResult& result, RunContext& context) override;

 private:
  void refresh();
  PlateauOptions options_;
  double factor_;
  double min_learning_rate_;
  StepTimer timer_;
  int reductions_ = 0;
  std::shared_ptr<std::atomic<double>> multiplier_;
};

}  // namespace cadre
