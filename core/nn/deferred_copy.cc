#include "core/nn/deferred_copy.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/kernels/transfer.h"

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

// Counts the time since `start` as time writers of variables spent on deferred copies.
void count_wait(std::chrono::steady_clock::time_point start) {
  pending().waited_nanoseconds.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count(),
      std::memory_order_relaxed);
}

}  // namespace

DeferredCopy::DeferredCopy(std::vector<Tensor*> tensors, std::function<Tensor(size_t)> memory_for)
    : tensors_(std::move(tensors)),
      memory_for_(std::move(memory_for)),
      taken_(new std::atomic<bool>[tensors_.size()]()) {
  sources_.reserve(tensors_.size());
  for (const Tensor* t : tensors_) {
    bool claimable = t->defined() && t->device().is_cpu() && t->is_contiguous();
    sources_.push_back(claimable ? Source{t->raw_data(), t->nbytes()} : Source{});
  }
}

Tensor DeferredCopy::destination(size_t i) const {
  const Tensor& tensor = *tensors_[i];
  Tensor reuse = memory_for_ ? memory_for_(i) : Tensor();
  if (reuse.defined() && reuse.device().is_cpu() && reuse.is_contiguous() &&
      reuse.shape() == tensor.shape() && reuse.dtype() == tensor.dtype()) {
    return reuse;
  }
  if (tensor.device().is_cpu()) return Tensor::empty(tensor.shape(), tensor.dtype(), Device::cpu());
  return empty_pinned(tensor.shape(), tensor.dtype());
}

void DeferredCopy::copy(size_t i) {
  std::optional<Tensor> host;
  std::exception_ptr failed;
  try {
    const Tensor& tensor = *tensors_[i];
    host = destination(i);
    if (!tensor.device().is_cpu()) {
      to_host_async(tensor.contiguous(), *host).wait();
    } else if (tensor.is_contiguous()) {
      std::memcpy(host->raw_data(), tensor.raw_data(), tensor.nbytes());
    } else {
      host->assign(tensor);
    }
  } catch (...) {
    host.reset();
    failed = std::current_exception();
  }
  finished(i, std::move(host), failed);
}

void DeferredCopy::finished(size_t i, std::optional<Tensor> host, std::exception_ptr failed) {
  if (host) *tensors_[i] = std::move(*host);  // slot i is this thread's until done_ counts it
  bool last;
  {
    MutexLock lock(mutex_);
    if (failed && !error_) error_ = failed;
    last = ++done_ == tensors_.size();
    // Not only the last: a claimant waits for all but its own claims.
    finished_.notify_all();
  }
  if (last) unpublish(this);
}

void DeferredCopy::run_except(size_t claimed) {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (take(i)) copy(i);
  }
  bool all;
  {
    MutexLock lock(mutex_);
    finished_.wait(mutex_,
                   [&]() CADRE_REQUIRES(mutex_) { return done_ + claimed >= tensors_.size(); });
    all = done_ == tensors_.size();
  }
  // The last finished() unpublishes too, after it lets go of the mutex: unpublished here,
  // the copy is no longer pending when this returns (and a copy of nothing has no last).
  if (all) unpublish(this);
}

std::exception_ptr DeferredCopy::error() const {
  MutexLock lock(mutex_);
  return error_;
}

ClaimedCopies::ClaimedCopies(ClaimedCopies&& other) noexcept
    : claims_(std::move(other.claims_)), copies_(std::move(other.copies_)), start_(other.start_) {
  other.claims_.clear();
  other.copies_.clear();
}

ClaimedCopies::~ClaimedCopies() { release(/*made=*/false); }

void ClaimedCopies::done() { release(/*made=*/true); }

void ClaimedCopies::release(bool made) {
  if (claims_.empty()) return;
  std::exception_ptr failed;
  if (!made) {
    failed = std::make_exception_ptr(
        InternalError("the update that took over part of a checkpoint's copy did not make it"));
  }
  for (Claim& claim : claims_) {
    std::optional<Tensor> host;
    if (made) host = std::move(claim.host);
    claim.copy->finished(claim.index, std::move(host), failed);
  }
  claims_.clear();
  copies_.clear();
  count_wait(start_);
}

void defer_copy(std::shared_ptr<DeferredCopy> copy) {
  Pending& p = pending();
  MutexLock lock(p.mutex);
  p.copies.push_back(std::move(copy));
  p.count.fetch_add(1, std::memory_order_release);
}

bool deferred_copies_pending() { return pending().count.load(std::memory_order_acquire) != 0; }

// A writer that claims nothing: every copy is made before it writes.
void finish_deferred_copies() { claim_deferred_copies({}); }

ClaimedCopies claim_deferred_copies(std::span<const Tensor> targets) {
  ClaimedCopies claimed;
  if (!deferred_copies_pending()) return claimed;
  Pending& p = pending();
  auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<DeferredCopy>> copies;
  {
    MutexLock lock(p.mutex);
    copies = p.copies;
  }
  for (const std::shared_ptr<DeferredCopy>& copy : copies) {
    size_t mine = 0;
    for (const Tensor& target : targets) {
      if (!target.device().is_cpu() || !target.is_contiguous()) continue;
      const void* data = target.raw_data();
      // One CopyOut per source (a second checkpoint's copy of it is made first, below).
      auto same = [&](const CopyOut& out) { return out.from == data; };
      if (std::any_of(claimed.copies_.begin(), claimed.copies_.end(), same)) continue;
      for (size_t i = 0; i < copy->sources_.size(); ++i) {
        // Another slot of the same memory, or one another thread took, is copied below.
        const DeferredCopy::Source& source = copy->sources_[i];
        if (source.data != data || source.bytes != target.nbytes()) continue;
        if (!copy->take(i)) break;
        try {
          Tensor host = copy->destination(i);
          claimed.copies_.push_back({data, host.raw_data(), target.nbytes()});
          claimed.claims_.push_back({copy, i, std::move(host)});
          ++mine;
        } catch (...) {
          copy->finished(i, std::nullopt, std::current_exception());
        }
        break;
      }
    }
    copy->run_except(mine);
  }
  if (claimed.claims_.empty()) count_wait(start);
  claimed.start_ = start;
  return claimed;
}

double deferred_copy_wait_seconds() {
  return static_cast<double>(pending().waited_nanoseconds.load(std::memory_order_relaxed)) * 1e-9;
}

}  // namespace cadre::nn
