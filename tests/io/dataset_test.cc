// Semantics of the Dataset sources and transformations.
#include "cadre/io/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <set>

#include "cadre/base/errors.h"
#include "cadre/io/input_context.h"
#include "cadre/ops/math.h"
#include "tests/io/dataset_helpers.h"
#include "tests/support/fault_env.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

using test_helpers::values_of;
using V = std::vector<int64_t>;

V iota(int64_t n, int64_t start = 0) {
  V v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(DatasetTest, RangeCountsUpAndDown) {
  EXPECT_EQ(values_of(Dataset::range(5)), iota(5));
  EXPECT_EQ(values_of(Dataset::range(10, 0, -3)), (V{10, 7, 4, 1}));
  EXPECT_EQ(values_of(Dataset::range(3, 3)), V{});
  EXPECT_THROW(Dataset::range(0, 5, 0), InvalidArgumentError);
}

TEST(DatasetTest, FromTensorSlicesYieldsRowsWithLabels) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor y = Tensor::from_vector<int64_t>({7, 8, 9});
  Iterator it = Dataset::from_tensor_slices(Features{{"x", x}}, y).make_iterator();
  for (int64_t i = 0; i < 3; ++i) {
    auto e = it.next();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->features.at("x").shape(), (Shape{2}));
    EXPECT_EQ(e->features.at("x").to_vector<float>(),
              (std::vector<float>{float(2 * i + 1), float(2 * i + 2)}));
    EXPECT_EQ(e->labels.item<int64_t>(), 7 + i);
  }
  EXPECT_FALSE(it.next());
  EXPECT_FALSE(it.next());  // stays at the end

  try {
    Dataset::from_tensor_slices(Features{{"x", x}}, Tensor::from_vector<int64_t>({1, 2}));
    FAIL() << "mismatched first dimensions were accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("labels [2]"), std::string::npos) << e.what();
  }
}

TEST(DatasetTest, FromTensorsAndStrings) {
  Iterator it = Dataset::from_tensors(Element(Tensor::scalar<int64_t>(4))).make_iterator();
  EXPECT_EQ(it.next()->value().item<int64_t>(), 4);
  EXPECT_FALSE(it.next());

  std::vector<std::string> got;
  Iterator s = Dataset::from_strings({"a.rec", "bb.rec"}).make_iterator();
  while (auto e = s.next()) got.push_back(tensor_bytes(e->value()));
  EXPECT_EQ(got, (std::vector<std::string>{"a.rec", "bb.rec"}));
}

TEST(DatasetTest, GeneratorRestartsForEachIterator) {
  Dataset ds = Dataset::from_generator([i = int64_t{0}]() mutable -> std::optional<Element> {
    if (i == 4) return std::nullopt;
    return Element(Tensor::scalar<int64_t>(i++));
  });
  EXPECT_EQ(values_of(ds), iota(4));
  EXPECT_EQ(values_of(ds), iota(4));
}

TEST(DatasetTest, MapAndFilterKeepOrder) {
  Dataset ds = Dataset::range(10)
                   .map([](Element e) { return Element(e.value() * int64_t{3}); })
                   .filter([](const Element& e) { return e.value().item<int64_t>() % 2 == 0; });
  EXPECT_EQ(values_of(ds), (V{0, 6, 12, 18, 24}));
}

TEST(DatasetTest, BatchKeepsTheRemainderUnlessDropped) {
  Iterator it = Dataset::range(10).batch(4).make_iterator();
  EXPECT_EQ(it.next()->value().to_vector<int64_t>(), (V{0, 1, 2, 3}));
  EXPECT_EQ(it.next()->value().to_vector<int64_t>(), (V{4, 5, 6, 7}));
  auto last = it.next();
  EXPECT_EQ(last->value().shape(), (Shape{2}));
  EXPECT_EQ(last->value().to_vector<int64_t>(), (V{8, 9}));
  EXPECT_FALSE(it.next());

  Iterator dropped = Dataset::range(10).batch(4, /*drop_remainder=*/true).make_iterator();
  EXPECT_TRUE(dropped.next());
  EXPECT_TRUE(dropped.next());
  EXPECT_FALSE(dropped.next());
}

