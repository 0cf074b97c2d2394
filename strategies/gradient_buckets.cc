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
    : collective_(collective), host_(collective), options_(options) {
  if (options_.overlap) thread_ = std::thread([this] { loop(); });
}

GradientBuckets::GradientBuckets(GpuCollective& gpus, ProcessCollective& host,
                                 BucketOptions options)
    : collective_(gpus), host_(host), options_(options) {
  if (options_.overlap) queue_ = &gpus;
}

GradientBuckets::~GradientBuckets() {
  if (queue_ != nullptr) {
    // flat_ is freed after this: not while a sum still writes it.
    try {
      queue_->wait_queued();
    } catch (const std::exception& e) {
      LOG(WARNING) << "gradient buckets: " << e.what();
    }
  }
  if (!thread_.joinable()) return;
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

Tensor GradientBuckets::bucket(size_t b) const {
  return flat_.slice(0, buckets_[b].begin, buckets_[b].end);
}

void GradientBuckets::sum(size_t bucket) {
  const Bucket& b = buckets_[bucket];
  if (b.end == b.begin) return;
  const size_t count = static_cast<size_t>(b.end - b.begin);
  if (dtype_ == DType::kFloat32) {
    collective_.sum(flat_.data<float>() + b.begin, count);
  } else {
    collective_.sum(flat_.data<double>() + b.begin, count);
  }
}

void GradientBuckets::lay_out(const std::vector<Tensor>& sources, const std::vector<bool>& sparse) {
  const size_t n = sources.size();
  bool all_float = true;
  for (const Tensor& s : sources) all_float &= s.dtype() == DType::kFloat32;
  dtype_ = all_float ? DType::kFloat32 : DType::kFloat64;
  const int64_t element = static_cast<int64_t>(dtype_size(dtype_));
  slots_.assign(n, Slot{});
  buckets_.clear();
  int64_t end = 0;      // elements laid out
  bool sealed = false;  // the last bucket is a piece's: it takes nothing more
  auto open_bucket = [&] {
    buckets_.push_back(Bucket{end, end});
    sealed = false;
  };
  for (size_t k : order_) {
    Slot& slot = slots_[k];
    slot.sparse = k < sparse.size() && sparse[k];
    slot.shape = sources[k].shape();
    slot.dtype = sources[k].dtype();
    const int64_t count = slot.sparse ? 0 : sources[k].numel();
    const int64_t rows = slot.shape.rank() >= 2 ? slot.shape[0] : 1;
    const int64_t row = rows > 0 ? count / rows : 0;
    // As many pieces as piece_bytes asks for, of rows shared out evenly.
    int64_t piece_rows = rows;
    if (options_.piece_bytes > 0 && row > 0) {
      const int64_t bytes = count * element, limit = static_cast<int64_t>(options_.piece_bytes);
      const int64_t pieces = std::min(rows, (bytes + limit - 1) / limit);
      piece_rows = (rows + pieces - 1) / pieces;
    }
    if (piece_rows < rows) {
      for (int64_t r = 0; r < rows; r += piece_rows) {
        if (buckets_.empty() || buckets_.back().end > buckets_.back().begin) open_bucket();
        const int64_t row_end = std::min(rows, r + piece_rows);
        std::vector<int64_t> dims = slot.shape.to_vector();
        dims[0] = row_end - r;
        slot.pieces.push_back(
            Piece{buckets_.size() - 1, r, row_end, end, end + dims[0] * row, Shape(dims)});
        end = buckets_.back().end = slot.pieces.back().end;
      }
      sealed = true;
      if (layout_.empty()) {  // the first layout
        LOG(INFO) << "the gradient of source " << k << " (" << slot.shape << ") is summed in "
                  << slot.pieces.size() << " pieces of up to " << piece_rows << " rows";
      }
      continue;
    }
    // The first bucket holds up to first_bucket_bytes, the others bucket_bytes; an empty
    // one takes any gradient.
    if (buckets_.empty() || sealed ||
        (buckets_.back().end > buckets_.back().begin &&
         (buckets_.back().end - buckets_.back().begin + count) * element >
             static_cast<int64_t>(buckets_.size() == 1 ? options_.first_bucket_bytes
                                                       : options_.bucket_bytes))) {
      open_bucket();
    }
    slot.pieces.push_back(Piece{buckets_.size() - 1, 0, rows, end, end + count, slot.shape});
    end = buckets_.back().end = end + count;
  }
  if (buckets_.empty()) open_bucket();
  end = buckets_.back().end = end + static_cast<int64_t>(extras_);
  // Let go of the buffer of the layout before first: the allocator keeps what it frees for
  // an allocation of its size, which the new buffer then is (laid out again in the second
  // step, in the agreed order, the old one stayed cached beside it: a gradient's size).
  flat_ = Tensor();
  flat_ = Tensor::zeros(Shape{end}, dtype_, collective_.device());
  for (const Slot& slot : slots_) {
    for (const Piece& piece : slot.pieces) ++buckets_[piece.bucket].members;
  }
}

void GradientBuckets::begin(const std::vector<Tensor>& sources, std::vector<double> extras,
                            const std::vector<bool>& sparse, double scale) {
  scale_ = scale;
  {
    // A step that failed may have left a bucket in flight.
    if (queue_ != nullptr) queue_->wait_queued();
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
  const int64_t end = flat_.numel();
  if (!extras.empty()) {
    Tensor values = Tensor::from_vector<double>(extras).cast(dtype_);
    Tensor place = flat_.slice(0, end - static_cast<int64_t>(extras.size()), end);
    if (place.device().is_cpu()) {
      place.assign(values);
    } else {
      // Without waiting for the device (a synchronous copy would wait for the forward pass).
      Tensor staged = empty_pinned(values.shape(), dtype_);
      staged.assign(values);
      AsyncCopy copy = to_device_async(staged, place.device());
      place.assign(copy.tensor);
      extras_upload_ = std::move(copy.transfer);
    }
  }
  MutexLock lock(mutex_);
  issue_ready_buckets();  // buckets without gradients (only the extras)
}

std::vector<size_t> GradientBuckets::agreed_arrival_order() {
  // A step that failed part way leaves worker 0 without a whole order: it keeps its own.
  std::vector<uint64_t> order(order_.begin(), order_.end());
  if (arrivals_.size() == order.size()) order.assign(arrivals_.begin(), arrivals_.end());
  host_.broadcast(order.data(), order.size() * sizeof(uint64_t), /*root=*/0);
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
  NoGradScope no_grad;
  if (slot.sparse) {
    // Kept as rows; a dense gradient for it (it was sparse when the layout was made) goes
    // as every row.
    if (gradient.defined() && !gradient.is_sparse()) {
      Tensor dense = gradient.to_dense();
      slot.rows = IndexedSlices{range(0, static_cast<double>(dense.shape()[0])),
                                scale_ == 1 ? dense : dense * scale_, dense.shape()};
    } else if (gradient.defined()) {
      const IndexedSlices& rows = gradient.sparse();
      slot.rows = IndexedSlices{rows.indices, scale_ == 1 ? rows.values : rows.values * scale_,
                                rows.dense_shape};
    }
    piece_done(slot.pieces[0].bucket);
    return;
  }
  const autodiff::DeferredGradient* unbuilt = gradient.deferred();
  Tensor whole;  // built once, unless built by pieces
  for (const Piece& piece : slot.pieces) {
    Tensor place = flat_.slice(0, piece.begin, piece.end).reshape(piece.shape.to_vector());
    if (!gradient.defined()) {
      place.assign(Tensor::zeros(place.shape(), dtype_, place.device()));
    } else {
      Tensor part;
      if (unbuilt != nullptr && slot.pieces.size() > 1) {
        part = unbuilt->rows(piece.row_begin, piece.row_end);
      }
      if (!part.defined() && unbuilt != nullptr && slot.pieces.size() == 1 &&
          unbuilt->dtype() == dtype_ && unbuilt->device() == place.device() &&
          place.device().is_cpu()) {
        // Built in its bucket: held once, not also as a temporary as large as the gradient
        // (that the allocator then keeps). Scaled there after, the same bits as scaled into it.
        // Host buckets only: a GPU's kernels writing into a bucket's view are untested.
        unbuilt->materialize_into(place);
        if (scale_ != 1) put(place, place);
        piece_done(piece.bucket);
        continue;
      }
      if (!part.defined()) {
        if (!whole.defined()) whole = gradient.to_dense();
        part = slot.pieces.size() > 1 ? whole.slice(0, piece.row_begin, piece.row_end) : whole;
      }
      put(to_device(part, place.device()), place);
    }
    piece_done(piece.bucket);
  }
}

void GradientBuckets::put(const Tensor& part, Tensor place) const {
  if (scale_ != 1 && part.dtype() == place.dtype()) {
    // Scaled straight into the bucket: one pass over the gradient, no temporary.
    kernels::binary.call(place.device(), kernels::BinaryOp::kMul, part,
                         views::broadcast(scalar_like(part, scale_), place.shape(), "mul"), place);
  } else {
    place.assign(scale_ == 1 ? part : part * scale_);
  }
}

void GradientBuckets::piece_done(size_t bucket) {
  if (--buckets_[bucket].pending == 0) {
    MutexLock lock(mutex_);
    issue_ready_buckets();
  }
}

void GradientBuckets::issue_ready_buckets() {
  if (!options_.overlap) return;
  size_t before = issued_;
  // The last bucket fills with the backward pass's last gradient, when finish() is next:
  // finish() sums (or queues) it on its own thread rather than wake the other for it.
  while (issued_ + 1 < buckets_.size() && buckets_[issued_].pending == 0) {
    if (queue_ != nullptr) {
      queue_->queue_sum(bucket(issued_));
      ++reduced_;
    }
    ++issued_;
  }
  if (issued_ != before && queue_ == nullptr) work_.notify_one();
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
  for (size_t b = first_here; b < buckets_.size(); ++b) {
    if (queue_ != nullptr) {
      queue_->queue_sum(bucket(b));
    } else {
      sum(b);
    }
  }
  if (queue_ != nullptr) queue_->wait_queued();
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
    const int64_t offset = slot.pieces.front().begin;
    Tensor sum =
        flat_.slice(0, offset, offset + slot.shape.num_elements()).reshape(slot.shape.to_vector());
    sums.emplace_back(sum.dtype() == slot.dtype ? sum : sum.cast(slot.dtype));
  }
  const int64_t end = flat_.numel();
  Tensor tail = to_device(flat_.slice(0, end - static_cast<int64_t>(extras_), end), Device::cpu(0))
                    .cast(DType::kFloat64);
  extras = tail.to_vector<double>();
  return sums;
}

void GradientBuckets::loop() {
  MutexLock lock(mutex_);
  while (true) {
    work_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) { return stopping_ || reduced_ < issued_; });
    if (reduced_ == issued_) return;  // stopping, nothing left
    const size_t bucket = reduced_;
    lock.unlock();
    std::exception_ptr failure;
    try {
      sum(bucket);
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
