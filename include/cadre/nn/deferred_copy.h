// Copies of variables taken after the fact: a checkpoint hands the copy of the variables
// to a background thread and training goes on at once. Until the copy is done, a thread
// about to write a variable (an optimizer's update, Variable::assign) calls
// finish_deferred_copies() and takes over whatever is not copied yet, so the copy always
// holds the values of the moment it was deferred.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "cadre/base/mutex.h"
#include "cadre/tensor/tensor.h"

namespace cadre::nn {

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
  void run();
  std::exception_ptr error() const;

 private:
  void copy(size_t i);

  std::vector<Tensor*> tensors_;
  std::function<Tensor(size_t)> memory_for_;
  std::atomic<size_t> next_{0};
  mutable Mutex mutex_;
  CondVar finished_;
  size_t done_ CADRE_GUARDED_BY(mutex_) = 0;
  std::exception_ptr error_ CADRE_GUARDED_BY(mutex_);
};

// Makes writes of variables finish `copy` first, until it is done.
void defer_copy(std::shared_ptr<DeferredCopy> copy);

// Runs every deferred copy still in progress (see DeferredCopy::run). One atomic load when
// there is none. Call before writing a variable's buffer in place.
void finish_deferred_copies();

// The time threads of this process have spent in finish_deferred_copies() with a copy
// still in progress: what deferring left for training to wait for.
double deferred_copy_wait_seconds();

}  // namespace cadre::nn
