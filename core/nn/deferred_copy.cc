#include "cadre/nn/deferred_copy.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/tensor/transfer.h"

namespace cadre::nn {
namespace {

// The copies not finished yet. The count lets every write of a variable check for them
// with one load.
struct Pending {
  std::atomic<int> count{0};
  std::atomic<int64_t> waited_nanoseconds{0};
  Mutex mutex;
  std::vector<std::shared_ptr<DeferredCopy>> copies CADRE_GUARDED_BY(mutex);
};

Pending& pending() {
  static Pending* p = new Pending;  // never destroyed: writers may run during exit
  return *p;
}

void unpublish(const DeferredCopy* copy) {
  Pending& p = pending();
  MutexLock lock(p.mutex);
  auto it = std::find_if(p.copies.begin(), p.copies.end(),
                         [&](const std::shared_ptr<DeferredCopy>& c) { return c.get() == copy; });
  if (it == p.copies.end()) return;
  p.copies.erase(it);
  p.count.fetch_sub(1, std::memory_order_release);
}

}  // namespace

DeferredCopy::DeferredCopy(std::vector<Tensor*> tensors, std::function<Tensor(size_t)> memory_for)
    : tensors_(std::move(tensors)), memory_for_(std::move(memory_for)) {}

void DeferredCopy::copy(size_t i) {
  Tensor& tensor = *tensors_[i];
  Tensor reuse = memory_for_ ? memory_for_(i) : Tensor();
  Tensor host;
  if (reuse.defined() && reuse.device().is_cpu() && reuse.is_contiguous() &&
      reuse.shape() == tensor.shape() && reuse.dtype() == tensor.dtype()) {
    host = reuse;
  } else if (tensor.device().is_cpu()) {
    host = Tensor::empty(tensor.shape(), tensor.dtype(), Device::cpu());
  } else {
    host = empty_pinned(tensor.shape(), tensor.dtype());
  }
  if (!tensor.device().is_cpu()) {
    to_host_async(tensor.contiguous(), host).wait();
  } else if (tensor.is_contiguous()) {
    std::memcpy(host.raw_data(), tensor.raw_data(), tensor.nbytes());
  } else {
    host.assign(tensor);
  }
  tensor = std::move(host);
}

void DeferredCopy::run() {
  for (size_t i = next_.fetch_add(1, std::memory_order_relaxed); i < tensors_.size();
       i = next_.fetch_add(1, std::memory_order_relaxed)) {
    std::exception_ptr failed;
    try {
      copy(i);
    } catch (...) {
      failed = std::current_exception();
    }
    MutexLock lock(mutex_);
    if (failed && !error_) error_ = failed;
    if (++done_ == tensors_.size()) finished_.notify_all();
  }
  {
    MutexLock lock(mutex_);
    finished_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) { return done_ == tensors_.size(); });
  }
  unpublish(this);
}

std::exception_ptr DeferredCopy::error() const {
  MutexLock lock(mutex_);
  return error_;
}

void defer_copy(std::shared_ptr<DeferredCopy> copy) {
  Pending& p = pending();
  MutexLock lock(p.mutex);
  p.copies.push_back(std::move(copy));
  p.count.fetch_add(1, std::memory_order_release);
}

void finish_deferred_copies() {
  Pending& p = pending();
  if (p.count.load(std::memory_order_acquire) == 0) return;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<DeferredCopy>> copies;
  {
    MutexLock lock(p.mutex);
    copies = p.copies;
  }
  for (const std::shared_ptr<DeferredCopy>& copy : copies) copy->run();
  p.waited_nanoseconds.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count(),
      std::memory_order_relaxed);
}

double deferred_copy_wait_seconds() {
  return static_cast<double>(pending().waited_nanoseconds.load(std::memory_order_relaxed)) * 1e-9;
}

}  // namespace cadre::nn
