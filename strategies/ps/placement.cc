#include "strategies/ps/placement.h"

#include <algorithm>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::ps {

Placement::Placement(int num_ps, PlacementOptions options, int64_t max_slice_bytes)
    : num_ps_(num_ps),
      options_(options),
      max_slice_bytes_(max_slice_bytes),
      bytes_(static_cast<size_t>(std::max(num_ps, 0)), 0),
      names_(static_cast<size_t>(std::max(num_ps, 0))) {
  if (num_ps <= 0) {
    throw InvalidArgumentError("parameter-server placement needs at least one ps task");
  }
  if (options.min_slice_bytes <= 0 || options.max_shards < 0 || max_slice_bytes < 0) {
    throw InvalidArgumentError(str_cat("placement: min_slice_bytes (", options.min_slice_bytes,
                                       ") must be positive and max_shards (", options.max_shards,
                                       ") and the largest slice (", max_slice_bytes, ") >= 0"));
  }
}

int Placement::pick(const std::vector<bool>& taken) {
  if (options_.policy == PlacementOptions::Policy::kRoundRobin) {
    for (int tries = 0; tries < num_ps_; ++tries) {
      int ps = next_;
      next_ = (next_ + 1) % num_ps_;
      if (!taken[ps]) return ps;
    }
    return 0;
  }
  int best = -1;
  for (int ps = 0; ps < num_ps_; ++ps) {
    if (!taken[ps] && (best < 0 || bytes_[ps] < bytes_[best])) best = ps;
  }
  return best;
}

// TensorFlow's min_max_variable_partitioner (slices of at least min_slice_bytes, at most
// one per ps task and max_shards), then as many more as keep each under max_slice_bytes_.
int64_t Placement::count_slices(const Shape& shape, int64_t row_bytes) const {
  if (shape.rank() == 0 || shape[0] <= 1) return 1;
  int64_t rows = shape[0], bytes = row_bytes * rows;
  int64_t limit = options_.max_shards > 0 ? std::min(options_.max_shards, num_ps_) : num_ps_;
  int64_t shards = std::clamp<int64_t>(bytes / options_.min_slice_bytes, 1, std::min(limit, rows));
  if (max_slice_bytes_ > 0 && bytes > max_slice_bytes_) {
    int64_t rows_per_slice = std::max<int64_t>(1, max_slice_bytes_ / row_bytes);
    shards = std::max(shards, (rows + rows_per_slice - 1) / rows_per_slice);
  }
  return shards;
}

std::vector<Slice> Placement::place(const std::string& name, const Shape& shape, DType dtype) {
  int64_t row_bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int d = 1; d < shape.rank(); ++d) row_bytes *= shape[d];
  int64_t rows = shape.rank() == 0 ? 1 : shape[0];
  int64_t shards = row_bytes == 0 ? 1 : count_slices(shape, row_bytes);
  std::vector<bool> taken(static_cast<size_t>(num_ps_), false);
  std::vector<Slice> slices;
  int64_t base = rows / shards, extra = rows % shards, first = 0;
  for (int64_t k = 0; k < shards; ++k) {
    // Once every ps task has a slice of this variable, another round over all of them.
    if (k > 0 && k % num_ps_ == 0) std::fill(taken.begin(), taken.end(), false);
    Slice s;
    s.ps = pick(taken);
    taken[s.ps] = true;
    s.rows = base + (k < extra ? 1 : 0);
    s.first_row = first;
    s.name = shards == 1 ? name : str_cat(name, "/part_", k);
    first += s.rows;
    bytes_[s.ps] += s.rows * row_bytes;
    names_[s.ps].push_back(s.name);
    slices.push_back(std::move(s));
  }
  return slices;
}

std::string Placement::describe() const {
  std::string out;
  for (int ps = 0; ps < num_ps_; ++ps) {
    if (ps > 0) out += "\n";
    out += str_cat("ps:", ps, ": ", names_[ps].size(), " variable(s), ", bytes_[ps], " bytes");
    if (!names_[ps].empty()) out += str_cat(" (", join(names_[ps]), ")");
  }
  return out;
}

}  // namespace cadre::ps
