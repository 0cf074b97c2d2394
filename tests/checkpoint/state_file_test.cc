#include "cadre/checkpoint/state_file.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "cadre/base/errors.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

TEST(StateFileTest, RoundTripsThroughTheTextFormat) {
  CheckpointState state;
  state.model_checkpoint_path = "model.ckpt-20.h5";
  state.all_model_checkpoint_paths = {"model.ckpt-10.h5", "odd \"name\\.h5", "model.ckpt-20.h5"};
  state.all_model_checkpoint_timestamps = {1.5, 2.25, 1764000000.125};
  state.last_preserved_timestamp = 1.0;
  CheckpointState parsed = parse_state(serialize_state(state), "test");
  EXPECT_EQ(parsed.model_checkpoint_path, state.model_checkpoint_path);
  EXPECT_EQ(parsed.all_model_checkpoint_paths, state.all_model_checkpoint_paths);
  EXPECT_EQ(parsed.all_model_checkpoint_timestamps, state.all_model_checkpoint_timestamps);
  EXPECT_EQ(parsed.last_preserved_timestamp, 1.0);
}

TEST(StateFileTest, ReadsWhatTensorFlowWrites) {
  CheckpointState state = parse_state(
      "model_checkpoint_path: \"/tmp/run/model.ckpt-1000\"\n"
      "all_model_checkpoint_paths: \"/tmp/run/model.ckpt-1000\"\n"
      "unknown_future_field: 3\n",
      "test");
  EXPECT_EQ(state.model_checkpoint_path, "/tmp/run/model.ckpt-1000");
  EXPECT_EQ(resolve_checkpoint_path("/elsewhere", state.model_checkpoint_path),
            "/tmp/run/model.ckpt-1000");
  EXPECT_EQ(resolve_checkpoint_path("/run", "model.ckpt-5.h5"), "/run/model.ckpt-5.h5");
  EXPECT_TRUE(state.all_model_checkpoint_timestamps.empty());
}

TEST(StateFileTest, MalformedTextIsADataLossErrorNamingTheFileAndLine) {
  for (const char* text : {"model_checkpoint_path: unquoted\n", "garbage\n", "",
                           "model_checkpoint_path: \"a\"\nall_model_checkpoint_timestamps: x\n"}) {
    try {
      parse_state(text, "/run/checkpoint");
      FAIL() << "accepted: " << text;
    } catch (const DataLossError& error) {
      EXPECT_NE(std::string(error.what()).find("/run/checkpoint"), std::string::npos);
    }
  }
}

// Timestamps may come from other tools: one out of a double's range saturates (strtod's
// value) instead of making the file unreadable.
TEST(StateFileTest, ATimestampOutOfADoublesRangeSaturates) {
  CheckpointState state = parse_state(
      "model_checkpoint_path: \"a\"\nall_model_checkpoint_paths: \"a\"\n"
      "all_model_checkpoint_timestamps: 1e400\nlast_preserved_timestamp: 1e-400\n",
      "test");
  EXPECT_EQ(state.all_model_checkpoint_timestamps,
            std::vector<double>{std::numeric_limits<double>::infinity()});
  EXPECT_EQ(state.last_preserved_timestamp, 0.0);
}

TEST(StateFileTest, CheckpointNamesAndSteps) {
  EXPECT_EQ(checkpoint_file_name("model.ckpt", 1000), "model.ckpt-1000.h5");
  EXPECT_EQ(checkpoint_step("model.ckpt-1000.h5", "model.ckpt"), 1000);
  EXPECT_EQ(checkpoint_step("model.ckpt-1000.h5.tmp-1-2", "model.ckpt"), std::nullopt);
  EXPECT_EQ(checkpoint_step("model.ckpt-.h5", "model.ckpt"), std::nullopt);
  EXPECT_EQ(checkpoint_step("model.ckpt-1a.h5", "model.ckpt"), std::nullopt);
  EXPECT_EQ(checkpoint_step("other-5.h5", "model.ckpt"), std::nullopt);
  testing::TempDir dir;
  for (const char* name :
       {"model.ckpt-20.h5", "model.ckpt-3.h5", "model.ckpt-7.h5.tmp-1-1", "checkpoint"}) {
    testing::write_file(dir.file(name), "");
  }
  auto files = list_checkpoint_files(*posix_env(), dir.path());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].first, 3);
  EXPECT_EQ(files[1].second, dir.file("model.ckpt-20.h5"));
  EXPECT_TRUE(list_checkpoint_files(*posix_env(), dir.file("missing")).empty());
}

}  // namespace
}  // namespace cadre::checkpoint
