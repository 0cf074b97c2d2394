// A model_dir whose `checkpoint` state file is at fault (empty, garbled, missing beside
// checkpoints, naming a file that is gone) or whose newest checkpoint is damaged: readers
// use the newest intact checkpoint with a warning and write nothing; the CheckpointManager
// rewrites the state file (unless the model_dir is read-only), keeps every checkpoint file
// as it was, and says so when it saves at or below an existing step.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/checkpoint/state_file.h"
#include "checkpoint/model_dir_checkpoints.h"
#include "tests/checkpoint/test_util.h"
#include "tests/support/fault_env.h"
#include "tests/support/log_capture.h"

namespace cadre::checkpoint {
namespace {

using cadre::testing::FaultEnv;
using cadre::testing::LogCapture;
using testing::small_model;
using testing::TempDir;

enum class Damage { kEmpty, kGarbage, kMissing, kNamesAMissingFile };

std::string name_of(Damage damage) {
  switch (damage) {
    case Damage::kEmpty:
      return "Empty";
    case Damage::kGarbage:
      return "Garbage";
    case Damage::kMissing:
      return "Missing";
    case Damage::kNamesAMissingFile:
      return "NamesAMissingFile";
  }
  return "?";
}

// What the warning about the state file says, for each damage.
std::string what_is_wrong(Damage damage) {
  switch (damage) {
    case Damage::kEmpty:
      return "is empty";
    case Damage::kGarbage:
      return "line 1";
    case Damage::kMissing:
      return "no state file";
    case Damage::kNamesAMissingFile:
      return "model.ckpt-40.h5, which does not exist";
  }
  return "?";
}

void damage_state(const TempDir& dir, Damage damage) {
  std::string state = dir.file("checkpoint");
  switch (damage) {
    case Damage::kEmpty:
      testing::write_file(state, "");
      break;
    case Damage::kGarbage:
      testing::write_file(state, std::string("\x7f\x13garbage}{\0\n", 13));
      break;
    case Damage::kMissing:
      std::filesystem::remove(state);
      break;
    case Damage::kNamesAMissingFile:
      testing::write_file(state,
                          "model_checkpoint_path: \"model.ckpt-40.h5\"\n"
                          "all_model_checkpoint_paths: \"model.ckpt-10.h5\"\n"
                          "all_model_checkpoint_paths: \"model.ckpt-40.h5\"\n");
      break;
  }
}

// Flips a byte of the stored values of `tensor` in the checkpoint at `path`: the file
// opens, its checksum fails.
void corrupt_values(const std::string& path, const Tensor& tensor) {
  std::string contents = testing::read_file(path);
  std::string needle(static_cast<const char*>(tensor.contiguous().raw_data()), tensor.nbytes());
  size_t at = contents.find(needle);
  ASSERT_NE(at, std::string::npos);
  testing::flip_byte(path, static_cast<std::streamoff>(at + 5));
}

// Every file of `dir` by name, with its bytes.
std::map<std::string, std::string> snapshot(const TempDir& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.is_regular_file()) {
      files[entry.path().filename().string()] = testing::read_file(entry.path().string());
    }
  }
  return files;
}

class HealingTest : public ::testing::TestWithParam<Damage> {
 protected:
  // Checkpoints of steps 10, 20 and 30 (values offset by the step), then the damage.
  void SetUp() override {
    {
      CheckpointManager manager(dir_.path());
      for (int step : {10, 20, 30}) manager.save(small_model(step, static_cast<float>(step)));
    }
    damage_state(dir_, GetParam());
  }

  TempDir dir_;
};

TEST_P(HealingTest, FindCheckpointsSaysWhatIsWrongAndListsTheFilesNewestFirst) {
  auto env = posix_env();
  ModelDirCheckpoints found = find_checkpoints(*env, dir_.path());
  EXPECT_NE(found.state_problem.find(what_is_wrong(GetParam())), std::string::npos)
      << found.state_problem;
  std::vector<std::string> expected;
  if (GetParam() == Damage::kNamesAMissingFile) expected.push_back(dir_.file("model.ckpt-40.h5"));
  for (int step : {30, 20, 10})
    expected.push_back(dir_.file(checkpoint_file_name("model.ckpt", step)));
  EXPECT_EQ(found.candidates, expected);
}