TEST(DatasetTest, BatchStacksFeaturesAndLabels) {
  Tensor images = Tensor::from_vector<float>(std::vector<float>(5 * 4, 1.0f), {5, 2, 2});
  Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4});
  Iterator it =
      Dataset::from_tensor_slices(Features{{"image", images}}, labels).batch(2).make_iterator();
  auto b = it.next();
  EXPECT_EQ(b->features.at("image").shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(b->labels.to_vector<int64_t>(), (V{0, 1}));
}

TEST(DatasetTest, BatchRejectsDifferentShapesNamingTheFeature) {
  Dataset ds = Dataset::range(1, 4).map([](Element e) {
    return Element(Features{{"v", Tensor::zeros({e.value().item<int64_t>()})}});
  });
  try {
    ds.batch(3).make_iterator().next();
    FAIL();
  } catch (const InvalidArgumentError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'v'"), std::string::npos) << m;
    EXPECT_NE(m.find("[1] and [2]"), std::string::npos) << m;
  }
}

TEST(DatasetTest, PaddedBatchPadsEveryDimensionToTheLargest) {
  Dataset ds = Dataset::range(1, 4).map([](Element e) {
    int64_t n = e.value().item<int64_t>();
    return Element(Tensor::full({n}, static_cast<double>(n), DType::kInt64));
  });
  Iterator it = ds.padded_batch(2, /*padding_value=*/-1).make_iterator();
  auto first = it.next();
  EXPECT_EQ(first->value().shape(), (Shape{2, 2}));
  EXPECT_EQ(first->value().to_vector<int64_t>(), (V{1, -1, 2, 2}));
  EXPECT_EQ(it.next()->value().to_vector<int64_t>(), (V{3, 3, 3}));
  EXPECT_FALSE(it.next());

  // Two dimensions: [1, 2] and [2, 1] pad to [2, 2].
  Dataset grid = Dataset::from_generator([i = 0]() mutable -> std::optional<Element> {
    if (i == 2) return std::nullopt;
    ++i;
    return Element(i == 1 ? Tensor::from_vector<float>({1, 2}, {1, 2})
                          : Tensor::from_vector<float>({3, 4}, {2, 1}));
  });
  auto g = grid.padded_batch(2).make_iterator().next();
  EXPECT_EQ(g->value().shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(g->value().to_vector<float>(), (std::vector<float>{1, 2, 0, 0, 3, 0, 4, 0}));
}

TEST(DatasetTest, UnbatchUndoesBatch) {
  EXPECT_EQ(values_of(Dataset::range(7).batch(3).unbatch()), iota(7));
}

TEST(DatasetTest, ShuffleIsASeededPermutationWithinTheBuffer) {
  V a = values_of(Dataset::range(100).shuffle(10, 7));
  V sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota(100));
  EXPECT_NE(a, iota(100));
  EXPECT_EQ(a, values_of(Dataset::range(100).shuffle(10, 7)));
  EXPECT_NE(a, values_of(Dataset::range(100).shuffle(10, 8)));
  // Element k enters the buffer after k - 9 outputs, so output i is at most i + 9.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(a[i], static_cast<int64_t>(i) + 9);
  // A buffer as large as the data can move the last element first.
  V full = values_of(Dataset::range(1000).shuffle(1000, 1));
  EXPECT_GT(full.front(), 100);
}

TEST(DatasetTest, ShuffleReshufflesEachPassOfRepeat) {
  V two = values_of(Dataset::range(20).shuffle(20, 3).repeat(2));
  ASSERT_EQ(two.size(), 40u);
  V first(two.begin(), two.begin() + 20), second(two.begin() + 20, two.end());
  EXPECT_NE(first, second);
  std::sort(second.begin(), second.end());
  EXPECT_EQ(second, iota(20));

  V same =
      values_of(Dataset::range(20).shuffle(20, 3, /*reshuffle_each_iteration=*/false).repeat(2));
  EXPECT_TRUE(std::equal(same.begin(), same.begin() + 20, same.begin() + 20));
}

