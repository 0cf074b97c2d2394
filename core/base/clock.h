// Time as Cadre counts it: the steady clock, with durations in seconds as doubles (the unit of
// every timeout and period in the options). One helper each way, for every module.
#pragma once

#include <chrono>

namespace cadre {

using SteadyClock = std::chrono::steady_clock;

// `seconds` as a duration of the steady clock (truncated to its tick), to add to now().
inline SteadyClock::duration from_seconds(double seconds) {
  return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

// The seconds from `start` to now.
inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace cadre
