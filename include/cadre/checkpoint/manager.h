// CheckpointManager: saves checkpoints of one model_dir, publishes them atomically, keeps
// the `checkpoint` state file and applies retention. The training chief owns one.
//
// Publishing a checkpoint of step S, in this order:
//   1. write model_dir/model.ckpt-S.h5.tmp-<n>-<owner> (HDF5, checksummed), close it;
//   2. fsync it (durable saves only, see durable_every_secs), rename it to
//      model.ckpt-S.h5, fsync model_dir;
//   3. replace the state file the same way (temporary, fsync, rename, fsync model_dir;
//      again the fsyncs for durable saves only);
//   4. only then delete the checkpoints that retention drops (skipping leased ones).
// A sharded save (CheckpointData::parts) first waits until every part is durable, then
// writes this file with the manifest of the parts (FORMAT.md); a part whose checkpoint was
// never published is removed as a temporary is.
// A crash of the process at any point leaves a state file naming only complete files; at
// worst a temporary file (removed by the next manager of the model_dir once its owner is
// seen dead) or a published file the state file does not name yet. A crash of the machine
// may also lose the checkpoints published since the last durable one, which readers then
// skip as damaged (restore_latest_good) down to that one.
//
// A CheckpointManager is meant for one thread (the saver); the listing methods may be called
// from others. Its asynchronous writer is internal. It must be the only writer of its
// model_dir.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/checkpoint/contents.h"
#include "cadre/checkpoint/writer.h"

namespace cadre::checkpoint {

struct CheckpointManagerOptions {
  // The newest checkpoints kept; older ones are deleted. 0 keeps every checkpoint.
  int keep_checkpoint_max = 5;
  // Additionally keep, for good, one checkpoint per this many hours among those retention
  // drops (TensorFlow's rule: the first dropped one at least n hours after the last kept).
  // 0: off.
  double keep_checkpoint_every_n_hours = 0;
  // save() copies the data to host memory and returns; a background thread writes and
  // publishes it. At most one save is in flight: the next save() first waits for it.
  // A failure is thrown by the next save(), wait() or close().
  bool async_save = false;
  // With async_save, save() does not copy either: a background thread at normal priority
  // copies the data while the caller goes on, and a thread about to write a variable
  // (nn::finish_deferred_copies, which optimizer updates and Variable::assign call) finishes
  // that copy first. Only for callers that write the saved tensors that way and no other
  // (the Estimator's training loop); the others they must leave alone until wait().
  bool copy_in_background = false;
  std::string basename = "model.ckpt";
  // How old the newest durable checkpoint may be, in seconds, when a save publishes. A save
  // this long after the last durable one is fsynced before it is published; the others
  // are published from the page cache, where the kernel writes them back later (after
  // about 30 s) or never, when retention deletes them first. Retention keeps the newest
  // durable checkpoint until a newer one is durable, and close() makes the newest one
  // durable. So a process that is killed loses nothing (the page cache outlives it) and a
  // machine that loses power comes back to a checkpoint at most this old, plus one save
  // interval. 0: every save is durable. Writing back and fsyncing take CPU and disk time
  // from training, which saving every few seconds cannot afford (TensorFlow never fsyncs).
  double durable_every_secs = 0;
  WriteOptions write_options;
  // File system and clock; null: the real ones.
  std::shared_ptr<Env> env;
};

class CheckpointManager {
 public:
  // Creates model_dir when missing, continues the retention recorded in its state file,
  // removes temporaries that a crashed save left and takes over checkpoints newer than the
  // state file's (published by a save interrupted before it updated the state). A state
  // file missing beside checkpoint files, empty, unparsable or naming a file that is gone is
  // rebuilt from the files (see rebuilt_state in checkpoint/model_dir_checkpoints.h: the
  // newest intact checkpoint is the latest) and rewritten, with a warning naming what was
  // wrong; where it cannot be written (a read-only model_dir) it is left, with a warning.
  // Clean-up that fails (temporaries, what retention dropped earlier) is logged and
  // retried later. Throws the Env's error when model_dir cannot be created or listed.
  explicit CheckpointManager(std::string model_dir, CheckpointManagerOptions options = {});
  // Waits for a save in flight; its failure is logged, not thrown (call close() to see it).
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Saves `data` as model_dir/<basename>-<global_step>.h5 (replacing a checkpoint of the
  // same step) and returns that path. A step below the newest one model_dir held or this
  // manager saved, or equal to the newest that model_dir held, is saved with a warning
  // naming both (training went back). Synchronous: returns once the checkpoint and the
  // state file are published (and durable, see durable_every_secs). Asynchronous: returns once
  // `data` is copied, or at once with copy_in_background; see CheckpointManagerOptions. Throws
  // InvalidArgumentError (nothing written) for data that cannot be saved, the failure of a previous
  // asynchronous save, or the I/O error of this one (in which case the previous checkpoints and
  // state are intact).
  std::string save(const CheckpointData& data);
  // The same, taking `data` over: with copy_in_background, nothing of it is copied on the
  // calling thread.
  std::string save(CheckpointData&& data);
  // Blocks until no save is in flight; throws the failure of the last asynchronous save.
  void wait();
  // Says that save() will be called soon (a step ahead). With async_save, the writer
  // thread brings the memory the next snapshot is copied into back into the cache: a copy
  // into memory last written a hundred steps earlier takes twice as long, and the caller
  // waits for that copy. Does nothing while a save is in flight, or with copy_in_background
  // (the caller does not wait for the copy); save() never waits for it.
  void prepare_save();
  // wait(), makes the newest checkpoint durable, then deletes what retention dropped and no
  // reader leases any more; the manager stays usable.
  void close();

  const std::string& model_dir() const;
  std::string checkpoint_path(int64_t global_step) const;
  // File names for the `count` parts of a sharded checkpoint of `global_step` that other
  // tasks write (CheckpointData::parts), unique to one save, so that saving a step again
  // never overwrites the parts of its published checkpoint.
  std::vector<std::string> part_file_names(int64_t global_step, int count) const;
  // The checkpoints retention manages (those of the state file), oldest first, after the
  // last completed save.
  std::vector<std::string> checkpoints() const;
  std::optional<std::string> latest_checkpoint() const;
  // Checkpoints retention dropped but has not deleted yet because a reader leases them (or
  // the deletion failed); retried at each save, at close() and by a new manager of the
  // model_dir, and deleted by a CheckpointWatcher that lets go of its lease.
  std::vector<std::string> pending_deletions() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cadre::checkpoint
