// The replica threads of a strategy and the in-process collective they share: a cyclic
// barrier whose last arrival combines what every replica deposited. Internal to the
// strategies module.
#pragma once

#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "cadre/autodiff/gradient.h"
#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"

namespace cadre {

class ReplicaGroup {
 public:
  explicit ReplicaGroup(int replicas);
  int size() const { return replicas_; }

  // Blocks until all replicas have arrived; the last to arrive runs `combine` first (with
  // the group's lock released for the others: they are all waiting). Throws AbortedError
  // once the group is aborted, and rethrows combine's exception on every replica.
  void arrive_and_wait(const std::function<void()>& combine);
  // Releases every waiting replica with AbortedError (a replica failed).
  void abort();

  // Scratch space for the collective in progress: replica r writes inputs[r] before
  // arriving; the combining replica writes outputs[r].
  std::vector<std::vector<Gradient>> inputs, outputs;
  std::vector<double> weights;
  double total_weight = 0;  // all_reduce's: every replica's weight, across the workers too

 private:
  int replicas_;
  Mutex mutex_;
  CondVar released_;
  int arrived_ CADRE_GUARDED_BY(mutex_) = 0;
  long generation_ CADRE_GUARDED_BY(mutex_) = 0;
  bool aborted_ CADRE_GUARDED_BY(mutex_) = false;
  std::exception_ptr failure_ CADRE_GUARDED_BY(mutex_);  // combine's, for this generation
};

// Runs one function per replica on threads that live as long as the pool, so that a step
// costs a wake-up rather than a thread creation (and each thread keeps its OpenMP team).
class ReplicaThreads {
 public:
  explicit ReplicaThreads(int replicas);
  ~ReplicaThreads();
  // Calls fn(r) on thread r for every replica and waits for all; returns each replica's
  // exception (null when it succeeded).
  std::vector<std::exception_ptr> run(const std::function<void(int)>& fn);

 private:
  void loop(int replica);
  Mutex mutex_;
  CondVar work_, done_;
  const std::function<void(int)>* job_ CADRE_GUARDED_BY(mutex_) = nullptr;
  long job_id_ CADRE_GUARDED_BY(mutex_) = 0;
  int pending_ CADRE_GUARDED_BY(mutex_) = 0;
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

}  // namespace cadre
