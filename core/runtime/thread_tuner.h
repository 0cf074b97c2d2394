// Chooses the intra-op thread count from the step times a training loop reports.
//
// A parallel section runs at the pace of its slowest thread, so when another process holds
// one of the cores the section waits for a thread that is not running, and spinning
// waiters take the core it needs: 2 threads can then run 1.4x slower than 1 (measured in
// docs/BENCHMARKS.md#threads-under-load). The tuner tries one thread fewer (or more, up to
// the budget it started with) for a few steps now and then, keeps the count whose mean step
// is faster by 5% (fewer threads) or 15% (more threads), and tries again sooner when steps
// slow down (a neighbour arrived) and more rarely while nothing changes, so that a quiet
// machine pays next to nothing.
//
// The thread count never changes the result of kernels that split work by chunks
// (parallel_for) or of oneDNN's matrix products; oneDNN's convolution gradients (the layers
// that core/backend/cpu/conv_gemm.h and conv_one_channel.h leave to it) may differ in the
// last bits, which is why the Estimator lets a run turn this off
// (RunConfig::intra_op_autotune).
#pragma once

#include <cstdint>
#include <vector>

namespace cadre {

class ThreadTuner {
 public:
  // Tunes between 1 and `max_threads` (the budget when it starts), setting the process-wide
  // budget (set_intra_op_threads) on every change and back to max_threads when destroyed.
  explicit ThreadTuner(int max_threads);
  ~ThreadTuner();
  ThreadTuner(const ThreadTuner&) = delete;
  ThreadTuner& operator=(const ThreadTuner&) = delete;

  // One step took `seconds` (from the end of the previous one: its input included).
  void step_finished(double seconds);
  int threads() const { return current_; }

 private:
  void start_trial();
  void end_trial();
  void lose_trial(double base);  // back to current_; the trial's count waits longer
  void finish_trial();           // measuring starts again at current_
  void set(int threads);

  const int max_;
  int current_;
  std::vector<double> recent_;  // the last steps at current_
  double reference_ = 0;        // mean step at current_ when last compared
  int trial_threads_ = 0;       // 0: no trial
  std::vector<double> trial_;
  int64_t steps_ = 0;
  int64_t next_trial_ = 0;
  int64_t interval_;
  int direction_ = -1;    // the next trial's direction: -1 fewer threads, +1 more
  int skip_;              // steps not measured (warm-up, or the team resizing after a change)
  bool went_up_ = false;  // the last change added threads
  int64_t more_backoff_;  // steps before more threads are tried after they failed
  int64_t no_more_until_ = 0;
};

}  // namespace cadre
