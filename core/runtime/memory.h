// How much memory this process may use at most, to refuse a request that cannot fit with a
// clear error before allocating any of it (an absurd batch size would otherwise grow the
// process until the kernel kills it).
#pragma once

#include <cstdint>
#include <string>

namespace cadre {

// The smaller of the machine's physical memory and the cgroup's limit (cgroup v2
// memory.max, or v1 memory.limit_in_bytes), read once.
uint64_t memory_limit_bytes();

// "23.4 GiB", "310.5 TB"-style text for messages.
std::string human_bytes(double bytes);

}  // namespace cadre
