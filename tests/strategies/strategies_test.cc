// The single-host strategies: their collectives (reduce, gather, all-reduce of gradients,
// packed or not), uneven batches, the errors for bad devices, and training with Mirrored
// and CentralStorage giving what OneDevice gives on the same global batch.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "cadre/runtime/threading.h"
#include "cadre/strategies/central_storage_strategy.h"
#include "cadre/strategies/mirrored_strategy.h"
#include "cadre/strategies/one_device_strategy.h"
#include "cadre/tensor/device.h"
#include "core/base/strings.h"

namespace cadre {
namespace {

std::vector<Device> cpus(int n) {
  std::vector<Device> devices;
  for (int i = 0; i < n; ++i) devices.push_back(Device::cpu(i));
  return devices;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  EXPECT_EQ(va.size(), vb.size());
  double worst = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i)
    worst = std::max(worst, std::abs(va[i] - vb[i]));
  return worst;
}

TEST(StrategyTest, RunGivesEachReplicaItsDeviceAndThread) {
  auto strategy = MirroredStrategy::create(cpus(3));
  auto variables = strategy->create_variables(1);
  PerReplica<std::string> where = strategy->run<std::string>(*variables, [](ReplicaContext& ctx) {
    return str_cat(ctx.replica_id(), "@", default_device(), "/", ctx.num_replicas_in_sync());
  });
  EXPECT_EQ(where, (PerReplica<std::string>{"0@cpu:0/3", "1@cpu:1/3", "2@cpu:2/3"}));
}

TEST(StrategyTest, ReduceAndGather) {
  auto strategy = MirroredStrategy::create(cpus(2));
  PerReplica<Tensor> values{Tensor::from_vector<float>({1, 2}), Tensor::from_vector<float>({3, 6})};
  EXPECT_EQ(strategy->reduce(ReduceOp::kSum, values).to_vector<float>(),
            (std::vector<float>{4, 8}));
  EXPECT_EQ(strategy->reduce(ReduceOp::kMean, values).to_vector<float>(),
            (std::vector<float>{2, 4}));
  // Weighted by batch sizes 3 and 1: (3 * [1, 2] + [3, 6]) / 4.
  EXPECT_EQ(strategy->reduce(ReduceOp::kMean, values, {3, 1}).to_vector<float>(),
            (std::vector<float>{1.5, 3}));
  Tensor gathered = strategy->gather(values);
  EXPECT_EQ(gathered.to_vector<float>(), (std::vector<float>{1, 2, 3, 6}));
  EXPECT_THROW(strategy->reduce(ReduceOp::kSum, {values[0]}), InvalidArgumentError);
  EXPECT_THROW(strategy->reduce(ReduceOp::kSum, {values[0], Tensor::zeros({3})}),
               InvalidArgumentError);
}

// The cross-device ops a strategy may reduce with, by name.
std::shared_ptr<CrossDeviceOps> ops_named(const std::string& name, size_t bucket_bytes) {
  return name == "ReductionToOneDevice" ? reduction_to_one_device(Device::cpu(0), bucket_bytes)
                                        : hierarchical_copy_all_reduce(bucket_bytes);
}

// Cross-device ops x bucket sizes (none, small, the default).
class AllReduceTest : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(AllReduceTest, AllReduceInsideRunIsIdenticalOnEveryReplica) {
  auto [name, bucket] = GetParam();
  auto strategy = MirroredStrategy::create(cpus(3), ops_named(name, bucket));
  auto variables = strategy->create_variables(1);
  PerReplica<std::vector<Gradient>> out =
      strategy->run<std::vector<Gradient>>(*variables, [](ReplicaContext& ctx) {
        float r = static_cast<float>(ctx.replica_id());
        std::vector<Gradient> grads;
        for (int k = 0; k < 20; ++k) grads.push_back(Tensor::full({5, 3}, r + k));
        grads.push_back(Gradient());  // no gradient stays none
        grads.push_back(IndexedSlices{Tensor::from_vector<int64_t>({ctx.replica_id()}),
                                      Tensor::full({1, 2}, 1.0), Shape{4, 2}});
        return ctx.all_reduce(ReduceOp::kSum, grads);
      });
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(out[r].size(), 22u);
    for (int k = 0; k < 20; ++k) {
      EXPECT_EQ(out[r][k].dense().to_vector<float>(), std::vector<float>(15, 3.0f * k + 3));
      EXPECT_EQ(out[r][k].device(), Device::cpu(r));
    }
    EXPECT_FALSE(out[r][20].defined());
    EXPECT_TRUE(out[r][21].is_sparse());
    EXPECT_EQ(out[r][21].to_dense().to_vector<float>(),
              (std::vector<float>{1, 1, 1, 1, 1, 1, 0, 0}));
  }
}

