// GivenBatches: what an elastic group's chief counts, so that a worker that comes back skips
// the batches the group took from it after the position it restores.
#include "estimator/given_batches.h"

#include <gtest/gtest.h>

namespace cadre::estimator_internal {
namespace {

TEST(GivenBatchesTest, AWorkerThatLeftIsBehindByWhatItGaveSinceItsPositionWasGathered) {
  GivenBatches given(/*resume_step=*/100);
  given.given({0, 1, 2}, 4);  // steps 101-104
  given.gathered(1);
  given.gathered(2);
  given.saved(104);
  given.given({0, 1, 2}, 2);  // 105-106; then worker 2 dies
  given.given({0, 1}, 3);     // 107-109 without it
  EXPECT_EQ(given.behind(2), 2);
  EXPECT_EQ(given.behind(1), 5);
  EXPECT_EQ(given.behind(3), 0);  // never a member
  given.saved(108);
  // Restored from the checkpoint of 104 or 108 (whose position is behind by 2, skipped as
  // it is restored), worker 2 skips 2 batches, then 0; from the resumed one, all 6.
  EXPECT_EQ(given.to_skip(2, 104), 2);
  EXPECT_EQ(given.to_skip(2, 108), 0);
  EXPECT_EQ(given.to_skip(2, 100), 6);
  EXPECT_EQ(given.to_skip(2, 50), 0);  // not this run's: unknown
  given.gathered(2);
  EXPECT_EQ(given.behind(2), 0);
}

TEST(GivenBatchesTest, OnlyRecentCheckpointsAreKept) {
  GivenBatches given(0);
  for (int64_t step = 1; step <= 100; ++step) {
    given.given({1}, 1);
    given.saved(step);
  }
  EXPECT_EQ(given.to_skip(1, 0), 0);  // long gone
  given.given({1}, 5);
  EXPECT_EQ(given.to_skip(1, 100), 5);
  EXPECT_EQ(given.to_skip(1, 90), 15);
}

}  // namespace
}  // namespace cadre::estimator_internal
