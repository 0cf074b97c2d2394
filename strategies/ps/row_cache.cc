#include "strategies/ps/row_cache.h"

#include <cstring>

#include "core/runtime/in_parallel.h"
#include "strategies/ps/rows.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {

RowCache::RowCache(const std::vector<std::unique_ptr<PsClient>>& clients, std::vector<Slice> slices,
                   int64_t rows)
    : clients_(clients), slices_(std::move(slices)), fresh_(static_cast<size_t>(rows), 0) {}

void RowCache::fetch(Tensor local) {
  MutexLock lock(mutex_);
  if (all_fresh_) return;
  in_parallel(static_cast<int>(slices_.size()), [&](int k) {
    const Slice& s = slices_[static_cast<size_t>(k)];
    PullRequest request;
    request.add_items()->set_name(s.name);
    PullResponse response = clients_[static_cast<size_t>(s.ps)]->pull(request);
    write_rows(local, from_proto(response.values(0), s.name), s.first_row);
  });
  all_fresh_ = true;
}

void RowCache::fetch_rows(Tensor local, const Tensor& ids) {
  MutexLock lock(mutex_);
  if (all_fresh_) return;
  // This step's new rows, by slice.
  std::vector<std::vector<int64_t>> wanted(slices_.size());
  for (int64_t id : ids_of(ids)) {
    if (id < 0 || id >= static_cast<int64_t>(fresh_.size()) || fresh_[id]) continue;
    fresh_[id] = 1;
    touched_.push_back(id);
    wanted[slice_of(id)].push_back(id);
  }
  std::vector<int> which;
  for (size_t k = 0; k < slices_.size(); ++k) {
    if (!wanted[k].empty()) which.push_back(static_cast<int>(k));
  }
  if (which.empty()) return;
  in_parallel(which, [&](int k) {
    const Slice& s = slices_[static_cast<size_t>(k)];
    const std::vector<int64_t>& rows = wanted[static_cast<size_t>(k)];
    std::vector<int64_t> local_ids(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) local_ids[i] = rows[i] - s.first_row;
    PullRequest request;
    PullItem* item = request.add_items();
    item->set_name(s.name);
    to_proto(Tensor::from_vector(local_ids), item->mutable_rows());
    PullResponse response = clients_[static_cast<size_t>(s.ps)]->pull(request);
    Tensor values = from_proto(response.values(0), s.name);
    size_t bytes = row_bytes(local);
    for (size_t i = 0; i < rows.size(); ++i) {
      std::memcpy(static_cast<char*>(local.raw_data()) + static_cast<size_t>(rows[i]) * bytes,
                  static_cast<const char*>(values.raw_data()) + i * bytes, bytes);
    }
  });
}

void RowCache::invalidate() {
  MutexLock lock(mutex_);
  for (int64_t id : touched_) fresh_[id] = 0;
  touched_.clear();
  all_fresh_ = false;
}

size_t RowCache::slice_of(int64_t row) const {
  for (size_t k = 0; k + 1 < slices_.size(); ++k) {
    if (row < slices_[k + 1].first_row) return k;
  }
  return slices_.size() - 1;
}

}  // namespace cadre::ps
