// Shard::snapshot, what a ps task writes as its part of a sharded checkpoint: every variable
// slice under its logical name and first row, with its slots and the step counters, each as
// of the mark however it is updated while the part reads it (copy-on-write). PartSaver,
// which writes it and reports how the write ended.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

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

void add_sparse(ps::PushRequest& request, const std::string& name, const std::vector<int64_t>& rows,
                const Tensor& values) {
  ps::PushItem* item = request.add_items();
  item->set_name(name);
  item->set_sparse(true);
  ps::to_proto(Tensor::from_vector<int64_t>(rows), item->mutable_indices());
  ps::to_proto(values, item->mutable_values());
}

// What the part writer gets of `item`: its copy, or its rows read in blocks of `block_rows`
// from `begin` (the reads before having taken the rows before it) to the end.
std::vector<float> read_rows(const ps::SnapshotItem& item, int64_t begin, int64_t end) {
  if (!item.read) return item.value.slice(0, begin, end).contiguous().to_vector<float>();
  int64_t row_elements = item.shape.num_elements() / item.shape[0];
  std::vector<float> rows(static_cast<size_t>((end - begin) * row_elements));
  item.read(begin, end, rows.data());
  return rows;
}

std::vector<float> values_of(ps::Shard& shard, const std::string& name) {
  ps::ReadRequest request;
  request.add_names(name);
  return ps::from_proto(shard.read(request).variables(0).value(), name).to_vector<float>();
}

