#include "tools/cadre_bench/step_times.h"

#include <algorithm>

namespace cadre::bench {

namespace {

double save_cost_ms(const StepTimes& times, size_t first, double typical_ms, int64_t save_every) {
  constexpr size_t kSaveCostSteps = 20;
  const auto& steps = times.steps;
  std::vector<double> save_costs;
  for (size_t i = first + 1; i + kSaveCostSteps < steps.size(); ++i) {
    if (steps[i - 1] % save_every != 0) continue;
    double cost = 0;
    for (size_t j = i; j <= i + kSaveCostSteps; ++j) {
      cost += ms_between(times.ends[j - 1], times.ends[j]) - typical_ms;
    }
    save_costs.push_back(cost);
  }
  return save_costs.empty() ? 0 : median(save_costs);
}

// Window-to-window steadiness: the rates of the timed steps in 7 windows of equal step
// counts.
std::vector<double> window_rates(const StepTimes& times, size_t first, size_t last,
                                 int64_t batch_size) {
  constexpr int kWindows = 7;
  const auto& steps = times.steps;
  std::vector<double> rates;
  size_t per_window = (last - first) / kWindows;
  for (int w = 0; w < kWindows && per_window > 0; ++w) {
    size_t a = first + w * per_window, b = a + per_window;
    rates.push_back(static_cast<double>(steps[b] - steps[a]) * batch_size * 1e3 /
                    ms_between(times.ends[a], times.ends[b]));
  }
  return rates;
}

}  // namespace

StepStats step_stats(const StepTimes& times, int64_t untimed_steps, int64_t save_every,
                     int64_t batch_size) {
  // For the steps that saved, how much longer than the median step their hooks took
  // (training blocked) and the interval to the next step end (blocked, plus the background
  // write's interference).
  std::vector<double> gaps, saved_gaps, intervals, saved_intervals;
  size_t first = 0;
  const auto& steps = times.steps;
  while (first < steps.size() && steps[first] < untimed_steps) ++first;
  for (size_t i = first + 1; i < steps.size(); ++i) {
    bool saved = save_every > 0 && steps[i - 1] % save_every == 0;
    (saved ? saved_gaps : gaps).push_back(ms_between(times.ends[i - 1], times.begins[i]));
    (saved ? saved_intervals : intervals).push_back(ms_between(times.ends[i - 1], times.ends[i]));
  }
  StepStats stats;
  size_t last = steps.size() - 1;
  stats.rate = static_cast<double>(steps[last] - steps[first]) * batch_size * 1e3 /
               ms_between(times.ends[first], times.ends[last]);
  std::vector<double> windows = window_rates(times, first, last, batch_size);
  auto [slowest, fastest] = std::minmax_element(windows.begin(), windows.end());
  stats.window_min = *slowest;
  stats.window_max = *fastest;
  stats.step_ms_median = median(intervals);
  stats.saves_timed = saved_gaps.size();
  stats.blocked_ms = saved_gaps.empty() ? 0 : median(saved_gaps) - median(gaps);
  stats.extra_ms = saved_intervals.empty() ? 0 : median(saved_intervals) - median(intervals);
  if (save_every > 0 && !intervals.empty()) {
    stats.save_cost_ms = save_cost_ms(times, first, median(intervals), save_every);
  }
  return stats;
}

}  // namespace cadre::bench
