// NCCL collectives: their errors on any machine; a single-rank communicator (joined
// directly and through the coordination service), an abandoned join that times out and
// aborts, a communicator left behind by an error, gradient buckets queued on the
// communicator's stream, and NcclAllReduce over the local GPUs, where a GPU is present.
#include <gtest/gtest.h>

#include <chrono>

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/random.h"
#include "cadre/ops/reduce.h"
#include "cadre/strategies/cross_device_ops.h"
#include "strategies/cluster/coordination_service.h"
#include "strategies/collectives/nccl/collective.h"
#include "strategies/collectives/nccl/local_group.h"
#include "strategies/gradient_buckets.h"
#include "tests/support/job_secret.h"

namespace cadre {
namespace {

class NcclGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!nccl_available()) GTEST_SKIP() << "built without CUDA";
    if (num_gpus() == 0) GTEST_SKIP() << "no GPU on this machine";
  }
};

TEST(NcclTest, ErrorsNameTheProblemOnAnyMachine) {
  if (!nccl_available()) {
    EXPECT_THROW(nccl_all_reduce(), UnimplementedError);
    EXPECT_THROW(nccl_unique_id(), UnimplementedError);
    return;
  }
  // Making an id needs no GPU: it is what rank 0 publishes through the coordination service.
  std::string id = nccl_unique_id();
  EXPECT_EQ(id.size(), 128u);
  EXPECT_NE(id, nccl_unique_id());
  // A CPU device, or a GPU this machine lacks: InvalidArgument naming it.
  try {
    nccl_collective(std::string(128, '\0'), 0, 1, Device::cpu(0));
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("cpu:0"), std::string::npos) << e.what();
  }
  std::string missing = "gpu:" + std::to_string(num_gpus());
  try {
    local_nccl_group({Device::gpu(num_gpus())});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  auto ops = nccl_all_reduce();
  EXPECT_EQ(ops->name(), "NcclAllReduce");
  PerReplica<std::vector<Gradient>> values = {{Gradient(Tensor::ones({3}))}};
  EXPECT_THROW(ops->batch_reduce(ReduceOp::kSum, values, {1.0}, {Device::cpu(0)}),
               InvalidArgumentError);
}

TEST_F(NcclGpuTest, SingleRankAllReduceAndBroadcast) {
  auto collective = nccl_collective(nccl_unique_id(), 0, 1, Device::gpu(0));
  EXPECT_EQ(collective->rank(), 0);
  EXPECT_EQ(collective->size(), 1);
  Tensor host = random_normal({1000});
  Tensor x = host.to(Device::gpu(0));
  collective->sum(x);
  EXPECT_EQ(x.to_vector<float>(), host.to_vector<float>());
  Tensor d = cast(host, DType::kFloat64).to(Device::gpu(0));
  collective->sum(static_cast<double*>(d.raw_data()), 1000);
  collective->broadcast(d.raw_data(), d.nbytes(), 0);
  EXPECT_EQ(d.to_vector<double>(), cast(host, DType::kFloat64).to_vector<double>());
  collective->abort("the test is done");
  EXPECT_THROW(collective->sum(x), AbortedError);
}

TEST_F(NcclGpuTest, UniqueIdThroughTheCoordinationService) {
  auto service =
      CoordinationService::start("127.0.0.1:0", {{"worker", 0}}, {}, testing::test_security());
  auto client =
      CoordinationClient::connect(service->address(), {"worker", 0}, {}, testing::test_security());
  client->register_task(10);
  NcclOptions options;
  options.timeout_seconds = 30;
  auto collective = nccl_collective(*client, 0, 1, Device::gpu(0), options);
  Tensor x = Tensor::ones({64}, DType::kFloat32, Device::gpu(0));
  collective->sum(x);
  EXPECT_EQ(sum(x).item<float>(), 64.f);
}