TEST(ShardSnapshotTest, MarksEachSliceWithItsSlotsUnderItsLogicalName) {
  ps::Shard shard("ps:1");
  // Rows [512, 1536) of a logical "embedding".
  Tensor initial = Tensor::full(Shape{1024, 256}, 0.5);
  ps::CreateRequest create = create_request("embedding/part_1", &initial, initial.shape());
  create.mutable_variable()->set_logical_name("embedding");
  create.mutable_variable()->set_first_row(512);
  shard.create(create);
  Tensor bias = Tensor::full(Shape{4}, 2.0);
  shard.create(create_request("bias", &bias, bias.shape()));
  auto adam = nn::optimizers::adam(0.1);
  ps::PushRequest state = push_request(*adam, /*from_chief=*/true);
  add_fresh_state(state, *adam, "embedding/part_1", initial);
  add_fresh_state(state, *adam, "bias", bias);
  add_dense(state, "embedding/part_1", Tensor::full(initial.shape(), 1.0));
  shard.push(state);
  std::vector<float> variable_before = values_of(shard, "embedding/part_1");
  std::vector<float> m_before = values_of(shard, "embedding/part_1/Adam/m");
  EXPECT_NE(variable_before[0], 0.5f) << "the push was applied";

  ps::PartSnapshot snapshot;
  shard.snapshot(snapshot);
  ASSERT_EQ(snapshot.items.size(), 6u);
  EXPECT_EQ(snapshot.iterations.at("Adam/iterations"), 1);
  const ps::SnapshotItem* variable = find(snapshot, "embedding");
  ASSERT_NE(variable, nullptr);
  EXPECT_EQ(variable->first_row, 512);
  EXPECT_EQ(variable->slot_of, "");
  EXPECT_EQ(variable->shape, initial.shape());
  EXPECT_TRUE(variable->read) << "1 MiB: copy-on-write, not copied";
  const ps::SnapshotItem* small = find(snapshot, "bias");
  ASSERT_NE(small, nullptr);
  EXPECT_FALSE(small->read) << "16 bytes: copied at the mark";
  const ps::SnapshotItem* m = find(snapshot, "embedding/Adam/m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->slot_of, "embedding");
  EXPECT_EQ(m->first_row, 512);
  ASSERT_NE(find(snapshot, "embedding/Adam/v"), nullptr);

  // Adam's update writes every row (a dense one here): the rows not yet read are kept aside
  // first, so the snapshot still reads the values of the mark.
  std::vector<float> first_half = read_rows(*variable, 0, 512);
  ps::PushRequest again = push_request(*adam, /*from_chief=*/false);
  add_dense(again, "embedding/part_1", Tensor::full(initial.shape(), 1.0));
  add_dense(again, "bias", Tensor::full(bias.shape(), 1.0));
  shard.push(again);
  ASSERT_NE(values_of(shard, "embedding/part_1"), variable_before) << "the push was applied";
  std::vector<float> second_half = read_rows(*variable, 512, 1024);
  first_half.insert(first_half.end(), second_half.begin(), second_half.end());
  EXPECT_EQ(first_half, variable_before);
  EXPECT_EQ(read_rows(*m, 0, 1024), m_before);
  EXPECT_EQ(read_rows(*small, 0, 4), std::vector<float>(4, 2.0f));
  EXPECT_THROW(variable->read(0, 1, first_half.data()), InternalError) << "rows read twice";

  shard.end_snapshot();
  EXPECT_THROW(read_rows(*find(snapshot, "embedding/Adam/v"), 0, 1), InternalError);
  // The next snapshot has the update.
  shard.snapshot(snapshot);
  EXPECT_EQ(snapshot.iterations.at("Adam/iterations"), 2);
  EXPECT_EQ(read_rows(*find(snapshot, "embedding"), 0, 1024), values_of(shard, "embedding/part_1"));
  shard.end_snapshot();
}

// Point-in-time consistency under sparse updates (Adagrad's touch only their rows, in the
// variable and its accumulator): rows read before an update and rows updated before they
// are read both hold the values of the mark; a later dense update keeps the rest aside
// without losing the rows kept before it.
TEST(ShardSnapshotTest, ASnapshotHoldsTheRowsOfItsMarkUnderSparseAndDenseUpdates) {
  ps::Shard shard("ps:0");
  const int64_t rows = 4096, width = 32;
  std::vector<float> start(static_cast<size_t>(rows * width));
  for (size_t i = 0; i < start.size(); ++i) start[i] = static_cast<float>(i % 977) * 0.01f;
  Tensor initial = Tensor::from_vector(start, Shape{rows, width});
  shard.create(create_request("table", &initial, initial.shape()));
  auto adagrad = nn::optimizers::adagrad(0.5);
  ps::PushRequest state = push_request(*adagrad, /*from_chief=*/true);
  add_fresh_state(state, *adagrad, "table", initial);
  shard.push(state);
  auto sparse_push = [&](std::vector<int64_t> ids) {
    ps::PushRequest push = push_request(*adagrad, /*from_chief=*/false);
    add_sparse(push, "table", ids,
               Tensor::full(Shape{static_cast<int64_t>(ids.size()), width}, 1.0));
    shard.push(push);
  };
  sparse_push({5, 3000});
  const std::vector<float> table = values_of(shard, "table");
  const std::vector<float> accumulator = values_of(shard, "table/Adagrad/accumulator");

  ps::PartSnapshot snapshot;
  shard.snapshot(snapshot);
  const ps::SnapshotItem& variable = *find(snapshot, "table");
  const ps::SnapshotItem& slot = *find(snapshot, "table/Adagrad/accumulator");
  ASSERT_TRUE(variable.read && slot.read);
  std::vector<float> got = read_rows(variable, 0, 1000);
  std::vector<float> got_slot = read_rows(slot, 0, 1000);
  // Rows read already (5), rows ahead (1000, the first unread, 3000 twice, 4095).
  sparse_push({5, 1000, 3000, 4095, 3000});
  ASSERT_NE(values_of(shard, "table"), table) << "the push was applied";
  auto append = [](std::vector<float>& to, const std::vector<float>& more) {
    to.insert(to.end(), more.begin(), more.end());
  };
  append(got, read_rows(variable, 1000, 2000));
  append(got_slot, read_rows(slot, 1000, 2000));
  sparse_push({2000, 2500});
  // A dense update: every unread row kept aside, 2000, 2500, 3000 and 4095 as of the mark.
  ps::PushRequest dense = push_request(*adagrad, /*from_chief=*/false);
  add_dense(dense, "table", Tensor::full(initial.shape(), 1.0));
  shard.push(dense);
  sparse_push({3001});
  append(got, read_rows(variable, 2000, rows));
  append(got_slot, read_rows(slot, 2000, rows));
  EXPECT_EQ(got, table);
  EXPECT_EQ(got_slot, accumulator);
  shard.end_snapshot();
}

// The same with the updates on other threads while the part is read, as a ps task serves
// pushes while its part is written (run under ThreadSanitizer too).
TEST(ShardSnapshotTest, ASnapshotHoldsTheRowsOfItsMarkWhileOtherThreadsUpdate) {
  ps::Shard shard("ps:0");
  const int64_t rows = 8192, width = 16;
  Tensor initial = Tensor::full(Shape{rows, width}, 1.0);
  shard.create(create_request("table", &initial, initial.shape()));
  auto adagrad = nn::optimizers::adagrad(0.1);
  ps::PushRequest state = push_request(*adagrad, /*from_chief=*/true);
  add_fresh_state(state, *adagrad, "table", initial);
  shard.push(state);
  ps::PartSnapshot snapshot;
  shard.snapshot(snapshot);
  std::atomic<bool> done{false};
  std::atomic<int> pushes{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      int64_t next = w;
      while (!done.load()) {
        std::vector<int64_t> ids;
        for (int i = 0; i < 64; ++i) ids.push_back((next += 7919) % rows);
        ps::PushRequest push = push_request(*adagrad, /*from_chief=*/false);
        add_sparse(push, "table", ids, Tensor::full(Shape{64, width}, 1.0));
        shard.push(push);
        ++pushes;
      }
    });
  }
  // Pushes before, during and after the reads, however the threads are scheduled (on a
  // loaded machine the readers once finished before any push was made).
  auto await_pushes = [&pushes](int n) {
    while (pushes.load() < n) std::this_thread::yield();
  };
  await_pushes(1);
  std::vector<float> got, got_slot;
  for (int64_t begin = 0; begin < rows; begin += 256) {
    std::vector<float> block = read_rows(*find(snapshot, "table"), begin, begin + 256);
    got.insert(got.end(), block.begin(), block.end());
    block = read_rows(*find(snapshot, "table/Adagrad/accumulator"), begin, begin + 256);
    got_slot.insert(got_slot.end(), block.begin(), block.end());
    std::this_thread::yield();
  }
  await_pushes(pushes.load() + 2);
  done = true;
  for (std::thread& worker : workers) worker.join();
  shard.end_snapshot();
  EXPECT_NE(values_of(shard, "table"), got) << "the workers' pushes were applied";
  EXPECT_EQ(got, std::vector<float>(static_cast<size_t>(rows * width), 1.0f));
  EXPECT_EQ(got_slot, std::vector<float>(static_cast<size_t>(rows * width), 0.1f));
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
