// The threads behind asynchronous saves (CheckpointManagerOptions::async_save): a writer
// that writes and publishes one snapshot at a time at a low priority, and, for
// copy_in_background, a copier that makes the snapshot while the caller goes on.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <thread>

#include "cadre/base/mutex.h"
#include "cadre/checkpoint/contents.h"

namespace cadre::nn {
class DeferredCopy;
}

namespace cadre::checkpoint {

// At most one save is in flight; the caller wait()s before queuing the next. Meant for one
// calling thread (the saver). The threads start with the first save.
class BackgroundSaver {
 public:
  // A single-file save's writer: a tenth of a busy core, see background_saver.cc.
  static constexpr int kWriterNiceness = 10;

  // `write` writes and publishes a snapshot; it runs on the writer thread, at
  // `writer_niceness` (make_background_thread), and what it throws is the save's failure.
  explicit BackgroundSaver(std::function<void(const CheckpointData&)> write,
                           int writer_niceness = kWriterNiceness);
  // Stops the threads. A save still queued is written first; call wait() before to see
  // how it ended.
  ~BackgroundSaver();
  BackgroundSaver(const BackgroundSaver&) = delete;
  BackgroundSaver& operator=(const BackgroundSaver&) = delete;

  // Copies `data` into host memory on the calling thread (into the last snapshot's memory
  // where the writer is not warming it) and queues the copy. No save may be in flight.
  void save_copy_of(const CheckpointData& data);
  // Queues `data` without copying it here: the copier makes the copy, or a thread about to
  // write one of its variables (nn::finish_deferred_copies) finishes it first. No save may
  // be in flight.
  void save_deferred(CheckpointData data);
  // Has the writer bring the last snapshot's memory back into the cache, where the next
  // save_copy_of() copies into it. Does nothing while a save is in flight or before the
  // first one.
  void warm_next_snapshot();
  // Makes new host memory shaped like `like`'s tensors the memory the next save copies
  // into, as a later save copies into the one before's, and has the writer fault it in a
  // piece at a time without writing it, until that save starts (what is left, its copy
  // faults in). For the first save, whose copy would otherwise fault in new memory on the
  // thread that makes it (under save_deferred, a training thread's update that claims it):
  // call it well ahead. Returns at once; does nothing once a save was queued or memory
  // prepared.
  void prepare_snapshot(const CheckpointData& like);
  // Queues `data` as it is, without a copy: the tensors the write reads are left for it to
  // deal with (a part written through from live variables). No save may be in flight.
  void save_live(CheckpointData data);
  // Has the writer fault in `memory`'s host tensors a piece at a time without writing them,
  // until the next save starts. Returns at once.
  void fault_in_ahead(std::shared_ptr<const CheckpointData> memory);
  // Blocks until the writer is done faulting in what prepare_snapshot() gave (or gave up:
  // a kernel without MADV_POPULATE_WRITE leaves the faults to the copy).
  void wait_prepared();
  // Blocks until no save is in flight; throws the failure of the last one.
  void wait();

 private:
  void start_threads(bool with_copier);
  void write_loop();
  void copy_loop();
  // The writer's part of prepare_snapshot(), last piece first.
  void fault_in(const CheckpointData& snapshot);

  std::function<void(const CheckpointData&)> write_;
  const int writer_niceness_;
  Mutex mutex_;
  CondVar writer_changed_;
  CondVar copy_requested_;
  // The snapshot the writer is to write (null: none in flight).
  std::shared_ptr<const CheckpointData> queued_ CADRE_GUARDED_BY(mutex_);
  // save_deferred: the copy into queued_ until the copier has run it (the writer waits for
  // that), whether the copier started it, how it failed, and the snapshot before queued_
  // (the copier frees it).
  std::shared_ptr<nn::DeferredCopy> copy_ CADRE_GUARDED_BY(mutex_);
  bool copy_started_ CADRE_GUARDED_BY(mutex_) = true;
  std::exception_ptr copy_failure_ CADRE_GUARDED_BY(mutex_);
  std::shared_ptr<const CheckpointData> retired_ CADRE_GUARDED_BY(mutex_);
  // warm_next_snapshot(): the snapshot whose memory the writer touches, and whether it is at it.
  std::shared_ptr<const CheckpointData> to_warm_ CADRE_GUARDED_BY(mutex_);
  bool warming_ CADRE_GUARDED_BY(mutex_) = false;
  // prepare_snapshot(): the memory the writer is to fault in, and whether it is at it.
  std::shared_ptr<const CheckpointData> to_fault_in_ CADRE_GUARDED_BY(mutex_);
  bool faulting_in_ CADRE_GUARDED_BY(mutex_) = false;
  std::exception_ptr failure_ CADRE_GUARDED_BY(mutex_);
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
  // The last save's snapshot, whose memory the next one copies into (calling thread only).
  std::shared_ptr<const CheckpointData> snapshot_;
  std::thread writer_;
  std::thread copier_;
};

}  // namespace cadre::checkpoint
