// Copies of variables taken after the fact: a checkpoint hands the copy of the variables
// to a background thread and training goes on at once. Until the copy is done, a thread
// about to write a variable (an optimizer's update, Variable::assign) calls
// finish_deferred_copies() and takes over whatever is not copied yet, so the copy always
// holds the values of the moment it was deferred. An update that reads what it writes
// claims those copies instead (claim_deferred_copies) and makes them in its own pass.
//
// Internal: checkpoints and optimizers use it. Users see only finish_deferred_copies()
// (cadre/nn/variable.h), for code that writes a variable's buffer itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cadre/base/mutex.h"
#include "cadre/nn/variable.h"
#include "cadre/tensor/tensor.h"
#include "core/kernels/copy_out.h"

namespace cadre::nn {

class ClaimedCopies;

// Replaces tensors by host copies of their values. The tensors are slots in a structure
// nobody else touches until the copy is done: they name the sources when the copy is
// deferred, and each becomes its contiguous host copy.
class DeferredCopy {
 public:
  // `memory_for(i)`: host memory to copy tensor i into when it has the tensor's shape and
  // dtype (an earlier copy nobody uses any more: no allocation, no page faults), else an
  // undefined tensor; called by whichever thread copies tensor i. Without it, or when it
  // does not fit, the copy goes to new memory.
  explicit DeferredCopy(std::vector<Tensor*> tensors,
                        std::function<Tensor(size_t)> memory_for = nullptr);
  DeferredCopy(const DeferredCopy&) = delete;
  DeferredCopy& operator=(const DeferredCopy&) = delete;

  // Copies the tensors no other thread has started, then waits for those others are at.
  // Any thread may call it, any number of times; the first error of a copy is kept for
  // error(), never thrown here (a writer of variables must not fail for a checkpoint).
  void run() { run_except(0); }
  std::exception_ptr error() const;

 private:
  friend class ClaimedCopies;
  friend ClaimedCopies claim_deferred_copies(std::span<const Tensor> targets);

  // run(), but waits only until all tensors but the `claimed` ones the caller took are done.
  void run_except(size_t claimed);
  // Whether this thread is the one to copy tensor i (no other has taken it).
  bool take(size_t i) { return !taken_[i].exchange(true, std::memory_order_acq_rel); }
  // Host memory for tensor i's copy (memory_for's when it fits).
  Tensor destination(size_t i) const;
  void copy(size_t i);
  // Tensor i is copied into `host`, or failed; the last one unpublishes the copy.
  void finished(size_t i, std::optional<Tensor> host, std::exception_ptr failed);

  std::vector<Tensor*> tensors_;
  std::function<Tensor(size_t)> memory_for_;
  // The memory of each contiguous host tensor when deferred (null for others), which is
  // how a claim finds the tensors it writes.
  struct Source {
    const void* data = nullptr;
    size_t bytes = 0;
  };
  std::vector<Source> sources_;
  std::unique_ptr<std::atomic<bool>[]> taken_;
  mutable Mutex mutex_;
  CondVar finished_;
  size_t done_ CADRE_GUARDED_BY(mutex_) = 0;
  std::exception_ptr error_ CADRE_GUARDED_BY(mutex_);
};

// A copy that a writer makes of what it is about to overwrite (core/kernels/copy_out.h).
using kernels::CopyOut;

// The copies a writer has taken over from deferred copies (claim_deferred_copies).
class ClaimedCopies {
 public:
  ClaimedCopies() = default;
  ClaimedCopies(ClaimedCopies&& other) noexcept;
  ClaimedCopies& operator=(ClaimedCopies&&) = delete;
  // Copies never reported done fail their deferred copy (its error()), so that a checkpoint
  // never holds values of unknown age.
  ~ClaimedCopies();

  std::span<const CopyOut> copies() const { return copies_; }
  // Every CopyOut is made: the deferred copies are complete for these tensors.
  void done();

 private:
  friend ClaimedCopies claim_deferred_copies(std::span<const Tensor> targets);
  struct Claim {
    std::shared_ptr<DeferredCopy> copy;
    size_t index;
    Tensor host;
  };
  // Reports every claim made (done()) or failed, and lets go of them.
  void release(bool made);

  std::vector<Claim> claims_;
  std::vector<CopyOut> copies_;
  std::chrono::steady_clock::time_point start_;
};

// Makes writes of variables finish `copy` first, until it is done.
void defer_copy(std::shared_ptr<DeferredCopy> copy);

// Whether a deferred copy is still in progress: one atomic load.
bool deferred_copies_pending();

// finish_deferred_copies(), which runs every deferred copy still in progress, is public
// (cadre/nn/variable.h): code that writes a variable's buffer in place calls it first.

// finish_deferred_copies() for a writer that copies out what it overwrites: the copies of
// those `targets` (contiguous host tensors it is about to write whole) that no thread has
// started are left to the caller, as CopyOuts; every other deferred copy is finished first.
// The caller makes each CopyOut before it writes that target, then calls done(). One atomic
// load when no copy is pending.
ClaimedCopies claim_deferred_copies(std::span<const Tensor> targets);

// The time threads of this process have spent in finish_deferred_copies() with a copy
// still in progress, and in claim_deferred_copies() up to done() with a claim (the whole of
// the claiming update: an upper bound on what its copies cost it): what deferring left for
// training to wait for.
double deferred_copy_wait_seconds();

}  // namespace cadre::nn
