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

namespace cadre::nn {
class DeferredCopy;
class PiecePool;
}  // namespace cadre::nn

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
// write() hands over live tensors and a writer thread writes the part durably with
// write_part_file. Host tensors are written through, each block straight from the
// variable's memory, and a thread about to overwrite a block the writer has not taken yet
// (an optimizer's update, which claims it: nn::claim_deferred_copies, or Variable::assign)
// copies it first into a buffer of a bounded pool (kPoolPieces blocks), or, with none
// free, waits for the writer to take it; 0-d tensors are copied at the handover. A part
// holding other tensors (on a GPU) is snapshotted whole by a copier thread first, as an
// asynchronous single-file save is. Meant for one calling thread.
class WorkerPartWriter {
 public:
  // How a part ended: its size and CRC-32C, or (`error` set) why it was not written.
  using Done = std::function<void(const WrittenPart& written, std::exception_ptr error)>;

  // The pool that updates copy the blocks they overwrite into before the writer got to
  // them: 64 MiB (16 blocks), all that a worker holds for its parts beside its variables,
  // whatever the model's size (1/8 of a 512 MiB model, 1/32 of a 2 GiB one). The next update
  // comes a forward and backward pass after the handover, when the writer (0.5-1.2 GB/s on
  // docs/BENCHMARKS.md's VM) has written most of a part; past the pool, an update waits for
  // the writer to take what it overwrites (#46).
  static constexpr size_t kPoolPieces = 16;

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
  // Has the memory the parts need beside the variables allocated and faulted in ahead, off
  // the calling thread, until the first write(): the pool, or for a part that is not written
  // through, its snapshot, shaped like `part` (BackgroundSaver::prepare_snapshot; later parts
  // copy into the one before's). Returns at once.
  void prepare(const CheckpointData& part);
  // Blocks until no part is in flight.
  void wait();

 private:
  struct Target {
    std::string model_dir, file_name;
    Done done;
    std::chrono::steady_clock::time_point handed_over;
    // Written through: the deferred copy of its row tensors and their sources.
    std::shared_ptr<nn::DeferredCopy> through;
    RowsInPlaceSources in_place;
  };
  // Makes `part` a part written through (target_.through and in_place), or returns false
  // where it cannot be.
  bool write_through(CheckpointData& part);

  Target target_;  // of the part in flight: set before it is queued, read by the writer
  std::shared_ptr<nn::PiecePool> pool_;
  std::unique_ptr<BackgroundSaver> saver_;
};

}  // namespace cadre::checkpoint
