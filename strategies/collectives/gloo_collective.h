// Collectives across the processes of a job over Gloo's TCP transport. The processes find
// each other through a key-value store (the coordination service's, see
// coordination_service.h), as Gloo's rendezvous expects.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cadre/base/errors.h"
#include "strategies/cluster/coordination_service.h"

namespace cadre {

class ProcessCollective {
 public:
  virtual ~ProcessCollective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place, the element-wise sum over every process. Collective: every process calls it
  // with the same count, in the same order. Throws UnavailableError naming the peer when
  // the connection breaks, DeadlineExceededError after the timeout.
  virtual void sum(float* data, size_t count) = 0;
  virtual void sum(double* data, size_t count) = 0;
  // In place, root's bytes to every process.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
};

// Connects `size` processes (this one is `rank`) in a full mesh of TCP pairs on `host`
// (the address peers reach this process at), exchanging addresses through `store` under
// `prefix`. Blocks until every process has connected or timeout_seconds pass.
std::unique_ptr<ProcessCollective> gloo_collective(CoordinationClient& store, int rank, int size,
                                                   const std::string& host, double timeout_seconds,
                                                   const std::string& prefix = "gloo");

}  // namespace cadre
