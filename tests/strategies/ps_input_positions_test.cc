// InputPositions (strategies/ps/input_positions.h): ps 0's count of each worker's batches and
// the positions they carry, as of now and as of a past global step.
#include <gtest/gtest.h>

#include "cadre/base/errors.h"
#include "strategies/ps/input_positions.h"

namespace cadre::ps {
namespace {

PushRequest push(int pipeline, const std::string& position = "") {
  PushRequest request;
  request.set_increment_global_step(true);
  request.set_input_pipeline(pipeline);
  if (!position.empty()) {
    request.set_has_input_position(true);
    request.set_input_position(position);
  }
  return request;
}

InputPositionsResponse as_of(const InputPositions& positions, int64_t step, int pipeline = 0) {
  InputPositionsRequest request;
  request.set_pipeline(pipeline);
  request.set_at_step(step);
  return positions.list(request);
}

TEST(InputPositionsTest, APositionIsBehindByTheBatchesPushedAfterItByTheStepAskedFor) {
  InputPositions positions;
  // Pipeline 1 pushes at global steps 1, 3, 5, 7 with a position before its first and third
  // batches; pipeline 2 at 2, 4, 6 with one before its first.
  positions.count(push(1, "one@0"), 1);
  positions.count(push(2, "two@0"), 2);
  positions.count(push(1), 3);
  positions.count(push(2), 4);
  positions.count(push(1, "one@2"), 5);
  positions.count(push(2), 6);
  positions.count(push(1), 7);

  InputPositionsResponse now = as_of(positions, 0);
  ASSERT_EQ(now.positions_size(), 2);
  EXPECT_EQ(now.positions(0).state(), "one@2");
  EXPECT_EQ(now.positions(0).behind(), 2);
  EXPECT_EQ(now.positions(0).pushes(), 4);
  EXPECT_EQ(now.positions(1).state(), "two@0");
  EXPECT_EQ(now.positions(1).behind(), 3);

  // As of step 4 pipeline 1 had pushed twice: its last position, after two batches, fits.
  // As of step 2 it had pushed once: the position before that one fits.
  InputPositionsResponse then = as_of(positions, 4, 1);
  ASSERT_EQ(then.positions_size(), 1);
  EXPECT_EQ(then.positions(0).state(), "one@2");
  EXPECT_EQ(then.positions(0).behind(), 0);
  EXPECT_EQ(as_of(positions, 2, 1).positions(0).state(), "one@0");
  EXPECT_EQ(as_of(positions, 2, 1).positions(0).behind(), 1);
  EXPECT_EQ(as_of(positions, 5, 1).positions(0).behind(), 1);
  // Pipeline 2 had pushed nothing by step 1: its first position, before its first batch.
  EXPECT_EQ(as_of(positions, 1, 2).positions(0).state(), "two@0");
  EXPECT_EQ(as_of(positions, 1, 2).positions(0).behind(), 0);

  positions.clear();  // a new chief
  EXPECT_EQ(as_of(positions, 0).positions_size(), 0);
}

TEST(InputPositionsTest, AWorkerIsAskedForItsPositionUntilItSendsOneAndAgainAfterAWhile) {
  InputPositions positions;
  EXPECT_TRUE(positions.count(push(3), 1));  // none yet
  EXPECT_FALSE(positions.count(push(3, "p@1"), 2));
  // Asked again with the push kSendEvery batches after the position's.
  int64_t more = 1, step = 2;
  while (!positions.count(push(3), ++step)) ++more;
  EXPECT_EQ(more, InputPositions::kSendEvery - 1);
}

TEST(InputPositionsTest, AnEndedPipelineIsListedWithOrWithoutAPosition) {
  InputPositions positions;
  positions.count(push(1, "one@0"), 1);
  positions.end(1, "ps:0");
  positions.end(2, "ps:0");  // ended before its first push
  InputPositionsResponse now = as_of(positions, 0);
  ASSERT_EQ(now.positions_size(), 2);
  EXPECT_TRUE(now.positions(0).ended());
  EXPECT_EQ(now.positions(0).state(), "one@0");
  EXPECT_TRUE(now.positions(1).ended());
  EXPECT_EQ(now.positions(1).state(), "");
  EXPECT_EQ(now.positions(1).pushes(), 0);
  EXPECT_THROW(positions.end(0, "ps:0"), InvalidArgumentError);
  EXPECT_THROW(positions.end(-3, "ps:0"), InvalidArgumentError);
}

TEST(InputPositionsTest, ABadPushIsRefusedNamingTheTask) {
  for (const PushRequest& bad :
       {push(-1), push(InputPositions::kMaxPipelines + 1), push(0, "position")}) {
    try {
      InputPositions::check(bad, "ps:0");
      ADD_FAILURE() << bad.DebugString();
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("ps:0"), std::string::npos) << e.what();
    }
  }
  PushRequest later_part = push(1, "position");
  later_part.set_step(7);
  EXPECT_THROW(InputPositions::check(later_part, "ps:0"), InvalidArgumentError);
  InputPositions::check(push(1, "position"), "ps:0");
}

}  // namespace
}  // namespace cadre::ps
