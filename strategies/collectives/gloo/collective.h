// Collectives in host memory over Gloo's TCP transport: an all-reduce (a ring, or halving and
// doubling for small buffers on more than 2 processes) and a broadcast.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strategies/cluster/store.h"
#include "strategies/collectives/collective.h"

namespace cadre {

struct GlooOptions {
  // Bounds connecting and every collective: an operation whose peer has not answered within
  // it throws UnavailableError (Gloo's read timeout).
  double timeout_seconds = 300;
  // Polled while the collective lives; a non-empty answer (CoordinationClient::failure(),
  // naming a dead or hung task) ends a waiting operation at once with AbortedError carrying
  // it, rather than at the timeout.
  std::function<std::string()> peer_failure;
  // What to call each rank in errors (e.g. "worker:0"); empty: "rank N".
  std::vector<std::string> rank_names;
};

// Connects `size` processes (this one is `rank`) in a full mesh of TCP pairs on `host`
// (the address peers reach this process at), exchanging addresses through `store` under
// `prefix`. Blocks until every process has connected or the timeout passes. Throws
// UnavailableError naming the host when it cannot connect. A collective that loses a peer
// throws UnavailableError naming the peers it was talking to.
std::unique_ptr<ProcessCollective> gloo_collective(Store& store, int rank, int size,
                                                   const std::string& host, GlooOptions options,
                                                   const std::string& prefix = "gloo");

}  // namespace cadre
