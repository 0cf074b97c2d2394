// The collective for host memory that a worker group uses: shared memory when every
// process of the group is on one host; on several hosts with several processes on some,
// shared memory within each host and Gloo between one leader per host; else Gloo's TCP mesh
// (or when asked).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strategies/cluster/store.h"
#include "strategies/collectives/collective.h"

namespace cadre {

enum class HostTransport {
  kAuto,          // shared memory if every process is on this host, else Gloo
  kSharedMemory,  // shared memory or an UnavailableError
  kGloo,          // TCP through Gloo, even on one host
};

struct HostCollectiveOptions {
  HostTransport transport = HostTransport::kAuto;
  double timeout_seconds = 300;
  std::function<std::string()> peer_failure;  // see SharedMemoryOptions and GlooOptions
  std::vector<std::string> rank_names;        // see SharedMemoryOptions
  // Which host this process is on (processes that share memory have the same); empty: its
  // kernel's boot id and its network namespace.
  std::string host_key;
};

// Every rank of the group calls it with the same options; `host` is the address peers reach
// this process at, for Gloo. The choice is the same on every rank. Throws as
// gloo_collective() does, and UnavailableError for kSharedMemory across hosts.
std::unique_ptr<ProcessCollective> host_collective(Store& store, int rank, int size,
                                                   const std::string& host,
                                                   const HostCollectiveOptions& options);

}  // namespace cadre
