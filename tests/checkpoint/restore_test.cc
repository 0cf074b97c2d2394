// Restoring: strict, non-strict, warm start, partitions, a VariableStore, and falling back
// past damaged or missing checkpoints.
#include "cadre/checkpoint/restore.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/variables.h"
#include "cadre/checkpoint/writer.h"
#include "cadre/nn/initializers.h"
#include "cadre/nn/variable_store.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

using testing::expect_equal_tensors;
using testing::ramp;
using testing::small_model;
using testing::TempDir;

// Zero tensors shaped like `data`'s variables.
std::map<std::string, Tensor> zeros_like(const CheckpointData& data) {
  std::map<std::string, Tensor> targets;
  for (const auto& [name, value] : data.variables)
    targets[name] = Tensor::zeros(value.shape(), value.dtype());
  return targets;
}

std::string saved(const TempDir& dir, const CheckpointData& data,
                  const std::string& name = "c.h5") {
  write_checkpoint_file(dir.file(name), data);
  return dir.file(name);
}

TEST(RestoreTest, StrictRestoreWritesEveryVariable) {
  TempDir dir;
  CheckpointData data = small_model(30);
  auto reader = CheckpointReader::open(saved(dir, data));
  auto targets = zeros_like(data);
  EXPECT_EQ(restore(*reader, whole_targets(targets)).size(), data.variables.size());
  for (const auto& [name, value] : data.variables) expect_equal_tensors(value, targets[name], name);
}

TEST(RestoreTest, AnotherModelIsOneErrorListingEveryProblemAndChangesNothing) {
  TempDir dir;
  auto reader = CheckpointReader::open(saved(dir, small_model(30)));
  std::map<std::string, Tensor> targets = zeros_like(small_model(30));
  targets.erase("logits/kernel");                                 // unexpected in the file
  targets["hidden2/kernel"] = Tensor::zeros({3, 3});              // missing from the file
  targets["hidden1/bias"] = Tensor::zeros({5});                   // another shape
  targets["Adam/iterations"] = Tensor::zeros({}, DType::kInt32);  // another dtype
  try {
    restore(*reader, whole_targets(targets));
    FAIL() << "no error";
  } catch (const InvalidArgumentError& error) {
    std::string message = error.what();
    for (const char* expected :
         {"c.h5", "hidden2/kernel", "logits/kernel", "hidden1/bias: checkpoint [3], model [5]",
          "Adam/iterations: checkpoint int64, model int32"}) {
      EXPECT_NE(message.find(expected), std::string::npos) << expected << " in " << message;
    }
  }
  for (const auto& [name, tensor] : targets) {
    EXPECT_EQ(tensor.cast(DType::kFloat64).to_vector<double>(),
              std::vector<double>(static_cast<size_t>(tensor.numel()), 0.0))
        << name;
  }
}

TEST(RestoreTest, NonStrictRestoresTheVariablesBothSidesHave) {
  TempDir dir;
  CheckpointData data = small_model(30);
  auto reader = CheckpointReader::open(saved(dir, data));
  std::map<std::string, Tensor> targets = {{"hidden1/bias", Tensor::zeros({3})},
                                           {"new/variable", Tensor::zeros({2})}};
  RestoreOptions options;
  options.strict = false;
  EXPECT_EQ(restore(*reader, whole_targets(targets), options),
            std::vector<std::string>{"hidden1/bias"});
  expect_equal_tensors(data.variables["hidden1/bias"], targets["hidden1/bias"], "bias");
}

