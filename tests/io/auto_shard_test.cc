// Auto-sharding: each worker's part of a pipeline, per policy.
#include "io/auto_shard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "cadre/base/errors.h"
#include "cadre/io/tfrecord.h"
#include "tests/io/dataset_helpers.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

using test_helpers::values_of;
using V = std::vector<int64_t>;

// The records of every worker's part, as strings.
std::vector<std::string> records_of(const Dataset& dataset) {
  std::vector<std::string> out;
  Iterator it = dataset.make_iterator();
  while (auto e = it.next()) out.push_back(tensor_bytes(e->value()));
  return out;
}

// Every worker's part is disjoint from the others' and together they are the whole input.
void expect_partition(const std::vector<std::vector<std::string>>& parts,
                      std::vector<std::string> whole) {
  std::vector<std::string> joined;
  for (const auto& part : parts) joined.insert(joined.end(), part.begin(), part.end());
  std::sort(joined.begin(), joined.end());
  std::sort(whole.begin(), whole.end());
  EXPECT_EQ(joined, whole);
}

class AutoShardTest : public cadre::testing::TempDirTest {
 protected:
  // `files` TFRecord files named part-<i>.tfrecord of `records` records "f<i>r<j>".
  std::vector<std::string> write_files(int files, int records) {
    std::vector<std::string> paths;
    for (int i = 0; i < files; ++i) {
      paths.push_back(path("part-" + std::to_string(i) + ".tfrecord"));
      TFRecordWriter writer(paths.back());
      for (int j = 0; j < records; ++j)
        writer.write("f" + std::to_string(i) + "r" + std::to_string(j));
      writer.close();
    }
    return paths;
  }
};

TEST_F(AutoShardTest, FileSourcesAreDividedByFile) {
  std::vector<std::string> files = write_files(4, 3);
  Dataset whole = tfrecord_dataset(files).shuffle(100, 7).prefetch(2);
  std::vector<std::vector<std::string>> parts;
  for (int w = 0; w < 2; ++w) {
    ShardedDataset sharded = auto_shard(whole, 2, w);
    EXPECT_NE(sharded.plan.find("FILE: 2 of 4 files"), std::string::npos) << sharded.plan;
    parts.push_back(records_of(sharded.dataset));
    for (const std::string& r : parts.back()) {
      int file = r[1] - '0';
      EXPECT_EQ(file % 2, w) << r << " read by worker " << w;
    }
  }
  expect_partition(parts, records_of(whole));
}

TEST_F(AutoShardTest, ListedFilesAreDividedBeforeTheyAreInterleaved) {
  write_files(3, 2);
  Dataset whole =
      Dataset::list_files(path("part-*.tfrecord"))
          .interleave(
              [](const Element& name) { return tfrecord_dataset({tensor_bytes(name.value())}); },
              /*cycle_length=*/2);
  std::vector<std::vector<std::string>> parts;
  for (int w = 0; w < 3; ++w) {
    ShardedDataset sharded = auto_shard(whole, 3, w);
    EXPECT_NE(sharded.plan.find("part-" + std::to_string(w) + ".tfrecord"), std::string::npos)
        << sharded.plan;
    parts.push_back(records_of(sharded.dataset));
    EXPECT_EQ(parts.back().size(), 2u);
  }
  expect_partition(parts, records_of(whole));
}

TEST_F(AutoShardTest, AutoFallsBackToDataWithTooFewFiles) {
  std::vector<std::string> files = write_files(1, 5);
  Dataset whole = tfrecord_dataset(files);
  std::vector<std::vector<std::string>> parts;
  for (int w = 0; w < 2; ++w) {
    ShardedDataset sharded = auto_shard(whole, 2, w);
    EXPECT_NE(sharded.plan.find("DATA"), std::string::npos) << sharded.plan;
    EXPECT_NE(sharded.plan.find("reads 1 file(s), fewer than the 2 workers"), std::string::npos)
        << sharded.plan;
    parts.push_back(records_of(sharded.dataset));
  }
  EXPECT_EQ(parts[0].size(), 3u);
  expect_partition(parts, records_of(whole));
}

