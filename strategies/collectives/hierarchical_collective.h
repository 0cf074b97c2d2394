// Collectives for a job of several hosts with several processes each: within each host
// through shared memory, across hosts between one leader per host over Gloo's TCP, then
// within each host again (so that only 1/k of the processes' bytes cross the network).
#pragma once

#include <memory>

#include "strategies/collectives/collective.h"

namespace cadre {

// `local`: this host's processes, in job order (null when it is alone on its host);
// `leaders`: the first process of each host, host h as rank h, set on this host's first
// process only. host_of[r] is rank r's host.
std::unique_ptr<ProcessCollective> hierarchical_collective(
    int rank, int size, std::unique_ptr<ProcessCollective> local,
    std::unique_ptr<ProcessCollective> leaders, std::vector<int> host_of);

}  // namespace cadre
