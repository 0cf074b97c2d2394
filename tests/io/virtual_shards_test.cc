// Virtual shards: a job's input read as a fixed number of shards, each with its own position,
// so that any number of workers can take them over and still read every element once.
#include "io/virtual_shards.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/io/tfrecord.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

constexpr int64_t kShards = 8;

// 480 numbers, shuffled within each shard, in batches of 2 per shard (as an input_fn that
// shards by itself would build them for shard `index`).
Dataset numbers(int64_t index) {
  return Dataset::range(480).shard(kShards, index).shuffle(16, /*seed=*/3).batch(2);
}

// The numbers of every batch `workers` workers read in `steps` steps (all of them when
// steps < 0), each worker resuming from `state` when it holds positions; their states
// together afterwards.
IteratorState read_as(int64_t workers, int steps, const IteratorState& state,
                      std::vector<int64_t>* seen) {
  IteratorState together;
  for (int64_t w = 0; w < workers; ++w) {
    auto [first, last] = owned_shards(kShards, workers, w);
    Iterator it = read_virtual_shards(numbers(first), kShards, first, last).dataset.make_iterator();
    if (!state.empty()) it.restore(state);
    for (int s = 0; steps < 0 || s < steps; ++s) {
      std::optional<Element> batch = it.next();
      if (!batch) break;
      EXPECT_EQ(batch->value().dim(0), 2 * (last - first));
      for (int64_t v : batch->value().to_vector<int64_t>()) seen->push_back(v);
    }
    IteratorState mine = it.save();
    for (auto& [key, value] : mine) together.emplace(key, value);
  }
  return together;
}

TEST(VirtualShardsTest, ResizedJobsReadEveryElementOnce) {
  std::vector<int64_t> seen;
  IteratorState state = read_as(2, 7, {}, &seen);
  state = read_as(4, 5, state, &seen);
  state = read_as(1, 6, state, &seen);
  read_as(3, -1, state, &seen);
  std::map<int64_t, int> counts;
  for (int64_t v : seen) ++counts[v];
  ASSERT_EQ(counts.size(), 480u);
  for (const auto& [v, count] : counts) EXPECT_EQ(count, 1) << v;
  EXPECT_EQ(counts.begin()->first, 0);
  EXPECT_EQ(counts.rbegin()->first, 479);
  EXPECT_EQ(saved_virtual_shards(state), kShards);
}

// Worker 1 of 2 gave 3 more steps after its position was saved at step 5, then left: whoever
// owns its shards next (here 4 workers) skips their 3 elements each, and nothing else.
TEST(VirtualShardsTest, ShardsMarkedBehindSkipWhatWasTakenFromThem) {
  std::vector<int64_t> first5, first8, resumed;
  IteratorState state = read_as(2, 5, {}, &first5);
  read_as(2, 8, {}, &first8);
  IteratorState worker1;
  for (const auto& [key, value] : state) {
    if (key.starts_with("shard_") && key[6] >= '4') worker1.emplace(key, value);
  }
  set_shards_behind(worker1, 3);
  for (auto& [key, value] : worker1) state[key] = value;
  read_as(4, -1, state, &resumed);
  std::map<int64_t, int> counts;
  for (int64_t v : first5) counts[v] += v % kShards < 4;
  for (int64_t v : first8) counts[v] += v % kShards >= 4;
  for (int64_t v : resumed) ++counts[v];
  ASSERT_EQ(counts.size(), 480u);
  for (const auto& [v, n] : counts) EXPECT_EQ(n, 1) << v;
  // A count below zero is damage, refused as the input is restored.
  set_shards_behind(worker1, -10);
  Iterator it = read_virtual_shards(numbers(4), kShards, 4, 8).dataset.make_iterator();
  EXPECT_THROW(it.restore(worker1), InvalidArgumentError);
}

TEST(VirtualShardsTest, AStepJoinsEveryOwnedShardInShardOrder) {
  VirtualShards shards = read_virtual_shards(Dataset::range(64).shard(kShards, 2).batch(2), kShards,
                                             /*first=*/2, /*last=*/4);
  EXPECT_EQ(shards.plan, "input shard(s) 2-3 of 8 (the input_fn's own shard stage)");
  Iterator it = shards.dataset.make_iterator();
  EXPECT_EQ(it.next()->value().to_vector<int64_t>(), (std::vector<int64_t>{2, 10, 3, 11}));
  EXPECT_EQ(it.next()->value().to_vector<int64_t>(), (std::vector<int64_t>{18, 26, 19, 27}));
}

