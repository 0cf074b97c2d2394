// Collectives between processes of one host through shared memory: a segment that every
// process maps, with a slot per process, reduce-scatter then all-gather for large buffers
// (each process sums 1/n of every chunk, with vectorised adds) and one exchange for small
// ones. Every process sums in rank order, so the result is the same bits on every rank and
// for every buffer size. No bytes leave the host and nothing listens on a port: the
// segment is mode 0600 and its name is gone once every process has mapped it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strategies/cluster/store.h"
#include "strategies/collectives/collective.h"

namespace cadre {

struct SharedMemoryOptions {
  // A collective in which some process has not arrived after this long throws
  // DeadlineExceededError; so does joining.
  double timeout_seconds = 300;
  // Polled while waiting; a non-empty answer (CoordinationClient::failure(), naming a dead
  // task) makes the collective throw AbortedError with it.
  std::function<std::string()> peer_failure;
  // What to call each rank in errors (e.g. "worker:0"); empty: "rank N".
  std::vector<std::string> rank_names;
  // Bytes each process stages per step of a large reduction, per buffer (two buffers):
  // small enough for the slots to stay in cache between the processes.
  size_t slot_bytes = 256 << 10;
};

// Joins `size` processes (this one is `rank`) through `store` under `prefix`: rank 0 makes
// the segment and the others map it. Returns nullptr, the same on every rank, when some
// process cannot map it (it is on another host or sees another /dev/shm); the caller then
// connects them another way. Throws DeadlineExceededError when a rank does not join within
// the timeout.
std::unique_ptr<ProcessCollective> shared_memory_collective(Store& store, int rank, int size,
                                                            SharedMemoryOptions options,
                                                            const std::string& prefix = "shm");

}  // namespace cadre
