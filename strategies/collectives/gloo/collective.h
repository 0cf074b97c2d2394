// Collectives in host memory over Gloo's TCP transport: an all-reduce (a ring, or halving and
// doubling for small buffers on more than 2 processes) and a broadcast.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strategies/cluster/store.h"
#include "strategies/collectives/collective.h"

namespace cadre {

// Connects `size` processes (this one is `rank`) in a full mesh of TCP pairs on `host`
// (the address peers reach this process at), exchanging addresses through `store` under
// `prefix`. Blocks until every process has connected or timeout_seconds pass, which then
// bound every collective. Throws UnavailableError naming the host when it cannot connect.
// A collective that loses a peer throws UnavailableError naming the peers it was talking to
// by `rank_names` (the job's task names; "rank r" where there are none).
std::unique_ptr<ProcessCollective> gloo_collective(Store& store, int rank, int size,
                                                   const std::string& host, double timeout_seconds,
                                                   const std::string& prefix = "gloo",
                                                   std::vector<std::string> rank_names = {});

}  // namespace cadre
