// The record of a model_dir's published checkpoints that a CheckpointManager keeps: the
// state file's list, which checkpoint is durable, and what retention dropped and still has
// to delete (because a reader leases it, or the deletion failed).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/base/mutex.h"
#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/state_file.h"

namespace cadre::checkpoint {

// Thread-safe: the saver records while other threads list.
class Retention {
 public:
  // Continues the retention recorded in model_dir's state file. A state file at fault
  // (missing beside checkpoints, empty, garbled, naming a file that is gone) is rebuilt
  // from the checkpoint files and rewritten (logged; left where it cannot be written);
  // checkpoints newer than an intact state file's are adopted. Makes the newest recorded
  // checkpoint durable and deletes what an earlier manager could not.
  Retention(std::shared_ptr<Env> env, std::string model_dir,
            const CheckpointManagerOptions& options);

  // Whether a checkpoint published at `now` must be durable (durable_every_secs).
  bool next_is_durable(double now) const;
  // Records the published checkpoint `name` (replacing a record of the same name), applies
  // retention, writes the state file (synced with a durable checkpoint), then deletes what
  // retention dropped and no reader leases.
  void record(const std::string& name, double now, bool durable);
  // Makes the newest checkpoint durable, then lets retention drop the durable one before.
  void make_newest_durable();
  // Deletes what retention dropped earlier and no reader leases any more.
  void delete_dropped() { delete_unleased({}); }

  // Paths, oldest first.
  std::vector<std::string> checkpoints() const;
  std::optional<std::string> latest() const;
  std::vector<std::string> pending_deletions() const;

 private:
  struct Entry {
    std::string name;  // file name relative to model_dir
    double timestamp;
  };

  void load(const CheckpointState& state, bool rebuilt) CADRE_EXCLUDES(mutex_);
  void adopt_unrecorded_checkpoints() CADRE_REQUIRES(mutex_);
  void apply_retention(std::vector<std::string>* to_delete) CADRE_REQUIRES(mutex_);
  CheckpointState state_to_write() const CADRE_REQUIRES(mutex_);
  void delete_unleased(std::vector<std::string> names) CADRE_EXCLUDES(mutex_);

  const std::shared_ptr<Env> env_;
  const std::string model_dir_;
  const std::string basename_;
  const int keep_checkpoint_max_;
  const double keep_every_secs_;
  const double durable_every_secs_;
  Mutex deleting_;  // one deletion pass at a time (the saver's, close())
  mutable Mutex mutex_;
  std::vector<Entry> entries_ CADRE_GUARDED_BY(mutex_);
  std::vector<std::string> pending_ CADRE_GUARDED_BY(mutex_);
  double last_preserved_timestamp_ CADRE_GUARDED_BY(mutex_) = 0;
  // The newest checkpoint known to be on disk (fsynced), which retention keeps, and when.
  std::string durable_ CADRE_GUARDED_BY(mutex_);
  double durable_timestamp_ CADRE_GUARDED_BY(mutex_) = 0;
};

}  // namespace cadre::checkpoint