TEST(RestoreTest, WarmStartBySelectionWithRenamingAndOptionalSlots) {
  TempDir dir;
  CheckpointData data = small_model(30);
  auto reader = CheckpointReader::open(saved(dir, data));
  // The new model renamed hidden1 to encoder and added a head.
  std::map<std::string, Tensor> targets = {{"encoder/kernel", Tensor::zeros({4, 3})},
                                           {"encoder/bias", Tensor::zeros({3})},
                                           {"encoder/kernel/Adam/m", Tensor::zeros({4, 3})},
                                           {"head/kernel", Tensor::zeros({3, 7})}};
  std::map<std::string, std::string> slot_of = {{"encoder/kernel/Adam/m", "encoder/kernel"}};
  WarmStartOptions options;
  options.vars_to_warm_start = "encoder/.*";
  options.var_name_to_prev_var_name = {{"encoder/kernel", "hidden1/kernel"},
                                       {"encoder/bias", "hidden1/bias"}};
  EXPECT_EQ(warm_start(*reader, targets, slot_of, options),
            (std::vector<std::string>{"encoder/bias", "encoder/kernel"}));
  expect_equal_tensors(data.variables["hidden1/kernel"], targets["encoder/kernel"], "kernel");
  EXPECT_EQ(targets["encoder/kernel/Adam/m"].to_vector<float>(), std::vector<float>(12, 0));
  EXPECT_EQ(targets["head/kernel"].to_vector<float>(), std::vector<float>(21, 0));

  options.include_slots = true;
  warm_start(*reader, targets, slot_of, options);
  expect_equal_tensors(data.variables["hidden1/kernel/Adam/m"], targets["encoder/kernel/Adam/m"],
                       "m");

  options.vars_to_warm_start = ".*";  // head/kernel is not in the checkpoint
  EXPECT_THROW(warm_start(*reader, targets, slot_of, options), InvalidArgumentError);
  options.vars_to_warm_start = "(";
  EXPECT_THROW(warm_start(*reader, targets, slot_of, options), InvalidArgumentError);
}

TEST(RestoreTest, IntoAndOutOfPartitionedVariables) {
  TempDir dir;
  Tensor logical = ramp({9, 2}, 1, 1);
  CheckpointData data;
  data.partitioned_variables["embedding"] = {logical.slice(0, 0, 5), logical.slice(0, 5, 9)};
  auto reader = CheckpointReader::open(saved(dir, data));
  // Out of two shards into three.
  RestoreTargets targets;
  std::vector<Tensor> shards = {Tensor::zeros({3, 2}), Tensor::zeros({3, 2}),
                                Tensor::zeros({3, 2})};
  for (int i = 0; i < 3; ++i) targets["embedding"].push_back(RestoreTarget::rows(shards[i], 3 * i));
  restore(*reader, targets);
  for (int i = 0; i < 3; ++i) {
    expect_equal_tensors(logical.slice(0, 3 * i, 3 * i + 3).contiguous(), shards[i], "shard");
  }
  // And into one whole tensor.
  std::map<std::string, Tensor> whole = {{"embedding", Tensor::zeros({9, 2})}};
  restore(*reader, whole_targets(whole));
  expect_equal_tensors(logical, whole["embedding"], "whole");
  // Partitions that leave a row out are an error in a strict restore.
  targets["embedding"].pop_back();
  EXPECT_THROW(restore(*reader, targets), InvalidArgumentError);
}

TEST(RestoreTest, VariableStoreRoundTrip) {
  TempDir dir;
  nn::VariableStore store(1);
  nn::VariableSpec kernel;
  kernel.name = "dense/kernel";
  kernel.shape = Shape{3, 2};
  kernel.initializer = nn::initializers::random_normal(0, 1);
  nn::VariableSpec slot = kernel;
  slot.name = "dense/kernel/Adam/m";
  slot.slot_of = "dense/kernel";
  slot.trainable = false;
  store.get_or_create(kernel);
  store.get_or_create(slot);
  CheckpointData data;
  data.global_step = 3;
  add_variables(store, &data);
  EXPECT_EQ(data.slot_of.at("dense/kernel/Adam/m"), "dense/kernel");
  std::string path = saved(dir, data);
  Tensor expected = store.find("dense/kernel")->tensor().clone();

  nn::VariableStore fresh(2);  // other initial values
  fresh.get_or_create(kernel);
  fresh.get_or_create(slot);
  auto reader = CheckpointReader::open(path);
  EXPECT_EQ(reader->variable("dense/kernel/Adam/m").slot_of, "dense/kernel");
  restore_variables(*reader, fresh);
  expect_equal_tensors(expected, fresh.find("dense/kernel")->tensor(), "kernel");
}