TEST(DatasetTest, RepeatTakeAndSkip) {
  EXPECT_EQ(values_of(Dataset::range(3).repeat(2)), (V{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(values_of(Dataset::range(3).repeat().take(7)), (V{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(values_of(Dataset::range(0).repeat()), V{});  // an empty pass ends it
  EXPECT_EQ(values_of(Dataset::range(10).skip(3).take(4)), (V{3, 4, 5, 6}));
  EXPECT_EQ(values_of(Dataset::range(4).take(-1)), iota(4));
  EXPECT_EQ(values_of(Dataset::range(4).skip(-1)), V{});
  EXPECT_EQ(values_of(Dataset::range(4).skip(9)), V{});
}

TEST(DatasetTest, ShardsAreDisjointAndCoverTheInput) {
  EXPECT_EQ(values_of(Dataset::range(10).shard(3, 1)), (V{1, 4, 7}));
  std::multiset<int64_t> all;
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t v : values_of(Dataset::range(23).shard(4, i))) all.insert(v);
  }
  EXPECT_EQ(V(all.begin(), all.end()), iota(23));  // each value exactly once
  EXPECT_THROW(Dataset::range(3).shard(2, 2), InvalidArgumentError);
  EXPECT_THROW(Dataset::range(3).shard(0, 0), InvalidArgumentError);
}

// Expected orders are what tf.data produces for the same pipelines (TensorFlow 2.15).
TEST(DatasetTest, InterleaveFollowsTfDataOrder) {
  auto three = [](const Element& e) {
    int64_t x = e.value().item<int64_t>();
    return Dataset::range(10 * x, 10 * x + 3);
  };
  EXPECT_EQ(values_of(Dataset::range(3).interleave(three, 2, 1)),
            (V{0, 10, 1, 11, 2, 12, 20, 21, 22}));
  EXPECT_EQ(values_of(Dataset::range(3).interleave(three, 2, 2)),
            (V{0, 1, 10, 11, 2, 12, 20, 21, 22}));
  auto growing = [](const Element& e) {
    int64_t x = e.value().item<int64_t>();
    return Dataset::range(10 * x, 10 * x + x + 1);
  };
  EXPECT_EQ(values_of(Dataset::range(4).interleave(growing, 3, 2)),
            (V{0, 10, 11, 20, 21, 30, 31, 22, 32, 33}));
}

TEST(DatasetTest, ZipEnumerateConcatenate) {
  Dataset labels = Dataset::range(100, 103).map([](Element e) { return Element({}, e.value()); });
  Iterator it = Dataset::zip({Dataset::range(5), labels}).enumerate(10).make_iterator();
  for (int64_t i = 0; i < 3; ++i) {
    auto e = it.next();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->features.at("value").item<int64_t>(), i);
    EXPECT_EQ(e->features.at("index").item<int64_t>(), 10 + i);
    EXPECT_EQ(e->labels.item<int64_t>(), 100 + i);
  }
  EXPECT_FALSE(it.next());  // the shortest input ends the zip

  EXPECT_THROW(Dataset::zip({Dataset::range(2), Dataset::range(2)}).make_iterator().next(),
               InvalidArgumentError);
  EXPECT_EQ(values_of(Dataset::range(2).concatenate(Dataset::range(5, 7))), (V{0, 1, 5, 6}));
}

TEST(DatasetTest, PrefetchAndParallelMapYieldTheSameElements) {
  auto square = [](Element e) { return Element(e.value() * e.value()); };
  V expected = values_of(Dataset::range(200).map(square));
  EXPECT_EQ(values_of(Dataset::range(200).map(square, 4).prefetch(3)), expected);
  EXPECT_EQ(values_of(Dataset::range(200).map(square, kAutotune).prefetch()), expected);
  V unordered = values_of(Dataset::range(200).map(square, 4, /*deterministic=*/false));
  std::sort(unordered.begin(), unordered.end());
  EXPECT_EQ(unordered, expected);
}

TEST(DatasetTest, CacheInMemoryReadsTheInputOnce) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  Dataset ds = Dataset::range(5).map([calls](Element e) {
    ++*calls;
    return e;
  });
  EXPECT_EQ(values_of(ds.cache().repeat(3)), (V{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  EXPECT_EQ(calls->load(), 5);
}

class DatasetFileTest : public cadre::testing::TempDirTest {};

TEST_F(DatasetFileTest, CacheToFileIsReadByLaterDatasets) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto make = [&] {
    return Dataset::range(4).map([calls](Element e) {
      ++*calls;
      return Element(Features{{"x", e.value()}}, e.value() + int64_t{1});
    });
  };
  std::string file = path("cache");
  auto labels_of = [](const Dataset& ds) {
    V out;
    Iterator it = ds.make_iterator();
    while (auto e = it.next()) out.push_back(e->labels.item<int64_t>());
    return out;
  };
  // A pass that stops early publishes nothing.
  make().cache(file).make_iterator().next();
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_EQ(labels_of(make().cache(file).repeat(2)), (V{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_TRUE(std::filesystem::exists(file));
  int after_first = calls->load();
  EXPECT_EQ(labels_of(make().cache(file)), (V{1, 2, 3, 4}));  // a new dataset, same file
  EXPECT_EQ(calls->load(), after_first);
}

TEST_F(DatasetFileTest, TheFileCacheIsWrittenAndPublishedThroughItsEnv) {
  auto env = std::make_shared<cadre::testing::FaultEnv>();
  std::string file = path("cache");
  auto drain = [](const Dataset& ds) {
    Iterator it = ds.make_iterator();
    int n = 0;
    while (it.next()) ++n;
    return n;
  };
  env->fail_from(-1);
  EXPECT_EQ(drain(Dataset::range(3).cache(file, env)), 3);
  std::vector<std::string> log = env->log();
  EXPECT_EQ(log.front(), "open cache.partial");
  EXPECT_EQ(log.back(), "rename cache.partial cache");
  // A publish that fails leaves no cache under the final name: the next pass reads the input.
  std::filesystem::remove(file);
  env->fail_from(static_cast<int>(log.size()) - 1);
  EXPECT_THROW(drain(Dataset::range(3).cache(file, env)), UnavailableError);
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST(DatasetTest, IteratorOutlivesItsDataset) {
  Iterator it = Dataset::range(3).map([](Element e) { return e; }, 2).prefetch(1).make_iterator();
  EXPECT_EQ(it.next()->value().item<int64_t>(), 0);
  Iterator moved = std::move(it);
  EXPECT_EQ(moved.next()->value().item<int64_t>(), 1);
}

TEST(DatasetTest, FeaturesNameWhatIsMissing) {
  Features f{{"b", Tensor::scalar<int64_t>(1)}, {"a", Tensor::scalar<int64_t>(2)}};
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b"}));
  try {
    f.at("image");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'image'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[a, b]"), std::string::npos);
  }
  EXPECT_THROW((Features{{"a", Tensor()}, {"a", Tensor()}}), InvalidArgumentError);
}

TEST(DatasetTest, FeaturesStayInNameOrderThroughInsertsAndErases) {
  auto scalar = [](int64_t v) { return Tensor::scalar<int64_t>(v); };
  auto values = [](const Features& f) {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto& [name, t] : f) out.emplace_back(name, t.item<int64_t>());
    return out;
  };
  using Items = std::vector<std::pair<std::string, int64_t>>;
  Features f;
  for (auto [name, v] : Items{{"c", 3}, {"a", 1}, {"d", 4}, {"b", 2}, {"e", 5}})
    f.set(name, scalar(v));
  EXPECT_EQ(values(f), (Items{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}, {"e", 5}}));
  f.set("c", scalar(30));  // replaces
  Features copy = f;
  EXPECT_TRUE(f.erase("a"));
  EXPECT_TRUE(f.erase("e"));
  EXPECT_TRUE(f.erase("c"));
  EXPECT_FALSE(f.erase("c"));
  EXPECT_EQ(values(f), (Items{{"b", 2}, {"d", 4}}));
  f.set("a", scalar(1));
  EXPECT_EQ(values(f), (Items{{"a", 1}, {"b", 2}, {"d", 4}}));
  EXPECT_EQ(copy.at("c").item<int64_t>(), 30);
  EXPECT_EQ(copy.size(), 5u);
  Features moved = std::move(copy);
  EXPECT_EQ(moved.size(), 5u);
}

TEST(InputContextTest, SplitsTheGlobalBatch) {
  InputContext ctx{.num_input_pipelines = 2, .input_pipeline_id = 1, .num_replicas_in_sync = 4};
  EXPECT_EQ(ctx.per_replica_batch_size(256), 64);
  EXPECT_THROW(ctx.per_replica_batch_size(254), InvalidArgumentError);
}

}  // namespace
}  // namespace cadre::io
