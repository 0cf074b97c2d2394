// A ps task's side of sharded checkpoints (ps.proto's Save and SaveStatus): a snapshot of
// its shard, written as a part on a thread of its own while the task serves on, and how
// each part's write ended, for the chief that commits the checkpoint.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "cadre/base/mutex.h"
#include "strategies/ps/part_snapshot.h"
#include "strategies/ps/ps.pb.h"
#include "strategies/ps/shard.h"

namespace cadre::ps {

// Thread-safe. At most one part is written at a time: a save waits for the one before.
class PartSaver {
 public:
  // `write` unset: the task writes no parts (save() throws FailedPreconditionError).
  PartSaver(std::string task, PartWriter write);
  // Waits for the write in flight.
  ~PartSaver();
  PartSaver(const PartSaver&) = delete;
  PartSaver& operator=(const PartSaver&) = delete;

  // Waits for the part in flight, marks a snapshot of `shard` (Shard::snapshot, copy-on-write)
  // and starts writing it, ending the snapshot once written; returns what the part holds.
  // `shard` must outlive the write (this saver). InvalidArgumentError for a request
  // without a directory or with a file name that is not one.
  SaveResponse save(Shard& shard, const SaveRequest& request);
  // The part's size and CRC-32C once it is durable; its write's error (with its code), or
  // NotFoundError naming the task when it knows no such part (restarted since), or
  // DeadlineExceededError after the request's timeout.
  SaveStatusResponse status(const SaveStatusRequest& request);

 private:
  struct Outcome {
    bool finished = false;
    SaveStatusResponse written;
    int code = 0;  // an ErrorCode; 0: written
    std::string error;
  };
  void write(const SaveRequest& request);

  const std::string task_;
  const PartWriter write_;
  std::mutex save_mutex_;  // one save() at a time; guards writer_ and snapshot_
  std::thread writer_;
  PartSnapshot snapshot_;
  Mutex mutex_;
  CondVar finished_;
  std::map<std::string, Outcome> outcomes_ CADRE_GUARDED_BY(mutex_);  // by file name
};

}  // namespace cadre::ps