TEST_P(HealingTest, LatestCheckpointIsTheNewestFileAndNothingIsWritten) {
  auto before = snapshot(dir_);
  EXPECT_EQ(latest_checkpoint(dir_.path()), dir_.file("model.ckpt-30.h5"));
  EXPECT_EQ(snapshot(dir_), before);
}

TEST_P(HealingTest, RestoreUsesTheNewestIntactCheckpointWithAWarningAndWritesNothing) {
  auto before = snapshot(dir_);
  std::map<std::string, Tensor> targets;
  for (const auto& [name, value] : small_model(0).variables) {
    targets[name] = Tensor::zeros(value.shape(), value.dtype());
  }
  LogCapture log;
  auto reader = restore_latest_good(dir_.path(), whole_targets(targets));
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->global_step(), 30);
  testing::expect_equal_tensors(small_model(30, 30).variables["hidden1/kernel"],
                                targets["hidden1/kernel"], "kernel");
  EXPECT_FALSE(log.matching({"checkpoint", what_is_wrong(GetParam())}).empty()) << log.all();
  EXPECT_EQ(snapshot(dir_), before);
}

TEST_P(HealingTest, TheNewestCorruptRestoresTheOneBefore) {
  corrupt_values(dir_.file("model.ckpt-30.h5"), small_model(30, 30).variables["hidden1/kernel"]);
  LogCapture log;
  auto reader = open_latest_intact(dir_.path());
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->global_step(), 20);
  EXPECT_FALSE(log.matching({"model.ckpt-30.h5", "checksum"}).empty()) << log.all();
}

TEST_P(HealingTest, TheManagerRewritesTheStateFileAndKeepsEveryCheckpoint) {
  auto before = snapshot(dir_);
  LogCapture log;
  {
    CheckpointManager manager(dir_.path());
    EXPECT_EQ(manager.latest_checkpoint(), dir_.file("model.ckpt-30.h5"));
    EXPECT_FALSE(
        log.matching({what_is_wrong(GetParam()), "rewrote it naming model.ckpt-30.h5"}).empty())
        << log.all();
    CheckpointState state = read_state(*posix_env(), dir_.path()).value();
    EXPECT_EQ(state.model_checkpoint_path, "model.ckpt-30.h5");
    EXPECT_EQ(
        state.all_model_checkpoint_paths,
        (std::vector<std::string>{"model.ckpt-10.h5", "model.ckpt-20.h5", "model.ckpt-30.h5"}));
    EXPECT_EQ(state.all_model_checkpoint_timestamps.size(), 3u);
    manager.save(small_model(40, 40));
  }
  auto after = snapshot(dir_);
  for (int step : {10, 20, 30}) {
    std::string name = checkpoint_file_name("model.ckpt", step);
    EXPECT_EQ(after.at(name), before.at(name)) << name << " changed";
  }
  EXPECT_EQ(latest_checkpoint(dir_.path()), dir_.file("model.ckpt-40.h5"));
  EXPECT_TRUE(log.matching({"training went back"}).empty()) << log.all();
}

TEST_P(HealingTest, TheManagerLeavesADamagedNewestCheckpointOutAndSaysWhenItReplacesIt) {
  corrupt_values(dir_.file("model.ckpt-30.h5"), small_model(30, 30).variables["hidden1/kernel"]);
  auto before = snapshot(dir_);
  LogCapture log;
  CheckpointManagerOptions options;
  options.keep_checkpoint_max = 2;
  CheckpointManager manager(dir_.path(), options);
  // The newest intact one is the latest; the damaged one is not retention's to delete.
  CheckpointState state = read_state(*posix_env(), dir_.path()).value();
  EXPECT_EQ(state.model_checkpoint_path, "model.ckpt-20.h5");
  EXPECT_EQ(state.all_model_checkpoint_paths,
            (std::vector<std::string>{"model.ckpt-10.h5", "model.ckpt-20.h5"}));
  EXPECT_FALSE(log.matching({"leaving model.ckpt-30.h5"}).empty()) << log.all();
  // Training resumed at 20 saves 25 below the damaged 30, then 30 over it: each said.
  manager.save(small_model(25, 25));
  EXPECT_FALSE(log.matching({"step 25", "below", "model.ckpt-30.h5"}).empty()) << log.all();
  EXPECT_EQ(testing::read_file(dir_.file("model.ckpt-30.h5")), before.at("model.ckpt-30.h5"));
  manager.save(small_model(30, 31));
  EXPECT_FALSE(log.matching({"step 30", "replacing the existing", "model.ckpt-30.h5"}).empty())
      << log.all();
  EXPECT_TRUE(CheckpointReader::open(dir_.file("model.ckpt-30.h5"))->verify().empty());
  manager.save(small_model(40, 40));
  manager.save(small_model(40, 41));  // the same step again in one run: going back nowhere
  EXPECT_EQ(log.matching({"step 40", "training went back"}).size(), 0u) << log.all();
}