TEST_F(NcclGpuTest, AJoinThatNobodyCompletesTimesOutAndAborts) {
  NcclOptions options;
  options.timeout_seconds = 3;
  auto start = std::chrono::steady_clock::now();
  // Rank 0 of 2; rank 1 never comes.
  EXPECT_THROW(nccl_collective(nccl_unique_id(), 0, 2, Device::gpu(0), options),
               DeadlineExceededError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  // A reported peer failure aborts the wait at once.
  options.timeout_seconds = 300;
  options.peer_failure = [] { return std::string("worker:1 stopped sending heartbeats"); };
  try {
    nccl_collective(nccl_unique_id(), 0, 2, Device::gpu(0), options);
    FAIL();
  } catch (const AbortedError& e) {
    EXPECT_NE(std::string(e.what()).find("worker:1"), std::string::npos) << e.what();
  }
}

// A communicator that goes out of scope while an error unwinds is aborted, not finalized
// (a peer may wait in a collective this rank never joins): the process goes on, and the
// next communicator on the GPU works.
TEST_F(NcclGpuTest, ACommunicatorLeftBehindByAnErrorIsAbortedAndTheNextOneWorks) {
  try {
    auto collective = nccl_collective(nccl_unique_id(), 0, 1, Device::gpu(0));
    Tensor x = Tensor::ones({64}, DType::kFloat32, Device::gpu(0));
    collective->sum(x);
    throw InternalError("the step failed");
  } catch (const InternalError&) {
  }
  auto collective = nccl_collective(nccl_unique_id(), 0, 1, Device::gpu(0));
  Tensor x = Tensor::ones({64}, DType::kFloat32, Device::gpu(0));
  collective->sum(x);
  EXPECT_EQ(sum(x).item<float>(), 64.f);
}

// The host side of a job of one process, for the buckets' order.
class OneProcess : public ProcessCollective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Device device() const override { return Device::cpu(0); }
  const char* transport() const override { return "one process"; }
  void sum(float*, size_t) override {}
  void sum(double*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
};

// Buckets on the GPU, summed by a one-rank communicator: queued on its stream as they fill
// (a large kernel in pieces, built by rows), or all after the pass; either way the sums are
// the gradients times the worker's scale, bit for bit, with the extras, over steps that
// lay the buckets out again in the order the gradients came.
TEST_F(NcclGpuTest, GradientBucketsQueuedOnTheCommunicatorsStreamSumTheGradients) {
  const std::vector<Shape> shapes{{300, 64}, {64}, {64, 10}, {10}};
  std::vector<Tensor> host, sources;
  for (const Shape& shape : shapes) {
    host.push_back(random_normal(shape));
    sources.push_back(host.back().to(Device::gpu(0)));
  }
  for (bool overlap : {false, true}) {
    auto gpus = nccl_collective(nccl_unique_id(), 0, 1, Device::gpu(0));
    OneProcess one;
    BucketOptions options{
        .bucket_bytes = 4096, .first_bucket_bytes = 1024, .piece_bytes = 16384, .overlap = overlap};
    GradientBuckets buckets(*gpus, one, options);
    for (int step = 0; step < 3; ++step) {
      buckets.begin(sources, {0.5, 3.0}, {}, /*scale=*/0.25);
      // The bias before its kernel, as a fused layer's backward gives them.
      for (size_t i : {3, 2, 1, 0}) buckets.ready(i, Gradient(sources[i]));
      std::vector<double> extras;
      std::vector<Gradient> sums = buckets.finish(extras);
      EXPECT_EQ(extras, (std::vector<double>{0.5, 3.0}));
      for (size_t i = 0; i < shapes.size(); ++i) {
        Tensor got = sums[i].dense();
        EXPECT_EQ(got.device(), Device::gpu(0));
        EXPECT_EQ(got.shape(), shapes[i]);
        EXPECT_EQ(got.to(Device::cpu(0)).to_vector<float>(), (host[i] * 0.25).to_vector<float>())
            << "source " << i << ", step " << step << (overlap ? ", queued" : ", after the pass");
      }
    }
  }
}

TEST_F(NcclGpuTest, NcclAllReduceOverTheLocalGpus) {
  std::vector<Device> devices;
  for (int i = 0; i < num_gpus(); ++i) devices.push_back(Device::gpu(i));
  auto ops = nccl_all_reduce(/*bucket_bytes=*/4096);
  PerReplica<std::vector<Gradient>> values;
  std::vector<Tensor> expected(3);
  std::vector<double> weights;
  for (size_t r = 0; r < devices.size(); ++r) {
    std::vector<Gradient> replica;
    for (int i = 0; i < 3; ++i) {
      Tensor host = random_normal({i == 2 ? 5000 : 17, 3});
      replica.push_back(Gradient(host.to(devices[r])));
      double w = 1.0 + r;
      expected[i] = expected[i].defined() ? expected[i] + host * w : host * w;
    }
    values.push_back(replica);
    weights.push_back(1.0 + r);
  }
  auto summed = ops->batch_reduce(ReduceOp::kSum, values, weights, devices);
  for (size_t r = 0; r < devices.size(); ++r) {
    for (int i = 0; i < 3; ++i) {
      Tensor got = summed[r][i].dense();
      EXPECT_EQ(got.device(), devices[r]);
      std::vector<float> a = got.to_vector<float>(), b = expected[i].to_vector<float>();
      for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 1e-4 * (1 + std::abs(b[k])));
    }
  }
}

}  // namespace
}  // namespace cadre
