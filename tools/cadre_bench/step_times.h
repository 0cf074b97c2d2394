// The step times of a benchmark's training run, and what they say: the rate, its
// steadiness, and what a checkpoint save costs the steps around it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tools/cadre_bench/timing.h"

namespace cadre::bench {

// When each step began and ended, as a hook ahead of the checkpoint saver sees it: the
// time from a step's end to the next one's start is the other hooks' (a save's blocking
// included), the time from end to end also counts a background write's interference.
struct StepTimes {
  std::vector<int64_t> steps;
  std::vector<Clock::time_point> begins, ends;
};

// What the step times say, over the steps from global step `untimed_steps` on.
struct StepStats {
  double rate = 0;                        // examples per second
  double window_min = 0, window_max = 0;  // the slowest and fastest of 7 windows
  double step_ms_median = 0;              // end to end, steps that did not save
  size_t saves_timed = 0;
  double blocked_ms = 0;  // how much longer a saving step's hooks took than the median
  double extra_ms = 0;    // the same, end to end (the background write's interference)
  // What a save costs training in all: the time the steps from the saving one through the
  // next 20 took beyond as many median steps (the write's interference lasts a few steps),
  // the median over saves. Within one run, so the machine's mood between runs does not
  // enter it.
  double save_cost_ms = 0;
};

// The statistics of a run that saved after every `save_every`-th step (0: never) with
// `batch_size` examples per step. The run must have timed steps past `untimed_steps`.
StepStats step_stats(const StepTimes& times, int64_t untimed_steps, int64_t save_every,
                     int64_t batch_size);

}  // namespace cadre::bench
