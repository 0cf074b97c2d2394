#include "core/runtime/thread_tuner.h"

#include <glog/logging.h>

#include <algorithm>

#include "cadre/runtime/threading.h"

namespace cadre {
namespace {

// Steps at the current count compared (a long window: one stall of a quiet machine must
// not look like a neighbour) and steps of a trial (short: a trial costs its steps).
constexpr size_t kBase = 48;
constexpr size_t kWindow = 12;
constexpr size_t kSettle = 2;        // steps dropped after a change (the team resizes)
constexpr int64_t kFirstTrial = 20;  // steps before the first trial
constexpr int kWarmUp = 5;           // first steps, slower (allocation, caches)
constexpr int64_t kMinInterval = 50;
constexpr int64_t kMaxInterval = 3200;
// A trial wins with a mean step this much shorter: fewer threads by 5%; more threads by
// 15%, because a few steps with more threads can look good on a busy machine and then
// collapse (the waiting threads spin while the one they wait for is not running).
constexpr double kFewerWins = 0.95;
constexpr double kMoreWins = 0.85;
constexpr double kSlower = 1.25;  // steps this much slower than the reference: try soon
constexpr size_t kEarly = 3;      // trial steps after which a clear loser stops
constexpr double kLosing = 1.2;
constexpr double kHopeless = 3;  // one trial step this much slower ends the trial

// Steps are compared by their mean, not their median: with a neighbour on a core, most
// steps of two threads are fast and a few stall for a scheduler time slice, and the
// stalls are what the throughput pays.
double mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

}  // namespace

ThreadTuner::ThreadTuner(int max_threads)
    : max_(std::max(1, max_threads)),
      current_(max_),
      next_trial_(kFirstTrial),
      interval_(kMinInterval),
      skip_(kWarmUp),
      more_backoff_(kMinInterval) {}

ThreadTuner::~ThreadTuner() {
  if (current_ != max_ || trial_threads_ != 0) set_intra_op_threads(max_);
}

void ThreadTuner::set(int threads) { set_intra_op_threads(threads); }

void ThreadTuner::step_finished(double seconds) {
  if (max_ == 1) return;
  ++steps_;
  if (trial_threads_ != 0) {
    trial_.push_back(seconds);
    // A clear loser ends early: a trial costs its steps at the worse count, and on a busy
    // machine a step with more threads than free cores can take 100 times longer.
    double base = mean(recent_);
    bool losing = seconds > kHopeless * base ||
                  (trial_.size() == kSettle + kEarly &&
                   mean({trial_.begin() + kSettle, trial_.end()}) > kLosing * base);
    if (losing) {
      lose_trial(base);
    } else if (trial_.size() == kSettle + kWindow) {
      end_trial();
    }
    return;
  }
  if (skip_ > 0) {
    --skip_;
    return;
  }
  recent_.push_back(seconds);
  if (recent_.size() > kBase) recent_.erase(recent_.begin());
  // The first comparison comes early, on a short window: a run that starts beside a
  // neighbour should not spend its first hundred steps finding out.
  if (recent_.size() < (reference_ > 0 ? kBase : kWindow)) return;
  if (reference_ > 0 && steps_ < next_trial_ && mean(recent_) > kSlower * reference_) {
    next_trial_ = steps_;  // the steps slowed down: the machine may have changed
    interval_ = kMinInterval;
  }
  if (steps_ >= next_trial_) start_trial();
}

void ThreadTuner::start_trial() {
  if (current_ == max_) direction_ = -1;
  if (current_ == 1) direction_ = +1;
  if (direction_ > 0 && steps_ < no_more_until_) direction_ = current_ > 1 ? -1 : 0;
  if (direction_ == 0) {  // nothing to try yet
    direction_ = +1;
    next_trial_ = no_more_until_;
    return;
  }
  trial_threads_ = current_ + direction_;
  trial_.clear();
  set(trial_threads_);
}

void ThreadTuner::end_trial() {
  std::vector<double> measured(trial_.begin() + kSettle, trial_.end());
  double trial = mean(measured);
  double base = mean(recent_);
  bool more = trial_threads_ > current_;
  if (trial >= (more ? kMoreWins : kFewerWins) * base) {
    lose_trial(base);
    return;
  }
  if (!more && went_up_) {
    // Fewer threads win soon after more won: the gain did not last. Try more again only
    // after a longer wait each time.
    more_backoff_ = std::min(4 * more_backoff_, 64 * kMaxInterval);
    no_more_until_ = steps_ + more_backoff_;
  }
  went_up_ = more;
  VLOG(1) << "intra-op threads: " << current_ << " -> " << trial_threads_ << " (mean step "
          << base * 1e3 << " ms -> " << trial * 1e3 << " ms)";
  current_ = trial_threads_;
  reference_ = trial;
  interval_ = kMinInterval;  // keep going the same way while it pays
  finish_trial();
}

void ThreadTuner::finish_trial() {
  recent_.clear();
  skip_ = kSettle;
  trial_threads_ = 0;
  next_trial_ = steps_ + interval_;
}

void ThreadTuner::lose_trial(double base) {
  bool more = trial_threads_ > current_;
  set(current_);
  reference_ = base;
  direction_ = -direction_;
  if (more) {  // more threads lost: each time, wait 4 times longer before trying again
    more_backoff_ = std::min(4 * more_backoff_, 64 * kMaxInterval);
    no_more_until_ = steps_ + more_backoff_;
  }
  // Both directions tried without a gain: wait longer before the next trial.
  if (direction_ == -1 || current_ == 1 || current_ == max_) {
    interval_ = std::min(2 * interval_, kMaxInterval);
  }
  finish_trial();
}

}  // namespace cadre
