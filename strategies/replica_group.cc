#include "strategies/replica_group.h"

#include "cadre/base/errors.h"
#include "cadre/runtime/profiler.h"
#include "core/base/strings.h"

namespace cadre {

ReplicaGroup::ReplicaGroup(int replicas)
    : inputs(replicas), outputs(replicas), weights(replicas, 1.0), replicas_(replicas) {}

void ReplicaGroup::arrive_and_wait(const std::function<void()>& combine) {
  MutexLock lock(mutex_);
  if (aborted_) throw AbortedError("another replica failed; this step is abandoned");
  long generation = generation_;
  if (++arrived_ == replicas_) {
    failure_ = nullptr;
    try {
      combine();
    } catch (...) {
      failure_ = std::current_exception();
    }
    arrived_ = 0;
    ++generation_;
    released_.notify_all();
  } else {
    released_.wait(mutex_,
                   [&]() CADRE_REQUIRES(mutex_) { return generation_ != generation || aborted_; });
    if (generation_ == generation)
      throw AbortedError("another replica failed; this step is abandoned");
  }
  if (failure_) std::rethrow_exception(failure_);
}

void ReplicaGroup::abort() {
  MutexLock lock(mutex_);
  aborted_ = true;
  released_.notify_all();
}

ReplicaThreads::ReplicaThreads(int replicas) : errors_(replicas) {
  for (int r = 0; r < replicas; ++r) threads_.emplace_back([this, r] { loop(r); });
}

ReplicaThreads::~ReplicaThreads() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::vector<std::exception_ptr> ReplicaThreads::run(const std::function<void(int)>& fn) {
  MutexLock lock(mutex_);
  for (auto& e : errors_) e = nullptr;
  job_ = &fn;
  pending_ = static_cast<int>(threads_.size());
  ++job_id_;
  work_.notify_all();
  done_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) { return pending_ == 0; });
  job_ = nullptr;
  return errors_;
}

void ReplicaThreads::loop(int replica) {
  profiler::set_thread_name(str_cat("replica ", replica));
  long seen = 0;
  while (true) {
    const std::function<void(int)>* job;
    {
      MutexLock lock(mutex_);
      work_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) { return stopping_ || job_id_ != seen; });
      if (stopping_) return;
      seen = job_id_;
      job = job_;
    }
    std::exception_ptr error;
    try {
      (*job)(replica);
    } catch (...) {
      error = std::current_exception();
    }
    MutexLock lock(mutex_);
    errors_[replica] = error;
    if (--pending_ == 0) done_.notify_all();
  }
}

}  // namespace cadre
