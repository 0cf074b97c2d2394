// CheckpointWatcher: how an evaluator follows a model_dir. Yields each new checkpoint once,
// in step order, as an open reader.
//
// It looks only at published names (model.ckpt-<step>.h5, which appear by rename once
// complete), so it never yields a partial file. It wakes on inotify events
// where the platform has them and also re-scans every poll interval (file systems such as
// NFS deliver no events).
//
// Not thread-safe: one evaluator thread calls next().
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cadre/base/env.h"
#include "cadre/checkpoint/reader.h"

namespace cadre::checkpoint {

struct WatcherOptions {
  // How often to re-scan the directory; with inotify this is only a backstop.
  double poll_interval_seconds = 1.0;
  bool use_inotify = true;
  // Yield only checkpoints of a later step (an evaluator resuming where it stopped).
  int64_t after_step = -1;
  // The watcher leases the checkpoint it is about to open and last yielded, for this long,
  // renewed at every next(), so that a reader that reopens it by path still finds it.
  // 0: no lease.
  double lease_seconds = 600;
  // Also lease every newer checkpoint not yet yielded, so that retention keeps each one
  // until the watcher has seen it: every checkpoint gets evaluated, at the price of disk
  // space while the evaluator lags. Needs lease_seconds > 0; an evaluator that stops
  // calling next() for longer than that loses the protection.
  bool protect_unseen = false;
  std::string basename = "model.ckpt";
  // File system and clock; null: the real ones.
  std::shared_ptr<Env> env;
};

class Lease;

class CheckpointWatcher {
 public:
  explicit CheckpointWatcher(std::string model_dir, WatcherOptions options = {});
  ~CheckpointWatcher();
  CheckpointWatcher(const CheckpointWatcher&) = delete;
  CheckpointWatcher& operator=(const CheckpointWatcher&) = delete;

  // Waits up to `timeout_seconds` for a checkpoint with a step above the last one yielded,
  // and returns the oldest such, opened; nullptr when the time runs out. A checkpoint
  // removed (by retention) before it could be opened is skipped with a warning; a damaged
  // one is skipped with an error logged; neither is yielded later.
  std::unique_ptr<CheckpointReader> next(double timeout_seconds);

  // The step of the last checkpoint yielded or skipped (after_step at first).
  int64_t last_step() const { return last_step_; }
  const std::string& model_dir() const { return model_dir_; }

 private:
  void lease_from(int64_t first_step, int64_t last_step);
  // Sleeps until the directory changes or `seconds` pass.
  void wait_for_change(double seconds);
  void start_inotify();

  std::string model_dir_;
  WatcherOptions options_;
  std::shared_ptr<Env> env_;
  std::unique_ptr<Lease> lease_;
  int64_t last_step_;
  int inotify_fd_ = -1;
  bool watching_ = false;
};

}  // namespace cadre::checkpoint