// One replica too: kSum scales by the weight (a worker's share before the cross-worker sum).
TEST_P(AllReduceTest, EveryCrossDeviceOpsWeighsASingleReplica) {
  auto [name, bucket] = GetParam();
  auto ops = ops_named(name, bucket);
  auto out = ops->batch_reduce(ReduceOp::kSum, {{Tensor::full({3}, 2.0)}}, {6}, {Device::cpu(0)});
  EXPECT_EQ(out[0][0].dense().to_vector<float>(), (std::vector<float>{12, 12, 12}));
  out = ops->batch_reduce(ReduceOp::kMean, {{Tensor::full({3}, 2.0)}}, {6}, {Device::cpu(0)});
  EXPECT_EQ(out[0][0].dense().to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

INSTANTIATE_TEST_SUITE_P(
    OpsByBucket, AllReduceTest,
    ::testing::Combine(::testing::Values("ReductionToOneDevice", "HierarchicalCopyAllReduce"),
                       ::testing::Values(size_t{0}, size_t{64}, kDefaultBucketBytes)),
    [](const auto& info) {
      return std::get<0>(info.param) + "Bucket" + std::to_string(std::get<1>(info.param));
    });

TEST(StrategyTest, AFailingReplicaReleasesTheOthersAndItsErrorReachesTheCaller) {
  auto strategy = MirroredStrategy::create(cpus(2));
  auto variables = strategy->create_variables(1);
  try {
    strategy->run_replicas(*variables, [](ReplicaContext& ctx) {
      if (ctx.replica_id() == 1) throw InvalidArgumentError("replica 1 failed");
      ctx.barrier();  // would wait forever for replica 1
    });
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "replica 1 failed");
  }
}

TEST(StrategyTest, BadDevicesAreClearErrorsListingTheAvailableOnes) {
  auto expect_error = [](auto make, const std::string& fragment) {
    try {
      make();
      FAIL() << "expected InvalidArgumentError about " << fragment;
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cpu:0"), std::string::npos) << e.what();
    }
  };
  expect_error([] { MirroredStrategy::create({Device::cpu(0), Device::cpu(0)}); }, "twice");
  expect_error([] { MirroredStrategy::create({Device::cpu(999)}); }, "cpu:999");
  if (num_gpus() == 0) {
    expect_error([] { OneDeviceStrategy::create(Device::gpu(0)); }, "gpu:0");
    expect_error([] { parse_devices("cpu:0,gpu:0"); }, "gpu:0");
  }
  expect_error([] { parse_devices("cpu:0,,cpu:1"); }, "empty entry");
  expect_error([] { CentralStorageStrategy::create(cpus(2), Device::cpu(999)); }, "cpu:999");
}

// Splitting a global batch over replicas: sizes differ by at most one, and the gradient
// averaged with the replicas' batch sizes as weights is the global batch's gradient.
TEST(StrategyTest, UnevenBatchesSplitAndAverageExactly) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5}, Shape{5, 1});
  auto strategy = MirroredStrategy::create(cpus(2));
  DistributedIterator it =
      strategy
          ->distribute_dataset(Dataset::from_tensor_slices(Features{{"x", x}}, x * 3.0).batch(5))
          .make_iterator();
  auto batch = it.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ((*batch)[0].features.at("x").to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ((*batch)[1].features.at("x").to_vector<float>(), (std::vector<float>{4, 5}));
  EXPECT_FALSE(it.next().has_value());

  auto variables = strategy->create_variables(7);
  PerReplica<double> grads = strategy->run<double>(*variables, [&](ReplicaContext& ctx) {
    const Element& part = (*batch)[ctx.replica_id()];
    GradientTape tape;
    Tensor w = nn::get_variable("w", {1, 1}, nn::initializers::zeros()).read();
    Tensor loss = nn::mean_squared_error(part.labels, matmul(part.features.at("x"), w));
    auto g = tape.gradient(loss, ctx.trainable_sources());
    return ctx.all_reduce(ReduceOp::kMean, g, static_cast<double>(part.labels.dim(0)))[0]
        .dense()
        .item<double>();
  });
  // d/dw mean((3x - w x)^2) at w = 0 is -6 mean(x^2) = -6 * 55 / 5.
  EXPECT_NEAR(grads[0], -66.0, 1e-4);
  EXPECT_EQ(grads[0], grads[1]);

  DistributedIterator small =
      strategy->distribute_dataset(Dataset::from_tensor_slices(Features{{"x", x}}).batch(1))
          .make_iterator();
  EXPECT_THROW(small.next(), InvalidArgumentError);
}

