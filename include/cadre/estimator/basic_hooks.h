// The built-in hooks of TensorFlow's basic_session_run_hooks: stop at a step, log tensors,
// count steps per second, check the loss for NaN, save summaries.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/estimator/hooks.h"

namespace cadre {

// Raised by NanTensorHook; train() writes no checkpoint after it.
class NanLossDuringTrainingError : public Error {
 public:
  explicit NanLossDuringTrainingError(const std::string& message)
      : Error(ErrorCode::kAborted, message) {}
};

// Fires every `every_steps` steps or every `every_secs` seconds (whichever is set), and on
// the first step it is asked about.
class StepTimer {
 public:
  StepTimer(std::optional<int64_t> every_steps, std::optional<double> every_secs);
  bool should_trigger(int64_t global_step) const;
  // Records a trigger at `global_step`; returns the seconds and steps since the previous
  // one (nullopt at the first).
  std::optional<std::pair<double, int64_t>> update_last_triggered_step(int64_t global_step);
  std::optional<int64_t> last_triggered_step() const { return last_step_; }
  void reset();

 private:
  std::optional<int64_t> every_steps_;
  std::optional<double> every_secs_;
  std::optional<int64_t> last_step_;
  std::chrono::steady_clock::time_point last_time_;
};

// Requests a stop once the global step reaches last_step, or num_steps steps after the
// global step at the start of the run (exactly one of the two).
class StopAtStepHook : public Hook {
 public:
  static std::shared_ptr<StopAtStepHook> at_step(int64_t last_step);
  static std::shared_ptr<StopAtStepHook> after_steps(int64_t num_steps);

  void after_create(Run& run) override;
  void after_run(Run& run, const StepResult& result, RunContext& context) override;
  std::optional<int64_t> last_step() const { return last_step_; }

 private:
  StopAtStepHook(std::optional<int64_t> num_steps, std::optional<int64_t> last_step);
  std::optional<int64_t> num_steps_;
  std::optional<int64_t> last_step_;
};

// Logs the named values (see StepResult::value: "loss", "global_step", spec tensors and
// predictions) every N steps or seconds, and at the end when at_end.
class LoggingTensorHook : public Hook {
 public:
  LoggingTensorHook(std::vector<std::string> names, std::optional<int64_t> every_n_iter,
                    std::optional<double> every_n_secs = std::nullopt, bool at_end = false);
  void begin(Run& run) override;
  void after_run(Run& run, const StepResult& result, RunContext& context) override;
  void end(Run& run) override;
  // The last line logged (for tests and tools).
  const std::string& last_line() const { return last_line_; }

 private:
  std::vector<std::string> names_;
  StepTimer timer_;
  bool at_end_;
  std::string last_line_;
  std::string pending_;  // the latest step's values, for at_end
};

// Every N steps or seconds: global_step/sec and examples/sec to the log and the summaries,
// and the progress line "step 1200/5000  loss 0.412  152 steps/s  19.5k ex/s  ETA 25s".
class StepCounterHook : public Hook {
 public:
  explicit StepCounterHook(std::optional<int64_t> every_n_steps = 100,
                           std::optional<double> every_n_secs = std::nullopt);
  void begin(Run& run) override;
  void after_run(Run& run, const StepResult& result, RunContext& context) override;
  // The rates of the last window (0 before the first).
  double steps_per_sec() const { return steps_per_sec_; }
  double examples_per_sec() const { return examples_per_sec_; }

 private:
  StepTimer timer_;
  int64_t examples_since_ = 0, steps_since_ = 0;  // this process's steps
  double steps_per_sec_ = 0;
  double examples_per_sec_ = 0;
};

// One line on a terminal that redraws itself in place, at most every `interval_secs`:
// "step 1200/5000  loss 0.412  152 steps/s  ETA 25s", ended by a newline when training ends.
// The Estimator adds it on the chief when RunConfig::progress_line asks for it (by default,
// when stderr is a terminal); log lines printed meanwhile push it down, and it redraws.
class ProgressLineHook : public Hook {
 public:
  explicit ProgressLineHook(std::FILE* out = stderr, double interval_secs = 0.25);
  void begin(Run& run) override;
  void after_run(Run& run, const StepResult& result, RunContext& context) override;
  void end(Run& run) override;

 private:
  std::FILE* out_;
  double interval_secs_;
  double last_draw_secs_ = 0;
  int64_t last_draw_step_ = -1;
  double steps_per_sec_ = 0;
  bool drawn_ = false;
};

// Throws NanLossDuringTrainingError when a step's loss is NaN or infinite. The Estimator
// places it before every other hook and an exception skips the end-of-training save, so no
// checkpoint of the diverged state is written. (TensorFlow's fail_on_nan_loss=False, which
// stops quietly, is left out: its end-of-training save would write that state.)
class NanTensorHook : public Hook {
 public:
  void after_run(Run& run, const StepResult& result, RunContext& context) override;
};

// Every N steps or seconds: the loss, the learning rate of the optimizer and the spec's
// scalar_summaries, to the run's summary writer.
class SummarySaverHook : public Hook {
 public:
  explicit SummarySaverHook(std::optional<int64_t> save_steps,
                            std::optional<double> save_secs = std::nullopt);
  void begin(Run& run) override;
  void after_run(Run& run, const StepResult& result, RunContext& context) override;

 private:
  StepTimer timer_;
};

}  // namespace cadre
