#include "strategies/ps/message_budget.h"

#include <algorithm>

namespace cadre::ps {
namespace {

// A name's field and a TensorData's dtype, shape and length prefixes: well under this.
constexpr int64_t kItemFraming = 64;

}  // namespace

int64_t max_slice_bytes(int64_t max_message_bytes) {
  return std::max<int64_t>(1, max_message_bytes / 4);
}

int64_t max_batch_bytes(int64_t max_message_bytes) {
  return std::max<int64_t>(1, max_message_bytes / 2);
}

int64_t item_cost(int64_t bytes, const std::string& name) {
  return bytes + static_cast<int64_t>(name.size()) + kItemFraming;
}

std::vector<std::pair<size_t, size_t>> batches(const std::vector<int64_t>& costs, int64_t budget) {
  std::vector<std::pair<size_t, size_t>> out;
  int64_t used = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (out.empty() || (used > 0 && used + costs[i] > budget)) {
      out.emplace_back(i, i);
      used = 0;
    }
    out.back().second = i + 1;
    used += costs[i];
  }
  return out;
}

}  // namespace cadre::ps
