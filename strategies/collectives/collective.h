// Collectives across the processes of a job: the interface, with an implementation per
// library in a folder of its own (gloo/: host memory over TCP; nccl/: GPU memory). The
// processes find each other through a Store (strategies/cluster/store.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cadre/tensor/device.h"

namespace cadre {

// One process's end of collectives over `size()` processes, as a Gloo context or an NCCL
// communicator is; this process is `rank()`. Buffers are in the memory of device(): the
// host (cpu:0) for Gloo, the communicator's GPU for NCCL.
//
// Every operation is collective: every process calls it with the same count, in the same
// order. Each returns when its result is in place, or throws: UnavailableError or
// AbortedError when a peer is gone or the collective failed, DeadlineExceededError after
// the timeout the collective was made with, each naming what it knows. Thread-compatible:
// one thread at a time.
class ProcessCollective {
 public:
  virtual ~ProcessCollective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0;
  // What carries the bytes ("Gloo", "shared memory", "NCCL"), for logs.
  virtual const char* transport() const = 0;
  // In place, the element-wise sum over every process.
  virtual void sum(float* data, size_t count) = 0;
  virtual void sum(double* data, size_t count) = 0;
  // In place, root's bytes to every process.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // This process leaves the group for good, whatever the others are doing: their current
  // and later operations fail at once rather than wait for it. May be called from another
  // thread than the one in an operation, and more than once.
  virtual void leave() {}
};

// What errors call rank `r`: its name in `names` ("worker:0"), else "rank r".
inline std::string rank_name(const std::vector<std::string>& names, int r) {
  return static_cast<size_t>(r) < names.size() ? names[r] : "rank " + std::to_string(r);
}

}  // namespace cadre