// Across workers, each worker's replicas take their rows of the global batch: with 2
// workers of 2 replicas, 10 rows split 3, 3, 2, 2 and the second worker keeps 6..7 and 8..9.
TEST(StrategyTest, AGlobalBatchIsSplitOverTheReplicasOfEveryWorker) {
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, Shape{10, 1});
  io::Dataset data = Dataset::from_tensor_slices(Features{{"x", x}}).batch(10);
  std::vector<std::vector<float>> rows;
  for (int worker = 0; worker < 2; ++worker) {
    DistributedDataset dataset(data, cpus(2), /*split_batches=*/true, BatchSplit{2 * worker, 4});
    auto batch = dataset.make_iterator().next();
    ASSERT_TRUE(batch.has_value());
    for (const Element& e : *batch) rows.push_back(e.features.at("x").to_vector<float>());
  }
  EXPECT_EQ(rows, (std::vector<std::vector<float>>{{0, 1, 2}, {3, 4, 5}, {6, 7}, {8, 9}}));
  DistributedDataset too_small(Dataset::from_tensor_slices(Features{{"x", x}}).batch(3), cpus(2),
                               true, BatchSplit{2, 4});
  EXPECT_THROW(too_small.make_iterator().next(), InvalidArgumentError);
}

// Replicas on GPUs leave the host's compute threads idle: the input's autotuned prefetch
// reads ahead on a thread of its own even where the budget fills every core, where for a
// CPU replica the training thread reads the input itself. (Without a GPU the step's copy to
// gpu:0 fails once the input has been read, which is all this needs.)
TEST(StrategyTest, TheInputOfGpuReplicasIsReadAheadOnAThreadOfItsOwn) {
  if (hardware_threads() < 2) GTEST_SKIP() << "one core: no thread to read ahead on";
  set_processes_sharing_cores(hardware_threads());  // no core spare beside compute threads
  auto readers_for = [](Device device) {
    std::set<std::thread::id> readers;
    {
      Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, Shape{8, 1});
      io::Dataset data = Dataset::from_tensor_slices(Features{{"x", x}})
                             .map([&readers](Element e) {
                               readers.insert(std::this_thread::get_id());
                               return e;
                             })
                             .batch(2)
                             .prefetch();
      DistributedIterator it =
          DistributedDataset(data, {device}, /*split_batches=*/true).make_iterator();
      try {
        it.next();
      } catch (const InvalidArgumentError&) {  // gpu:0 on a machine without one
      }
    }  // the prefetch's thread has ended
    return readers;
  };
  const std::set<std::thread::id> here{std::this_thread::get_id()};
  EXPECT_EQ(readers_for(Device::cpu(0)), here);
  std::set<std::thread::id> for_gpu = readers_for(Device::gpu(0));
  EXPECT_FALSE(for_gpu.empty());
  EXPECT_EQ(for_gpu.count(std::this_thread::get_id()), 0u);
  set_processes_sharing_cores(1);
}

enum class Norm { kNone, kBatch, kSyncBatch };

