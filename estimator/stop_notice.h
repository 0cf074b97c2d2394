// The notices of a planned stop (cadre/estimator/planned_stop.h) this process has had. A
// signal handler records the first notice signal and gives a second its default action at
// once; the notice file is looked for at most every half second. Signals are the process's,
// so the handlers are too: the first live StopNotice installs them, the last restores the
// actions they replaced. A notice, once had, stays: a planned stop is not taken back.
// Internal to the estimator module.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "cadre/estimator/planned_stop.h"

namespace cadre::estimator_internal {

class StopNotice {
 public:
  explicit StopNotice(const PlannedStopOptions& options);
  ~StopNotice();
  StopNotice(const StopNotice&) = delete;
  StopNotice& operator=(const StopNotice&) = delete;

  // Whether a planned stop was asked for. Not thread-safe (one caller: the loop that stops).
  bool requested();
  // What asked for it ("SIGTERM", "the notice file /run/preempted"); empty before.
  std::string reason() const;
  // Seconds since the notice came (the signal, or the file seen); 0 before.
  double seconds_since_notice() const;

 private:
  PlannedStopOptions options_;
  bool installed_ = false;
  bool file_seen_ = false;
  int64_t file_seen_ns_ = 0;
  std::chrono::steady_clock::time_point next_look_;
};

// Throws PlannedStopError(message, step). Should it leave main uncaught (a program that
// does not catch it), the process still ends as a planned stop should: the message on
// stderr and exit status kRestartExitCode, not std::terminate's abort.
[[noreturn]] void throw_planned_stop(const std::string& message, int64_t step);

}  // namespace cadre::estimator_internal
