// Shard::snapshot, what a ps task writes as its part of a sharded checkpoint: every variable
// slice under its logical name and first row, with its slots and the step counters; a later
// snapshot reuses the memory of the one before. PartSaver, which writes it and reports how
// the write ended.
#include <gtest/gtest.h>

#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "strategies/ps/part_saver.h"
#include "strategies/ps/shard.h"
#include "strategies/ps/tensor_data.h"
#include "tests/strategies/ps_requests.h"

namespace cadre {
namespace {

using testing::add_dense;
using testing::add_fresh_state;
using testing::create_request;
using testing::pull_request;
using testing::push_request;

const ps::SnapshotItem* find(const ps::PartSnapshot& snapshot, const std::string& name) {
  for (const ps::SnapshotItem& item : snapshot.items) {
    if (item.name == name) return &item;
  }
  return nullptr;
}

TEST(ShardSnapshotTest, CopiesEachSliceWithItsSlotsUnderItsLogicalName) {
  ps::Shard shard("ps:1");
  // Rows [512, 1536) of a logical "embedding".
  Tensor initial = Tensor::full(Shape{1024, 1024}, 0.5);
  ps::CreateRequest create = create_request("embedding/part_1", &initial, initial.shape());
  create.mutable_variable()->set_logical_name("embedding");
  create.mutable_variable()->set_first_row(512);
  shard.create(create);
  auto adam = nn::optimizers::adam(0.1);
  ps::PushRequest state = push_request(*adam, /*from_chief=*/true);
  add_fresh_state(state, *adam, "embedding/part_1", initial);
  add_dense(state, "embedding/part_1", Tensor::full(initial.shape(), 1.0));
  shard.push(state);

  ps::PartSnapshot snapshot;
  shard.snapshot(snapshot);
  ASSERT_EQ(snapshot.items.size(), 3u);
  const ps::SnapshotItem* variable = find(snapshot, "embedding");
  ASSERT_NE(variable, nullptr);
  EXPECT_EQ(variable->first_row, 512);
  EXPECT_EQ(variable->slot_of, "");
  Tensor pulled = ps::from_proto(shard.pull(pull_request("embedding/part_1")).values(0), "w");
  EXPECT_EQ(variable->value.to_vector<float>(), pulled.to_vector<float>());
  EXPECT_NE(pulled.to_vector<float>()[0], 0.5f) << "the push was applied";
  const ps::SnapshotItem* m = find(snapshot, "embedding/Adam/m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->slot_of, "embedding");
  EXPECT_EQ(m->first_row, 512);
  EXPECT_NEAR(m->value.to_vector<float>()[7], 0.1f, 1e-6);  // (1 - 0.9) * the gradient 1
  EXPECT_NE(find(snapshot, "embedding/Adam/v"), nullptr);
  EXPECT_EQ(snapshot.iterations.at("Adam/iterations"), 1);

  // Another update; the next snapshot has it, in the same memory.
  const void* memory = variable->value.raw_data();
  ps::PushRequest again = push_request(*adam, /*from_chief=*/false);
  add_dense(again, "embedding/part_1", Tensor::full(initial.shape(), 1.0));
  shard.push(again);
  shard.snapshot(snapshot);
  variable = find(snapshot, "embedding");
  ASSERT_NE(variable, nullptr);
  EXPECT_EQ(variable->value.raw_data(), memory);
  pulled = ps::from_proto(shard.pull(pull_request("embedding/part_1")).values(0), "w");
  EXPECT_EQ(variable->value.to_vector<float>(), pulled.to_vector<float>());
  EXPECT_EQ(snapshot.iterations.at("Adam/iterations"), 2);
}

ps::SaveRequest save_request(const std::string& file_name) {
  ps::SaveRequest request;
  request.set_directory("/model_dir");
  request.set_file_name(file_name);
  request.set_global_step(7);
  return request;
}

ps::SaveStatusRequest status_request(const std::string& file_name) {
  ps::SaveStatusRequest request;
  request.set_file_name(file_name);
  request.set_timeout_seconds(10);
  return request;
}

TEST(PartSaverTest, WritesTheSnapshotAndReportsHowTheWriteEnded) {
  ps::Shard shard("ps:0");
  Tensor initial = Tensor::full(Shape{3, 2}, 1.0);
  shard.create(create_request("w", &initial, initial.shape()));
  std::vector<std::string> written;
  ps::PartSaver saver("ps:0", [&](const std::string& directory, const std::string& file_name,
                                  int64_t step, const ps::PartSnapshot& snapshot) {
    if (file_name == "bad.h5") throw ResourceExhaustedError("the disk is full");
    written.push_back(directory + "/" + file_name + "@" + std::to_string(step) + ":" +
                      std::to_string(snapshot.items.size()));
    return std::make_pair(uint64_t{1234}, uint32_t{0xabcd});
  });
  ps::SaveResponse response = saver.save(shard, save_request("good.h5"));
  ASSERT_EQ(response.slices_size(), 1);
  EXPECT_EQ(response.slices(0).name(), "w");
  EXPECT_EQ(response.slices(0).rows(), 3);
  ps::SaveStatusResponse status = saver.status(status_request("good.h5"));
  EXPECT_EQ(status.bytes(), 1234u);
  EXPECT_EQ(status.crc32c(), 0xabcdu);
  EXPECT_EQ(written, (std::vector<std::string>{"/model_dir/good.h5@7:1"}));

  saver.save(shard, save_request("bad.h5"));
  EXPECT_THROW(saver.status(status_request("bad.h5")), ResourceExhaustedError);
  EXPECT_THROW(saver.status(status_request("never.h5")), NotFoundError);
  EXPECT_THROW(saver.save(shard, save_request("../escape.h5")), InvalidArgumentError);
  EXPECT_THROW(saver.save(shard, save_request("")), InvalidArgumentError);
  ps::PartSaver without("ps:1", nullptr);
  EXPECT_THROW(without.save(shard, save_request("good.h5")), FailedPreconditionError);
}

}  // namespace
}  // namespace cadre