// A custom training loop: the same global batches under each strategy.
std::map<std::string, Tensor> train_custom(const Strategy& strategy, int steps,
                                           Norm norm = Norm::kNone) {
  auto variables = strategy.create_variables(5);
  auto optimizer = nn::optimizers::adam(0.05);
  int n = strategy.num_replicas_in_sync();
  std::vector<float> xs(48 * 4), ys(48);
  for (int i = 0; i < 48; ++i) {
    for (int j = 0; j < 4; ++j) xs[i * 4 + j] = std::sin(0.3f * i + j);
    ys[i] = std::cos(0.2f * i);
  }
  Dataset data = Dataset::from_tensor_slices(Features{{"x", Tensor::from_vector(xs, Shape{48, 4})}},
                                             Tensor::from_vector(ys, Shape{48, 1}))
                     .repeat()
                     .batch(12);
  DistributedIterator it = strategy.distribute_dataset(data).make_iterator();
  for (int step = 0; step < steps; ++step) {
    auto inputs = it.next();
    strategy.run_replicas(*variables, [&](ReplicaContext& ctx) {
      const Element& batch = (*inputs)[ctx.replica_id()];
      GradientTape tape;
      Tensor h = nn::dense("h", batch.features.at("x"), 8, nn::tanh);
      if (norm == Norm::kBatch) h = nn::batch_norm("bn", h, /*training=*/true);
      if (norm == Norm::kSyncBatch) h = nn::sync_batch_norm("bn", h, /*training=*/true);
      Tensor loss = nn::mean_squared_error(batch.labels, nn::dense("out", h, 1));
      ctx.apply_gradients(*optimizer, tape.gradient(loss, ctx.trainable_sources()),
                          static_cast<double>(batch.labels.dim(0)));
    });
  }
  std::map<std::string, Tensor> values;
  for (nn::Variable* v : variables->primary().variables()) values[v->name()] = v->tensor();
  if (variables->mirrored()) {
    // Every copy took the same updates (but plain batch norm's moving statistics, which
    // follow each replica's own batch, as TensorFlow's on-read synchronised variables do).
    for (int r = 1; r < n; ++r) {
      for (nn::Variable* v : variables->store(r).variables()) {
        if (norm == Norm::kBatch && !v->trainable()) continue;
        EXPECT_EQ(v->tensor().to_vector<float>(), values.at(v->name()).to_vector<float>())
            << v->name() << " on replica " << r;
      }
    }
  }
  return values;
}

// The single-host strategies that replicate: Mirrored (packing into buckets, or reducing
// unpacked on one device) and CentralStorage, over 2 and 3 replicas.
enum class Kind { kMirrored, kMirroredToOneDevice, kCentralStorage };

std::shared_ptr<Strategy> make_strategy(Kind kind, int replicas) {
  switch (kind) {
    case Kind::kMirrored:
      return MirroredStrategy::create(cpus(replicas));
    case Kind::kMirroredToOneDevice:
      return MirroredStrategy::create(cpus(replicas), reduction_to_one_device(Device::cpu(0), 0));
    case Kind::kCentralStorage:
      return CentralStorageStrategy::create(cpus(replicas));
  }
  return nullptr;
}

class ReplicatedTest : public ::testing::TestWithParam<std::tuple<Kind, int>> {
 protected:
  std::shared_ptr<Strategy> strategy() const {
    return make_strategy(std::get<0>(GetParam()), std::get<1>(GetParam()));
  }
};

TEST_P(ReplicatedTest, TrainsAsOneDeviceOnTheSameGlobalBatch) {
  auto reference = train_custom(*OneDeviceStrategy::create(), 30);
  auto values = train_custom(*strategy(), 30);
  ASSERT_EQ(values.size(), reference.size());
  for (const auto& [name, value] : reference) {
    EXPECT_LT(max_abs_diff(values.at(name), value), 2e-5) << name;
  }
}

TEST_P(ReplicatedTest, SyncBatchNormNormalisesTheGlobalBatch) {
  auto reference = train_custom(*OneDeviceStrategy::create(), 20, Norm::kBatch);
  auto synced = train_custom(*strategy(), 20, Norm::kSyncBatch);
  for (const auto& [name, value] : reference) {
    EXPECT_LT(max_abs_diff(synced.at(name), value), 1e-4) << name;
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Kind, int>>& info) {
  static const char* const kNames[] = {"Mirrored", "MirroredToOneDevice", "CentralStorage"};
  return kNames[static_cast<int>(std::get<0>(info.param))] +
         std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(KindsByReplicas, ReplicatedTest,
                         ::testing::Combine(::testing::Values(Kind::kMirrored,
                                                              Kind::kMirroredToOneDevice,
                                                              Kind::kCentralStorage),
                                            ::testing::Values(2, 3)),
                         case_name);

// Plain batch norm on replicas normalises each replica's part only: not the same model.
TEST(StrategyTest, PlainBatchNormOnReplicasIsAnotherModel) {
  auto reference = train_custom(*OneDeviceStrategy::create(), 20, Norm::kBatch);
  auto local = train_custom(*MirroredStrategy::create(cpus(2)), 20, Norm::kBatch);
  EXPECT_GT(max_abs_diff(local.at("bn/moving_variance"), reference.at("bn/moving_variance")), 1e-3);
}

}  // namespace
}  // namespace cadre