TEST(RestoreTest, ResumingFallsBackPastADamagedOrMissingLatestCheckpoint) {
  TempDir dir;
  {
    CheckpointManager manager(dir.path());
    for (int step = 1; step <= 3; ++step) manager.save(small_model(step, static_cast<float>(step)));
  }
  auto targets = zeros_like(small_model(0));
  // Intact: the latest.
  EXPECT_EQ(restore_latest_good(dir.path(), whole_targets(targets))->global_step(), 3);
  // Truncated latest: the one before, with its values.
  ASSERT_EQ(::truncate(dir.file("model.ckpt-3.h5").c_str(), 500), 0);
  try {
    CheckpointReader::open(*latest_checkpoint(dir.path()));
    FAIL() << "opened a truncated file";
  } catch (const DataLossError& error) {
    EXPECT_NE(std::string(error.what()).find("model.ckpt-3.h5"), std::string::npos);
  }
  auto reader = restore_latest_good(dir.path(), whole_targets(targets));
  EXPECT_EQ(reader->global_step(), 2);
  expect_equal_tensors(small_model(2, 2).variables["hidden1/kernel"], targets["hidden1/kernel"],
                       "kernel");
  // Missing previous one as well: the one before that.
  std::filesystem::remove(dir.file("model.ckpt-2.h5"));
  EXPECT_EQ(restore_latest_good(dir.path(), whole_targets(targets))->global_step(), 1);
  // Nothing intact: one error naming each.
  std::filesystem::remove(dir.file("model.ckpt-1.h5"));
  try {
    restore_latest_good(dir.path(), whole_targets(targets));
    FAIL() << "no error";
  } catch (const DataLossError& error) {
    std::string message = error.what();
    for (const char* name : {"model.ckpt-1.h5", "model.ckpt-2.h5", "model.ckpt-3.h5"}) {
      EXPECT_NE(message.find(name), std::string::npos) << message;
    }
  }
  // An empty model_dir: nothing to restore.
  TempDir empty;
  EXPECT_EQ(restore_latest_good(empty.path(), whole_targets(targets)), nullptr);
}

TEST(RestoreTest, AStateFileNamingOnlyAMissingFileIsAClearError) {
  TempDir dir;
  testing::write_file(dir.file("checkpoint"), "model_checkpoint_path: \"model.ckpt-77.h5\"\n");
  // As TensorFlow's latest_checkpoint: no path to a file that is not there.
  EXPECT_EQ(latest_checkpoint(dir.path()), std::nullopt);
  try {
    restore_latest_good(dir.path(), whole_targets(zeros_like(small_model(0))));
    FAIL() << "no error";
  } catch (const DataLossError& error) {
    EXPECT_NE(std::string(error.what()).find(dir.file("model.ckpt-77.h5")), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("does not exist"), std::string::npos);
  }
  EXPECT_EQ(testing::read_file(dir.file("checkpoint")),
            "model_checkpoint_path: \"model.ckpt-77.h5\"\n");
}

TEST(RestoreTest, AModelOfAnotherShapeIsRefusedWithoutFallingBack) {
  TempDir dir;
  {
    CheckpointManager manager(dir.path());
    manager.save(small_model(1));
    manager.save(small_model(2));
  }
  std::map<std::string, Tensor> targets = zeros_like(small_model(0));
  targets["hidden1/kernel"] = Tensor::zeros({4, 4});
  EXPECT_THROW(restore_latest_good(dir.path(), whole_targets(targets)), InvalidArgumentError);
  EXPECT_EQ(targets["hidden1/bias"].to_vector<float>(), std::vector<float>(3, 0));
}

}  // namespace
}  // namespace cadre::checkpoint
