// A worker's side of the input positions ps 0 keeps (input_positions.h): the pipeline its
// pushes count for, and its position on the way there. The training loop leaves its
// position here before taking a batch when ps 0 asked for it (or before the first); the
// push of that batch carries it, and records whether ps 0 asks again.
//
// Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "cadre/base/mutex.h"

namespace cadre::ps {

class InputReport {
 public:
  // The worker's pipeline (its index + 1); 0, as until set: pushes count for none.
  void set_pipeline(int pipeline) {
    MutexLock lock(mutex_);
    pipeline_ = pipeline;
  }
  int pipeline() const {
    MutexLock lock(mutex_);
    return pipeline_;
  }
  // Whether ps 0 asked for the position and none is on its way yet.
  bool wanted() const {
    MutexLock lock(mutex_);
    return wanted_ && !position_;
  }
  void send(std::string position) {
    MutexLock lock(mutex_);
    position_ = std::move(position);
  }
  // For the next push: the position to carry, if any.
  std::optional<std::string> take() {
    MutexLock lock(mutex_);
    return std::exchange(position_, std::nullopt);
  }
  // The worker's input was read again from another position (a new client restored a
  // checkpoint): ps 0, which counts from that checkpoint on, needs the new position first.
  void restart() {
    MutexLock lock(mutex_);
    position_.reset();
    wanted_ = true;
  }
  // What ps 0 answered to a push.
  void heard(bool wanted) {
    MutexLock lock(mutex_);
    wanted_ = wanted;
  }

 private:
  mutable Mutex mutex_;
  int pipeline_ CADRE_GUARDED_BY(mutex_) = 0;
  bool wanted_ CADRE_GUARDED_BY(mutex_) = true;
  std::optional<std::string> position_ CADRE_GUARDED_BY(mutex_);
};

}  // namespace cadre::ps
