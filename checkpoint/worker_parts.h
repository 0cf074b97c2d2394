// Internal to Cadre: sharded checkpoints of workers that each hold every variable
// (MultiWorkerMirrored). Each worker writes a share of the variables as a part (FORMAT.md,
// Sharded checkpoints); the chief's CheckpointManager commits them with the manifest as it
// commits a ps task's parts. Which worker writes which rows is decided here, alike on every
// worker, from the variables alone, and the manifest records it.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cadre/checkpoint/contents.h"
#include "checkpoint/parts.h"

namespace cadre::checkpoint {

class BackgroundSaver;

// A variable that takes at least this many bytes with its slots is split by rows among the
// workers (worker w writing rows [w * rows / n, (w + 1) * rows / n) of it and of its slots);
// smaller ones go whole, largest first, to the worker with the fewest bytes so far.
inline constexpr int64_t kSplitByRowsBytes = int64_t{4} << 20;

// The shares of `workers` workers of data.variables (slots, as data.slot_of names them,
// follow their variable): share w lists the slices worker w writes, which cover every row of
// every tensor once. Deterministic: workers holding the same variables make the same split.
std::vector<std::vector<PartSlice>> split_among_workers(const CheckpointData& data, int workers,
                                                        int64_t split_by_rows_bytes);

// The contents of a part holding `share` of data.variables: each slice, a view of its rows,
// under part_dataset_name, with its slot_of.
CheckpointData part_data(const CheckpointData& data, const std::vector<PartSlice>& share);

// Writes one worker's parts in the background, one part at a time, while training goes on:
// write() hands over live tensors, a copier thread snapshots them (a thread about to write
// one of them finishes that copy first: nn::finish_deferred_copies, which optimizer updates
// and Variable::assign call) and a writer thread writes the part durably with
// write_part_file. Meant for one calling thread.
class WorkerPartWriter {
 public:
  // How a part ended: its size and CRC-32C, or (`error` set) why it was not written.
  using Done = std::function<void(const WrittenPart& written, std::exception_ptr error)>;

  WorkerPartWriter();
  // Waits for the part in flight.
  ~WorkerPartWriter();
  WorkerPartWriter(const WorkerPartWriter&) = delete;
  WorkerPartWriter& operator=(const WorkerPartWriter&) = delete;

  // Waits for the part before (its outcome went to its `done`), then queues `part` to be
  // written as model_dir/file_name; `done` runs on the writer thread. The tensors of `part`
  // must be written only through nn::finish_deferred_copies' rule until the copy is made.
  void write(const std::string& model_dir, const std::string& file_name, CheckpointData part,
             Done done);
  // Has the memory of the first part's snapshot, shaped like `part`, allocated and faulted in
  // ahead, off the calling thread, until the first write() (BackgroundSaver::prepare_snapshot);
  // later parts copy into the one before's. Returns at once.
  void prepare(const CheckpointData& part);
  // Blocks until no part is in flight.
  void wait();

 private:
  struct Target {
    std::string model_dir, file_name;
    Done done;
    std::chrono::steady_clock::time_point handed_over;
  };
  Target target_;  // of the part in flight: set before it is queued, read by the writer
  std::unique_ptr<BackgroundSaver> saver_;
};

}  // namespace cadre::checkpoint
