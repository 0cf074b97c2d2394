#include "strategies/gradient_buckets.h"

#include <glog/logging.h>

#include <algorithm>

#include "cadre/autodiff/tape.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "core/kernels/elementwise.h"
#include "core/tensor/views.h"

namespace cadre {

GradientBuckets::GradientBuckets(ProcessCollective& collective, BucketOptions options)
    : collective_(collective), options_(options) {
  if (options_.overlap) thread_ = std::thread([this] { loop(); });
}

GradientBuckets::~GradientBuckets() {
  if (!thread_.joinable()) return;
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void GradientBuckets::sum(const Tensor& buffer) {
  if (buffer.numel() == 0) return;
  if (buffer.dtype() == DType::kFloat32) {
    collective_.sum(buffer.data<float>(), static_cast<size_t>(buffer.numel()));
  } else {
    collective_.sum(buffer.data<double>(), static_cast<size_t>(buffer.numel()));
  }
}

void GradientBuckets::lay_out(const std::vector<Tensor>& sources,
                              const std::vector<bool>& sparse) {
  const size_t n = sources.size();
  bool all_float = true;
  for (const Tensor& s : sources) all_float &= s.dtype() == DType::kFloat32;
  dtype_ = all_float ? DType::kFloat32 : DType::kFloat64;
  const size_t element = dtype_size(dtype_);
  slots_.assign(n, Slot{});
  std::vector<int64_t> sizes;  // elements per bucket
  size_t capacity = options_.first_bucket_bytes;
  for (size_t k : order_) {
    slots_[k].sparse = k < sparse.size() && sparse[k];
    const int64_t count = slots_[k].sparse ? 0 : sources[k].numel();
    const size_t bytes = static_cast<size_t>(count) * element;
    if (sizes.empty() ||
        (sizes.back() > 0 && static_cast<size_t>(sizes.back()) * element + bytes > capacity)) {
      if (!sizes.empty()) capacity = options_.bucket_bytes;
      sizes.push_back(0);
    }
    slots_[k].bucket = sizes.size() - 1;
    slots_[k].offset = sizes.back();
    slots_[k].shape = sources[k].shape();
    slots_[k].dtype = sources[k].dtype();
    sizes.back() += count;
  }
  if (sizes.empty()) sizes.push_back(0);
  sizes.back() += static_cast<int64_t>(extras_);
  buckets_.assign(sizes.size(), Bucket{});
  for (size_t b = 0; b < sizes.size(); ++b) {
    buckets_[b].buffer = Tensor::zeros(Shape{sizes[b]}, dtype_, collective_.device());
  }
  for (const Slot& slot : slots_) ++buckets_[slot.bucket].members;
}

void GradientBuckets::begin(const std::vector<Tensor>& sources, std::vector<double> extras,
                            const std::vector<bool>& sparse, double scale) {
  scale_ = scale;
  {
    // A step that failed may have left a bucket in flight.
    MutexLock lock(mutex_);
    done_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) { return reduced_ == issued_; });
    issued_ = reduced_ = 0;
    failure_ = nullptr;
  }
  std::vector<int64_t> layout;
  for (size_t k = 0; k < sources.size(); ++k) {
    layout.push_back(k < sparse.size() && sparse[k] ? -sources[k].numel() : sources[k].numel());
  }
  layout.push_back(-static_cast<int64_t>(extras.size()) - 1);
  if (layout != layout_) {  // its last entry counts the extras
    extras_ = extras.size();
    order_.resize(sources.size());
    for (size_t k = 0; k < order_.size(); ++k) order_[k] = order_.size() - 1 - k;
    lay_out(sources, sparse);
    layout_ = std::move(layout);
    reordered_ = false;
  } else if (!reordered_) {
    // The second step of this layout, on every worker alike.
    std::vector<size_t> order = agreed_arrival_order();
    if (order != order_) {
      order_ = std::move(order);
      lay_out(sources, sparse);
    }
    reordered_ = true;
  }
  arrivals_.clear();
  for (Slot& slot : slots_) {
    slot.filled = false;
    slot.rows = Gradient();
  }
  for (Bucket& bucket : buckets_) bucket.pending = bucket.members;
  NoGradScope no_grad;
  Tensor& last = buckets_.back().buffer;
  const int64_t end = last.numel();
  if (!extras.empty()) {
    last.slice(0, end - static_cast<int64_t>(extras.size()), end)
        .assign(to_device(Tensor::from_vector<double>(extras).cast(dtype_), last.device()));
  }
  MutexLock lock(mutex_);
  issue_ready_buckets();  // buckets without gradients (only the extras)
}

