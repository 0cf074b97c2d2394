// A mutex, its scoped lock and a condition variable that clang's thread-safety analysis
// understands (-Wthread-safety; LayeringTest's sibling ThreadSafetyTest compiles every file
// that uses them with it). Members a mutex protects are declared CADRE_GUARDED_BY(mutex_),
// functions that expect it held CADRE_REQUIRES(mutex_); the compiler then rejects an access
// without the lock. Other compilers see plain std::mutex semantics.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define CADRE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define CADRE_THREAD_ANNOTATION(x)
#endif

#define CADRE_CAPABILITY(x) CADRE_THREAD_ANNOTATION(capability(x))
#define CADRE_SCOPED_CAPABILITY CADRE_THREAD_ANNOTATION(scoped_lockable)
#define CADRE_GUARDED_BY(x) CADRE_THREAD_ANNOTATION(guarded_by(x))
#define CADRE_PT_GUARDED_BY(x) CADRE_THREAD_ANNOTATION(pt_guarded_by(x))
#define CADRE_REQUIRES(...) CADRE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define CADRE_EXCLUDES(...) CADRE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define CADRE_ACQUIRE(...) CADRE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define CADRE_RELEASE(...) CADRE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define CADRE_ASSERT_HELD(x) CADRE_THREAD_ANNOTATION(assert_capability(x))
#define CADRE_NO_THREAD_SAFETY_ANALYSIS CADRE_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace cadre {

class CondVar;

// Not recursive. lock() by a thread that holds it deadlocks.
class CADRE_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() CADRE_ACQUIRE() { mutex_.lock(); }
  void unlock() CADRE_RELEASE() { mutex_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mutex_;
};

// Holds `mutex` for its scope. unlock() and lock() let a scope drop the mutex around work
// that must run without it (a slow initialiser, a callback that may re-enter).
class CADRE_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) CADRE_ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~MutexLock() CADRE_RELEASE() {
    if (held_) mutex_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() CADRE_RELEASE() {
    mutex_.unlock();
    held_ = false;
  }
  void lock() CADRE_ACQUIRE() {
    mutex_.lock();
    held_ = true;
  }

 private:
  Mutex& mutex_;
  bool held_ = true;
};

// Waits release `mutex` (which the caller holds) while blocked and hold it again when they
// return. A predicate reads guarded state: declare its lambda CADRE_REQUIRES(the mutex).
class CondVar {
 public:
  void wait(Mutex& mutex) CADRE_REQUIRES(mutex) {
    std::unique_lock<std::mutex> lock(mutex.mutex_, std::adopt_lock);
    condition_.wait(lock);
    lock.release();
  }
  template <typename Predicate>
  void wait(Mutex& mutex, Predicate done) CADRE_REQUIRES(mutex) CADRE_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mutex.mutex_, std::adopt_lock);
    condition_.wait(lock, done);
    lock.release();
  }
  // False when the time ran out with `done` still false.
  template <typename Rep, typename Period, typename Predicate>
  bool wait_for(Mutex& mutex, std::chrono::duration<Rep, Period> timeout, Predicate done)
      CADRE_REQUIRES(mutex) CADRE_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mutex.mutex_, std::adopt_lock);
    bool result = condition_.wait_for(lock, timeout, done);
    lock.release();
    return result;
  }
  template <typename Clock, typename Duration, typename Predicate>
  bool wait_until(Mutex& mutex, std::chrono::time_point<Clock, Duration> deadline, Predicate done)
      CADRE_REQUIRES(mutex) CADRE_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mutex.mutex_, std::adopt_lock);
    bool result = condition_.wait_until(lock, deadline, done);
    lock.release();
    return result;
  }
  // Without a predicate: false on timeout (wake-ups may be spurious).
  template <typename Rep, typename Period>
  bool wait_for(Mutex& mutex, std::chrono::duration<Rep, Period> timeout) CADRE_REQUIRES(mutex) {
    std::unique_lock<std::mutex> lock(mutex.mutex_, std::adopt_lock);
    bool result = condition_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return result;
  }

  // Without a predicate: false when the deadline passed (wake-ups may be spurious).
  template <typename Clock, typename Duration>
  bool wait_until(Mutex& mutex, std::chrono::time_point<Clock, Duration> deadline)
      CADRE_REQUIRES(mutex) {
    std::unique_lock<std::mutex> lock(mutex.mutex_, std::adopt_lock);
    bool result = condition_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return result;
  }

  void notify_one() { condition_.notify_one(); }
  void notify_all() { condition_.notify_all(); }

 private:
  std::condition_variable condition_;
};

}  // namespace cadre