TEST_P(HealingTest, AReadOnlyModelDirIsReadWithAWarningAndNotWritten) {
  auto env = std::make_shared<FaultEnv>();
  env->set_read_only(true);
  auto before = snapshot(dir_);
  LogCapture log;
  CheckpointManagerOptions options;
  options.env = env;
  CheckpointManager manager(dir_.path(), options);
  EXPECT_EQ(manager.latest_checkpoint(), dir_.file("model.ckpt-30.h5"));
  EXPECT_FALSE(log.matching({"cannot rewrite it", "Read-only file system"}).empty()) << log.all();
  EXPECT_EQ(snapshot(dir_), before);
  // It tried to rewrite the state file, and nothing else.
  ASSERT_FALSE(env->refused().empty());
  for (const std::string& attempt : env->refused()) {
    EXPECT_NE(attempt.find(" checkpoint.tmp-"), std::string::npos) << attempt;
  }
  EXPECT_EQ(open_latest_intact(dir_.path(), env.get())->global_step(), 30);
}

INSTANTIATE_TEST_SUITE_P(EachDamage, HealingTest,
                         ::testing::Values(Damage::kEmpty, Damage::kGarbage, Damage::kMissing,
                                           Damage::kNamesAMissingFile),
                         [](const auto& info) { return name_of(info.param); });

TEST(HealingTest, AStateFileNamingOnlyMissingFilesIsAnErrorNamingThem) {
  TempDir dir;
  testing::write_file(dir.file("checkpoint"), "model_checkpoint_path: \"model.ckpt-77.h5\"\n");
  EXPECT_EQ(latest_checkpoint(dir.path()), std::nullopt);
  try {
    open_latest_intact(dir.path());
    FAIL() << "no error";
  } catch (const DataLossError& error) {
    EXPECT_NE(std::string(error.what()).find(dir.file("model.ckpt-77.h5")), std::string::npos)
        << error.what();
  }
  // The manager starts afresh there (nothing to keep) and its first save heals the state.
  CheckpointManager manager(dir.path());
  manager.save(small_model(1));
  EXPECT_EQ(latest_checkpoint(dir.path()), dir.file("model.ckpt-1.h5"));
}

TEST(HealingTest, AValidStateFileStillDecidesAsTensorFlowsDoes) {
  TempDir dir;
  {
    CheckpointManager manager(dir.path());
    for (int step : {10, 20}) manager.save(small_model(step));
  }
  // A person rolled back to step 10 by editing the state file.
  testing::write_file(dir.file("checkpoint"), "model_checkpoint_path: \"model.ckpt-10.h5\"\n");
  EXPECT_EQ(latest_checkpoint(dir.path()), dir.file("model.ckpt-10.h5"));
  EXPECT_EQ(open_latest_intact(dir.path())->global_step(), 10);
  auto env = posix_env();
  EXPECT_EQ(find_checkpoints(*env, dir.path()).state_problem, "");
}

TEST(HealingTest, NoCheckpointAtAllIsNoProblem) {
  TempDir dir;
  auto env = posix_env();
  ModelDirCheckpoints found = find_checkpoints(*env, dir.path());
  EXPECT_EQ(found.state_problem, "");
  EXPECT_TRUE(found.candidates.empty());
  EXPECT_EQ(latest_checkpoint(dir.path()), std::nullopt);
  EXPECT_EQ(open_latest_intact(dir.path() + "/missing"), nullptr);
}

}  // namespace
}  // namespace cadre::checkpoint
