// Timing helpers the benchmark subcommands share (seconds_since: core/base/clock.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/base/clock.h"

namespace cadre::bench {

using Clock = std::chrono::steady_clock;

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return 1e3 * std::chrono::duration<double>(b - a).count();
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace cadre::bench