// A worker that steps on its own (ParameterServerStrategy) reads each of its shards to its
// end, the shards that ended leaving the others' elements to join; a shard the restored
// state has no position for (its worker never stepped) starts at its beginning.
TEST(VirtualShardsTest, AWorkerThatStepsAloneReadsUnevenShardsToTheirEnds) {
  auto shards = [] {
    return read_virtual_shards(Dataset::range(16).shard(kShards, 2).batch(1), kShards, 2, 4,
                               /*part_rows=*/false, /*to_every_end=*/true)
        .dataset.make_iterator();
  };
  Iterator it = shards();
  EXPECT_EQ(it.next()->value().to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  IteratorState state = it.save();
  IteratorState only_shard_2;
  for (const auto& [key, value] : state) {
    if (!key.starts_with("shard_3")) only_shard_2.emplace(key, value);
  }
  Iterator resumed = shards();
  resumed.restore(only_shard_2);  // shard 3 never read: from its start, one element ahead
  EXPECT_EQ(resumed.next()->value().to_vector<int64_t>(), (std::vector<int64_t>{10, 3}));
  EXPECT_EQ(resumed.next()->value().to_vector<int64_t>(), (std::vector<int64_t>{11}));
  EXPECT_FALSE(resumed.next().has_value());
}

TEST(VirtualShardsTest, APipelineThatDoesNotShardIsDividedAtItsSources) {
  Dataset pairs = Dataset::zip({Dataset::range(16), Dataset::range(100, 116).map([](Element e) {
                                  Element out;
                                  out.features.set("other", e.value());
                                  return out;
                                })});
  VirtualShards shards = read_virtual_shards(pairs.batch(2), 4, 1, 2);
  EXPECT_EQ(shards.plan, "input shard(s) 1 of 4 (divided element by element at the sources)");
  Iterator it = shards.dataset.make_iterator();
  std::optional<Element> e = it.next();
  EXPECT_EQ(e->features.at("value").to_vector<int64_t>(), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(e->features.at("other").to_vector<int64_t>(), (std::vector<int64_t>{101, 105}));
}

// Shards whose elements differ (an input_fn that builds another pipeline per index) cannot
// make one batch: one error naming both.
TEST(VirtualShardsTest, ShardsWhoseElementsDifferAreRefused) {
  Dataset mixed = Dataset::range(8).shard(2, 0).map([](Element e) {
    Element out;
    out.features.set(e.value().item<int64_t>() == 0 ? "a" : "b", e.value());
    return out;
  });
  Iterator it = read_virtual_shards(mixed, 2, 0, 2).dataset.make_iterator();
  try {
    it.next();
    ADD_FAILURE() << "joined";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("features [a] against [b]"), std::string::npos)
        << error.what();
  }
}

class VirtualShardFilesTest : public cadre::testing::TempDirTest {};

TEST_F(VirtualShardFilesTest, EnoughFilesAreDividedByFile) {
  std::vector<std::string> files;
  for (int i = 0; i < 4; ++i) {
    files.push_back(path("part-" + std::to_string(i)));
    TFRecordWriter writer(files.back());
    writer.write("file" + std::to_string(i));
    writer.close();
  }
  VirtualShards shards = read_virtual_shards(tfrecord_dataset(files), 4, 2, 4);
  EXPECT_EQ(shards.plan, "input shard(s) 2-3 of 4 (divided by files)");
  Iterator it = shards.dataset.make_iterator();
  EXPECT_EQ(tensor_bytes(it.next()->value()), "file2file3");
  EXPECT_FALSE(it.next());
}

TEST(VirtualShardsTest, ABadRangeIsRefused) {
  EXPECT_THROW(read_virtual_shards(Dataset::range(4), 4, 3, 3), InvalidArgumentError);
  EXPECT_THROW(read_virtual_shards(Dataset::range(4), 4, 0, 5), InvalidArgumentError);
  EXPECT_THROW(read_virtual_shards(Dataset::range(4), kMaxInputShards + 1, 0, 1),
               InvalidArgumentError);
  // A state that names an absurd number of shards is damaged, not a job to build.
  IteratorState state =
      read_virtual_shards(Dataset::range(4), 4, 0, 4).dataset.make_iterator().save();
  state["shards"] = Tensor::scalar(int64_t{-3});
  EXPECT_THROW(saved_virtual_shards(state), DataLossError);
  state["shards"] = Tensor::scalar(kMaxInputShards + 1);
  EXPECT_THROW(saved_virtual_shards(state), DataLossError);
  EXPECT_EQ(owned_shards(8, 3, 0), (std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_EQ(owned_shards(8, 3, 2), (std::pair<int64_t, int64_t>{5, 8}));
}

}  // namespace
}  // namespace cadre::io
