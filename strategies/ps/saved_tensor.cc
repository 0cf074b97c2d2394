#include "strategies/ps/saved_tensor.h"

#include <algorithm>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::ps {

SavedTensor::SavedTensor(Tensor live) : live_(std::move(live)) {
  if (live_.rank() == 0 || !live_.is_contiguous() || !live_.device().is_cpu()) {
    throw InternalError("a copy-on-write snapshot of a 0-d or non-contiguous tensor");
  }
  rows_ = live_.dim(0);
  row_bytes_ = rows_ == 0 ? 0 : live_.nbytes() / static_cast<size_t>(rows_);
}

char* SavedTensor::live_row(int64_t row) const {
  return static_cast<char*>(live_.raw_data()) + static_cast<size_t>(row) * row_bytes_;
}

size_t SavedTensor::kept_bytes() const { return kept_rows_.size() * row_bytes_ + tail_.size(); }

void SavedTensor::keep_rows(const Tensor& ids) {
  if (tail_from_ >= 0) return;  // everything not yet read is kept already
  const auto* id = static_cast<const int64_t*>(ids.raw_data());
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    int64_t row = id[i];
    if (row < read_ || row >= rows_) continue;
    std::unique_ptr<char[]>& kept = kept_rows_[row];
    if (kept) continue;  // its value at the mark is kept; this is a later one
    kept = std::make_unique<char[]>(row_bytes_);
    std::memcpy(kept.get(), live_row(row), row_bytes_);
  }
  peak_kept_bytes_ = std::max(peak_kept_bytes_, kept_bytes());
}

void SavedTensor::keep_all() {
  if (tail_from_ >= 0 || read_ == rows_) return;
  tail_from_ = read_;
  tail_.resize(static_cast<size_t>(rows_ - read_) * row_bytes_);
  std::memcpy(tail_.data(), live_row(read_), tail_.size());
  // Rows kept before hold older values than the live ones just copied.
  for (const auto& [row, kept] : kept_rows_) {
    std::memcpy(tail_.data() + static_cast<size_t>(row - tail_from_) * row_bytes_, kept.get(),
                row_bytes_);
  }
  kept_rows_.clear();
  peak_kept_bytes_ = std::max(peak_kept_bytes_, kept_bytes());
}

void SavedTensor::read(int64_t begin, int64_t end, void* destination) {
  if (begin != read_ || end < begin || end > rows_) {
    throw InternalError(str_cat("a snapshot read of rows [", begin, ", ", end, ") after rows [0, ",
                                read_, ") of ", rows_));
  }
  auto* out = static_cast<char*>(destination);
  if (tail_from_ >= 0) {
    std::memcpy(out, tail_.data() + static_cast<size_t>(begin - tail_from_) * row_bytes_,
                static_cast<size_t>(end - begin) * row_bytes_);
  } else {
    std::memcpy(out, live_row(begin), static_cast<size_t>(end - begin) * row_bytes_);
    auto last = kept_rows_.lower_bound(end);
    for (auto it = kept_rows_.begin(); it != last; ++it) {
      std::memcpy(out + static_cast<size_t>(it->first - begin) * row_bytes_, it->second.get(),
                  row_bytes_);
    }
    kept_rows_.erase(kept_rows_.begin(), last);
  }
  read_ = end;
  if (read_ == rows_) {
    tail_ = std::vector<char>();
    tail_from_ = -1;
    read_ = rows_;
  }
}

}  // namespace cadre::ps