std::vector<size_t> GradientBuckets::agreed_arrival_order() {
  // A step that failed part way leaves worker 0 without a whole order: it keeps its own.
  std::vector<uint64_t> order(order_.begin(), order_.end());
  if (arrivals_.size() == order.size()) order.assign(arrivals_.begin(), arrivals_.end());
  collective_.broadcast(order.data(), order.size() * sizeof(uint64_t), /*root=*/0);
  std::vector<size_t> agreed(order.begin(), order.end());
  std::vector<size_t> sorted = agreed;
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 0; k < sorted.size(); ++k) {
    CHECK_EQ(sorted[k], k) << "not an order of the sources";
  }
  return agreed;
}

void GradientBuckets::ready(size_t i, const Gradient& gradient) {
  Slot& slot = slots_.at(i);
  if (slot.filled) return;
  slot.filled = true;
  arrivals_.push_back(i);
  slot.defined = gradient.defined();
  Bucket& bucket = buckets_[slot.bucket];
  if (slot.sparse) {
    // Kept as rows; a dense gradient for it (it was sparse when the layout was made) goes
    // as every row.
    NoGradScope no_grad;
    if (gradient.defined() && !gradient.is_sparse()) {
      Tensor dense = gradient.dense();
      slot.rows = IndexedSlices{range(0, static_cast<double>(dense.shape()[0])),
                                scale_ == 1 ? dense : dense * scale_, dense.shape()};
    } else if (gradient.defined()) {
      const IndexedSlices& rows = gradient.sparse();
      slot.rows = IndexedSlices{rows.indices, scale_ == 1 ? rows.values : rows.values * scale_,
                                rows.dense_shape};
    }
  } else {
    NoGradScope no_grad;
    Tensor place = bucket.buffer.slice(0, slot.offset, slot.offset + slot.shape.num_elements());
    if (gradient.defined()) {
      Tensor dense = to_device(gradient.to_dense(), place.device());
      Tensor target = place.reshape(slot.shape.to_vector());
      if (scale_ != 1 && dense.dtype() == target.dtype()) {
        // Scaled straight into the bucket: one pass over the gradient, no temporary.
        kernels::binary.call(target.device(), kernels::BinaryOp::kMul, dense,
                             views::broadcast(scalar_like(dense, scale_), target.shape(), "mul"),
                             target);
      } else {
        target.assign(scale_ == 1 ? dense : dense * scale_);
      }
    } else {
      place.assign(Tensor::zeros(place.shape(), dtype_, place.device()));
    }
  }
  if (--bucket.pending == 0) {
    MutexLock lock(mutex_);
    issue_ready_buckets();
  }
}

void GradientBuckets::issue_ready_buckets() {
  if (!options_.overlap) return;
  size_t before = issued_;
  // The last bucket fills with the backward pass's last gradient, when finish() is next:
  // finish() sums it on its own thread rather than wake the other for it.
  while (issued_ + 1 < buckets_.size() && buckets_[issued_].pending == 0) ++issued_;
  if (issued_ != before) work_.notify_one();
}

std::vector<Gradient> GradientBuckets::finish(std::vector<double>& extras) {
  for (const Bucket& bucket : buckets_) CHECK_EQ(bucket.pending, 0u) << "a gradient never came";
  // The thread's buckets first (the collective takes one caller at a time, in order), then
  // the rest on this thread: every bucket without overlap, the last one with it.
  size_t first_here;
  {
    MutexLock lock(mutex_);
    done_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) { return reduced_ == issued_; });
    if (failure_) std::rethrow_exception(failure_);
    first_here = issued_;
  }
  for (size_t b = first_here; b < buckets_.size(); ++b) sum(buckets_[b].buffer);
  {
    MutexLock lock(mutex_);
    issued_ = reduced_ = buckets_.size();
  }
  NoGradScope no_grad;
  std::vector<Gradient> sums;
  sums.reserve(slots_.size());
  for (const Slot& slot : slots_) {
    if (slot.sparse) {
      sums.push_back(slot.rows);
      continue;
    }
    if (!slot.defined) {
      sums.emplace_back();
      continue;
    }
    Tensor sum = buckets_[slot.bucket]
                     .buffer.slice(0, slot.offset, slot.offset + slot.shape.num_elements())
                     .reshape(slot.shape.to_vector());
    sums.emplace_back(sum.dtype() == slot.dtype ? sum : sum.cast(slot.dtype));
  }
  const Tensor& last = buckets_.back().buffer;
  const int64_t end = last.numel();
  Tensor tail = to_device(last.slice(0, end - static_cast<int64_t>(extras_), end), Device::cpu(0))
                    .cast(DType::kFloat64);
  extras = tail.to_vector<double>();
  return sums;
}

void GradientBuckets::loop() {
  MutexLock lock(mutex_);
  while (true) {
    work_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) { return stopping_ || reduced_ < issued_; });
    if (reduced_ == issued_) return;  // stopping, nothing left
    Tensor buffer = buckets_[reduced_].buffer;
    lock.unlock();
    std::exception_ptr failure;
    try {
      sum(buffer);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    if (failure && !failure_) failure_ = failure;
    ++reduced_;
    done_.notify_all();
  }
}

}  // namespace cadre