TEST_F(AutoShardTest, FilePolicyNamesWhyItCannotShard) {
  std::vector<std::string> files = write_files(1, 2);
  DatasetOptions options;
  options.auto_shard_policy = AutoShardPolicy::kFile;
  try {
    auto_shard(tfrecord_dataset(files).with_options(options), 2, 0);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'tfrecord' stage reads 1 file(s)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(auto_shard(Dataset::range(10).with_options(options), 2, 0), InvalidArgumentError);
}

TEST(AutoShardDataTest, DataKeepsEveryNthElementAndMapsOnlyThose) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  Dataset whole = Dataset::range(12)
                      .batch(2)
                      .map([calls](Element e) {
                        ++*calls;
                        return e;
                      })
                      .prefetch(2);
  DatasetOptions options;
  options.auto_shard_policy = AutoShardPolicy::kData;
  ShardedDataset sharded = auto_shard(whole.with_options(options), 3, 1);
  EXPECT_NE(sharded.plan.find("DATA: elements 1, 4, 7, ... of the 'batch' stage"),
            std::string::npos)
      << sharded.plan;
  std::vector<V> batches;
  Iterator it = sharded.dataset.make_iterator();
  while (auto e = it.next()) batches.push_back(e->value().to_vector<int64_t>());
  EXPECT_EQ(batches, (std::vector<V>{{2, 3}, {8, 9}}));
  // The shard sits below the map: only this worker's two batches were mapped.
  EXPECT_EQ(calls->load(), 2);
}

TEST(AutoShardDataTest, AnInputFnThatShardsItselfIsLeftAlone) {
  Dataset own = Dataset::range(10).shard(2, 1).batch(2);
  ShardedDataset sharded = auto_shard(own, 2, 1);
  EXPECT_EQ(values_of(sharded.dataset.unbatch()), (V{1, 3, 5, 7, 9}));
  EXPECT_NE(sharded.plan.find("shards by itself: shard(2, 1)"), std::string::npos);
}

TEST(AutoShardDataTest, OffReadsEverythingAndOptionsNearestTheOutputWin) {
  DatasetOptions off, data;
  off.auto_shard_policy = AutoShardPolicy::kOff;
  data.auto_shard_policy = AutoShardPolicy::kData;
  EXPECT_EQ(values_of(auto_shard(Dataset::range(4).with_options(off), 2, 1).dataset),
            (V{0, 1, 2, 3}));
  Dataset both = Dataset::range(4).with_options(off).with_options(data);
  EXPECT_EQ(values_of(auto_shard(both, 2, 1).dataset), (V{1, 3}));
  // One worker reads everything, whatever the policy.
  EXPECT_EQ(values_of(auto_shard(Dataset::range(3).with_options(data), 1, 0).dataset),
            (V{0, 1, 2}));
  EXPECT_THROW(auto_shard(Dataset::range(3), 2, 2), InvalidArgumentError);
}

TEST_F(AutoShardTest, ZippedSourcesStayAligned) {
  // Two sources sharded by DATA at the output: rows stay paired.
  Dataset a = Dataset::range(6), b = Dataset::range(100, 106);
  Dataset zipped = Dataset::zip({a.map([](Element e) {
                                   return Element({{"a", e.value()}});
                                 }),
                                 b.map([](Element e) {
                                   return Element({{"b", e.value()}});
                                 })});
  Iterator it = auto_shard(zipped, 2, 1).dataset.make_iterator();
  std::vector<std::pair<int64_t, int64_t>> pairs;
  while (auto e = it.next()) {
    pairs.emplace_back(e->features.at("a").item<int64_t>(), e->features.at("b").item<int64_t>());
  }
  EXPECT_EQ(pairs, (std::vector<std::pair<int64_t, int64_t>>{{1, 101}, {3, 103}, {5, 105}}));
}

TEST_F(AutoShardTest, AMemoryCacheIsRebuiltAndAFileCacheHidesItsInput) {
  std::vector<std::string> files = write_files(2, 2);
  Dataset cached = tfrecord_dataset(files).cache();
  EXPECT_EQ(records_of(cached).size(), 4u);  // fills the original's cache
  EXPECT_EQ(records_of(auto_shard(cached, 2, 0).dataset),
            (std::vector<std::string>{"f0r0", "f0r1"}));
  Dataset on_disk = tfrecord_dataset(files).cache(path("cache"));
  ShardedDataset sharded = auto_shard(on_disk, 2, 0);
  EXPECT_NE(sharded.plan.find("DATA"), std::string::npos) << sharded.plan;
  EXPECT_EQ(records_of(sharded.dataset).size(), 2u);
}

TEST_F(AutoShardTest, ARewrittenPipelineSavesAndRestoresItsPosition) {
  std::vector<std::string> files = write_files(4, 4);
  Dataset part = auto_shard(tfrecord_dataset(files).shuffle(8, 3), 2, 1).dataset;
  Iterator first = part.make_iterator();
  for (int i = 0; i < 3; ++i) first.next();
  IteratorState state = first.save();
  std::vector<std::string> rest;
  while (auto e = first.next()) rest.push_back(tensor_bytes(e->value()));
  Iterator second = part.make_iterator();
  second.restore(state);
  std::vector<std::string> again;
  while (auto e = second.next()) again.push_back(tensor_bytes(e->value()));
  EXPECT_EQ(again, rest);
  EXPECT_EQ(rest.size(), 5u);
}

}  // namespace
}  // namespace cadre::io
