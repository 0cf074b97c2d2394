// ThreadTuner fed with step times that depend on the thread count it chose, as a machine
// would give them: quiet (more threads a little faster), with a neighbour holding a core
// (more threads far slower), and a neighbour that comes and goes.
#include "core/runtime/thread_tuner.h"

#include <gtest/gtest.h>

#include <functional>

#include "cadre/runtime/threading.h"

namespace cadre {
namespace {

struct Tally {
  int64_t steps_at_max = 0;
  int64_t steps = 0;
  double seconds = 0;
};

// `step_seconds(threads, step)` is how long a step takes with that many threads.
Tally simulate(int max_threads, int64_t steps,
               const std::function<double(int threads, int64_t step)>& step_seconds) {
  int before = intra_op_threads_budget();
  set_intra_op_threads(max_threads);
  Tally run;
  {
    ThreadTuner tuner(max_threads);
    for (int64_t s = 0; s < steps; ++s) {
      int threads = intra_op_threads_budget();  // what the step runs with, trials included
      EXPECT_GE(threads, 1);
      EXPECT_LE(threads, max_threads);
      double seconds = step_seconds(threads, s);
      run.steps_at_max += threads == max_threads;
      run.seconds += seconds;
      tuner.step_finished(seconds);
    }
  }
  EXPECT_EQ(intra_op_threads_budget(), max_threads) << "the tuner gives the budget back";
  set_intra_op_threads(before);
  run.steps = steps;
  return run;
}

TEST(ThreadTunerTest, AQuietMachineKeepsEveryThreadAndPaysLittleForTrials) {
  // Two threads 8% faster than one, as the MLP at batch 256 here.
  Tally run =
      simulate(2, 20000, [](int threads, int64_t) { return threads == 2 ? 1.0e-3 : 1.08e-3; });
  EXPECT_GT(run.steps_at_max, run.steps * 99 / 100);
  EXPECT_LT(run.seconds, 20000 * 1.0e-3 * 1.002);
}

TEST(ThreadTunerTest, ANeighbourOnACoreMakesItRunWithFewerThreads) {
  // Two threads wait for each other while one of them is not running: 20x slower.
  Tally run = simulate(2, 5000, [](int threads, int64_t) { return threads == 2 ? 30e-3 : 1.5e-3; });
  EXPECT_LT(run.steps_at_max, 100);
  // Within 15% of running one thread throughout.
  EXPECT_LT(run.seconds, 5000 * 1.5e-3 * 1.15);
}

TEST(ThreadTunerTest, ItFollowsANeighbourThatComesAndGoes) {
  // Quiet, then a neighbour for steps 3000..9000, then quiet again; 4 cores.
  auto step = [](int threads, int64_t s) {
    bool neighbour = s >= 3000 && s < 9000;
    if (!neighbour) return 4e-3 / threads;         // scales with threads
    return threads == 4 ? 40e-3 : 4e-3 / threads;  // a stalled 4th thread
  };
  Tally run = simulate(4, 30000, step);
  double best = 3000 * 1e-3 + 6000 * 4e-3 / 3 + 21000 * 1e-3;
  EXPECT_LT(run.seconds, best * 1.15);
}

TEST(ThreadTunerTest, OneThreadIsLeftAlone) {
  Tally run = simulate(1, 1000, [](int, int64_t) { return 1e-3; });
  EXPECT_EQ(run.steps_at_max, 1000);
}

}  // namespace
}  // namespace cadre
