// A model_dir for tools/compat/check_h5py_reads_cadre.py: two checkpoints saved by the
// CheckpointManager with every dtype, a partitioned variable, slots (one of them
// partitioned), RNG and iterator state and metadata. With CADRE_COMPAT_DIR set the model_dir
// is kept there as $CADRE_COMPAT_DIR/model_dir, for h5py, h5dump and TensorFlow's
// CheckpointState parser to read (see tools/compat/README.md). The values are spelled out
// in that script too: change both together.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <limits>

#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

using testing::expect_equal_tensors;
using testing::ramp;

std::vector<Tensor> split_rows(const Tensor& whole, int64_t at) {
  return {whole.slice(0, 0, at).contiguous(), whole.slice(0, at, whole.dim(0)).contiguous()};
}

// The checkpoint of step s; `whole` receives every variable and slot at its logical value.
CheckpointData compat_model(int64_t s, std::map<std::string, Tensor>* whole) {
  const float offset = static_cast<float>(s);
  CheckpointData data;
  data.global_step = s;
  auto& v = data.variables;
  v["dense/kernel"] = ramp({4, 3}, 1, offset);
  v["dense/bias"] = Tensor::from_vector<double>({0.5 + s, 1.0 + s, 1.5 + s});
  v["dense/kernel/Adam/m"] = ramp({4, 3}, 0.25f, offset);
  v["Adam/iterations"] = Tensor::scalar<int64_t>(s);
  v["counts"] =
      Tensor::from_vector<int32_t>({-1, 0, 1, std::numeric_limits<int32_t>::max()}, Shape{2, 2});
  v["ids"] = Tensor::from_vector<int64_t>({-(int64_t{1} << 40), 0, s});
  v["mask"] = Tensor::from_vector<bool>({true, false, false, true});
  v["pixels"] = Tensor::from_vector<uint8_t>({0, 128, 255});
  v["half"] = Tensor::from_vector<Float16>({Float16(1.0f), Float16(-2.5f), Float16(65504.0f)});
  v["brain"] = Tensor::from_vector<BFloat16>({BFloat16(1.0f), BFloat16(-2.5f), BFloat16(256.0f)});
  // 2 MiB: a dataset of 1 MiB or more starts at a 4 KiB-aligned offset.
  v["big/kernel"] = ramp({512, 1024}, 1, offset);
  data.slot_of["dense/kernel/Adam/m"] = "dense/kernel";
  // Parameter-server shards: rows 0-2 and 3-4 of one logical [5, 2] value.
  Tensor table = ramp({5, 2}, 1, offset);
  Tensor table_v = ramp({5, 2}, 0.125f, offset);
  data.partitioned_variables["embedding/table"] = split_rows(table, 3);
  data.partitioned_variables["embedding/table/Adam/v"] = split_rows(table_v, 3);
  data.slot_of["embedding/table/Adam/v"] = "embedding/table";
  data.rng_states["global"] = {42, 7, static_cast<uint64_t>(s) * 10};
  data.rng_states["replica_0"] = {42, 8, static_cast<uint64_t>(s)};
  data.iterator_state["shard_0/position"] = Tensor::scalar<int64_t>(s * 32);
  // Of another length at each step: the manager's in-memory file replaces the dataset.
  data.iterator_state["shard_0/cursor"] =
      bytes_to_tensor("epoch=1;file=train-00001" + std::string(s / 100, '+'));
  data.attributes["strategy"] = "ParameterServerStrategy";
  data.attributes["topology"] = "1 worker x 2 cpu, 2 ps";
  if (whole != nullptr) {
    *whole = data.variables;
    (*whole)["embedding/table"] = table;
    (*whole)["embedding/table/Adam/v"] = table_v;
  }
  return data;
}

TEST(CompatFilesTest, WritesAModelDirForH5py) {
  testing::TempDir temporary;
  std::string model_dir = temporary.file("model_dir");
  if (const char* keep = std::getenv("CADRE_COMPAT_DIR"); keep != nullptr && *keep != '\0') {
    model_dir = (std::filesystem::path(keep) / "model_dir").string();
    std::filesystem::remove_all(model_dir);  // this run's checkpoints only
  }
  {
    CheckpointManager manager(model_dir);
    manager.save(compat_model(100, nullptr));
    manager.save(compat_model(200, nullptr));
  }
  auto env = posix_env();
  std::optional<CheckpointState> state = read_state(*env, model_dir);
  ASSERT_TRUE(state);
  EXPECT_EQ(state->model_checkpoint_path, "model.ckpt-200.h5");
  EXPECT_EQ(state->all_model_checkpoint_paths,
            (std::vector<std::string>{"model.ckpt-100.h5", "model.ckpt-200.h5"}));

  auto reader = CheckpointReader::open(resolve_checkpoint_path(model_dir, "model.ckpt-200.h5"));
  EXPECT_TRUE(reader->verify().empty());
  EXPECT_EQ(reader->global_step(), 200);
  std::map<std::string, Tensor> whole;
  CheckpointData expected = compat_model(200, &whole);
  EXPECT_EQ(reader->variables().size(), whole.size());
  for (const auto& [name, value] : whole) {
    expect_equal_tensors(value, reader->read(name), name);
    auto slot = expected.slot_of.find(name);
    EXPECT_EQ(reader->variable(name).slot_of,
              slot == expected.slot_of.end() ? std::string() : slot->second)
        << name;
  }
  std::map<std::string, Generator::State> rng = reader->rng_states();
  ASSERT_EQ(rng.size(), 2u);
  EXPECT_EQ(rng.at("global").offset, 2000u);
  EXPECT_EQ(rng.at("replica_0").stream, 8u);
  std::map<std::string, Tensor> iterator = reader->iterator_state();
  EXPECT_EQ(tensor_to_bytes(iterator.at("shard_0/cursor")), "epoch=1;file=train-00001++");
  EXPECT_EQ(iterator.at("shard_0/position").item<int64_t>(), 6400);
  EXPECT_EQ(reader->attributes().at("strategy"), "ParameterServerStrategy");
}

}  // namespace
}  // namespace cadre::checkpoint
