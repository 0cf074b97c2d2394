#include "estimator/given_batches.h"

#include <algorithm>

namespace cadre::estimator_internal {
namespace {

// Joiners restore the newest checkpoint they find; the chief may have saved a few more by
// the time they join.
constexpr size_t kRecentCheckpoints = 64;

}  // namespace

void GivenBatches::given(const std::vector<int>& workers, int64_t steps) {
  if (steps <= 0) return;
  for (int worker : workers) total_[worker] += steps;
}

int64_t GivenBatches::total(int worker) const {
  auto it = total_.find(worker);
  return it == total_.end() ? 0 : it->second;
}

int64_t GivenBatches::behind(int worker) const {
  auto it = at_gather_.find(worker);
  return total(worker) - (it == at_gather_.end() ? 0 : it->second);
}

void GivenBatches::saved(int64_t step) {
  if (!saved_.empty() && saved_.back().first == step) saved_.pop_back();
  saved_.push_back({step, total_});
  if (saved_.size() > kRecentCheckpoints) saved_.pop_front();
}

int64_t GivenBatches::to_skip(int worker, int64_t restored_step) const {
  auto it = std::find_if(saved_.rbegin(), saved_.rend(),
                         [&](const auto& entry) { return entry.first == restored_step; });
  if (it == saved_.rend()) return 0;
  auto held = it->second.find(worker);
  return std::max<int64_t>(0, total(worker) - (held == it->second.end() ? 0 : held->second));
}

}  // namespace cadre::estimator_internal
