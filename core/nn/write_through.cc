// The write-through form of DeferredCopy (core/nn/deferred_copy.h): a checkpoint part is
// written straight from the variables, and only what an update overwrites first is copied.
#include <algorithm>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/nn/deferred_copy.h"

namespace cadre::nn {

PiecePool::PiecePool(size_t pieces)
    : memory_(Tensor::empty(Shape{static_cast<int64_t>(pieces * DeferredCopy::kPieceBytes)},
                            DType::kUInt8, Device::cpu())) {
  char* data = static_cast<char*>(memory_.raw_data());
  for (size_t i = 0; i < pieces; ++i) free_.push_back(data + i * DeferredCopy::kPieceBytes);
}

char* PiecePool::try_get() {
  MutexLock lock(mutex_);
  if (free_.empty()) return nullptr;
  char* buffer = free_.back();
  free_.pop_back();
  return buffer;
}

void PiecePool::put(char* buffer) {
  MutexLock lock(mutex_);
  free_.push_back(buffer);
}

DeferredCopy::DeferredCopy(std::vector<Tensor*> tensors, std::shared_ptr<PiecePool> pool,
                           size_t block_bytes)
    : tensors_(std::move(tensors)),
      destinations_(new Destination[tensors_.size()]),
      pool_(std::move(pool)) {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = *tensors_[i];
    if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous() || t.shape().rank() == 0) {
      throw InternalError("a write-through copy of a tensor that is not a host tensor of rows");
    }
    sources_.push_back({static_cast<const char*>(t.raw_data()), t.nbytes()});
    const size_t row_bytes = t.dim(0) > 0 ? t.nbytes() / static_cast<size_t>(t.dim(0)) : 0;
    // The rows of a checkpoint writer's block (FileBuilder), so that a piece is a block.
    const size_t piece =
        row_bytes == 0 ? t.nbytes() : std::max<size_t>(1, block_bytes / row_bytes) * row_bytes;
    for (size_t begin = 0; begin < t.nbytes(); begin += piece) {
      pieces_.push_back({i, begin, std::min(t.nbytes(), begin + piece)});
    }
  }
  taken_.reset(new std::atomic<bool>[pieces_.size()]());
  buffers_.reset(new char*[pieces_.size()]());
  MutexLock lock(mutex_);
  piece_done_.assign(pieces_.size(), 0);
}

size_t DeferredCopy::piece_at(size_t tensor, int64_t row) const {
  const Tensor& t = *tensors_.at(tensor);
  const size_t begin =
      t.dim(0) > 0 ? t.nbytes() / static_cast<size_t>(t.dim(0)) * static_cast<size_t>(row) : 0;
  auto it =
      std::lower_bound(pieces_.begin(), pieces_.end(), Piece{tensor, begin, begin},
                       [](const Piece& a, const Piece& b) {
                         return a.tensor != b.tensor ? a.tensor < b.tensor : a.begin < b.begin;
                       });
  if (it == pieces_.end() || it->tensor != tensor || it->begin != begin) {
    throw InternalError(str_cat("no piece of tensor ", tensor, " starts at row ", row));
  }
  return static_cast<size_t>(it - pieces_.begin());
}

bool DeferredCopy::piece_done(size_t p) const {
  MutexLock lock(mutex_);
  return piece_done_[p] != 0;
}

void DeferredCopy::wait_done(size_t p) {
  MutexLock lock(mutex_);
  finished_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) { return piece_done_[p] != 0; });
}

void DeferredCopy::write_piece(size_t p, const std::function<void(const void*)>& write) {
  const Piece& piece = pieces_[p];
  if (take(p)) {
    // The tensor's own memory: nothing writes this piece until it is done.
    try {
      write(sources_[piece.tensor].data + piece.begin);
    } catch (...) {
      finished(p, std::current_exception());
      throw;
    }
    finished(p, nullptr);
    return;
  }
  wait_done(p);
  char* buffer = buffers_[p];
  buffers_[p] = nullptr;
  std::exception_ptr failed;
  {
    MutexLock lock(mutex_);
    if (destinations_[piece.tensor].failed) failed = error_;
  }
  struct GiveBack {
    PiecePool& pool;
    char* buffer;
    ~GiveBack() {
      if (buffer != nullptr) pool.put(buffer);
    }
  } give_back{*pool_, buffer};
  if (failed) std::rethrow_exception(failed);
  if (buffer == nullptr) throw InternalError("a write-through piece taken without a buffer");
  write(buffer);
}

void DeferredCopy::give_up_unwritten(std::exception_ptr why) {
  for (size_t p = 0; p < pieces_.size(); ++p) {
    if (take(p)) {
      finished(p, why);
      continue;
    }
    wait_done(p);
    if (buffers_[p] != nullptr) {
      pool_->put(buffers_[p]);
      buffers_[p] = nullptr;
    }
  }
}

void DeferredCopy::run_through() {
  for (size_t p = 0; p < pieces_.size(); ++p) {
    const Piece& piece = pieces_[p];
    if (taken_[p].load(std::memory_order_acquire) || piece.end - piece.begin > kPieceBytes) {
      continue;
    }
    char* buffer = pool_->try_get();
    if (buffer == nullptr) break;
    if (!take(p)) {
      pool_->put(buffer);
      continue;
    }
    std::memcpy(buffer, sources_[piece.tensor].data + piece.begin, piece.end - piece.begin);
    buffers_[p] = buffer;
    finished(p, nullptr);
  }
  for (size_t p = 0; p < pieces_.size(); ++p) wait_done(p);
}

}  // namespace cadre::nn
