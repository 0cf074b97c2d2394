// CheckpointSaverHook: saves a checkpoint every N steps or seconds and at the end of
// training, and tells its listeners (TensorFlow's CheckpointSaverListener), which is how
// train_and_evaluate evaluates each new checkpoint in local mode.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/estimator/basic_hooks.h"

namespace cadre {

class CheckpointSaverListener {
 public:
  virtual ~CheckpointSaverListener() = default;
  virtual void begin() {}
  virtual void before_save(int64_t global_step) {}
  // Called once the checkpoint at `path` is published (with asynchronous saves, training
  // waits for that when there are listeners). Returning true asks training to stop.
  virtual bool after_save(int64_t global_step, const std::string& path) { return false; }
  virtual void end(int64_t global_step) {}
};
using CheckpointSaverListeners = std::vector<std::shared_ptr<CheckpointSaverListener>>;

class CheckpointSaverHook : public Hook {
 public:
  CheckpointSaverHook(std::optional<int64_t> save_steps, std::optional<double> save_secs,
                      CheckpointSaverListeners listeners = {});
  void begin(Run& run) override;
  void after_create(Run& run) override;
  // Decides whether the coming step is saved (its interval is due, or it is the last), and
  // announces it to the run.
  void before_run(Run& run, RunContext& context) override;
  void after_run(Run& run, const StepResult& result, RunContext& context) override;
  // Saves the final step unless it was just saved, and waits until it is published (train()
  // then makes it durable, see RunConfig::checkpoint_durable_secs).
  void end(Run& run) override;
  // The paths saved in this run, oldest first.
  const std::vector<std::string>& saved() const { return saved_; }

 private:
  bool save(Run& run, int64_t global_step);  // true when a listener asks to stop
  StepTimer timer_;
  bool announced_ = false;  // the coming step is to be saved
  CheckpointSaverListeners listeners_;
  std::vector<std::string> saved_;
  double blocked_seconds_ = 0;  // training's wait for save_checkpoint(), in all and at most
  double max_blocked_seconds_ = 0;
  double copy_wait_at_begin_ = 0;  // nn::deferred_copy_wait_seconds() when the run began
};

}  // namespace cadre
