// The CUDA backend as a whole: memory, errors, transfers, a graph of many ops and its
// gradients, each on gpu:0 against cpu:0 (training runs of the example models are in
// tests/integration/cuda_training_test.cc). Skipped on machines without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/nn.h"
#include "cadre/ops/reduce.h"
#include "cadre/runtime/precision.h"
#include "core/kernels/transfer.h"
#include "tests/core/cuda_test_util.h"

namespace cadre {
namespace {

using testing::CudaTest;
using testing::kGpu;
using testing::kHost;

void expect_close(const Tensor& gpu, const Tensor& cpu, double tolerance) {
  ASSERT_EQ(gpu.device(), kGpu);
  EXPECT_TRUE(testing::matches(gpu, cpu, tolerance, tolerance));
}

TEST_F(CudaTest, CopiesAndFills) {
  Tensor host = random_normal({37, 19});
  Tensor device = host.to(kGpu);
  EXPECT_EQ(device.to_vector<float>(), host.to_vector<float>());
  // Strided copy on the device: a transposed view made contiguous.
  expect_close(device.t().contiguous(), host.t().contiguous(), 0);
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt8,
                      DType::kBool, DType::kBFloat16, DType::kFloat16}) {
    Tensor filled = Tensor::full(Shape{5, 3}, 1.0, dtype, kGpu);
    EXPECT_EQ(filled.to_vector<double>(), std::vector<double>(15, 1.0)) << dtype;
  }
  EXPECT_GT(memory_stats(kGpu).bytes_in_use, 0);
}

TEST_F(CudaTest, UnknownGpuListsDevices) {
  try {
    parse_device("gpu:" + std::to_string(num_gpus()));
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu:0"), std::string::npos) << e.what();
  }
}

TEST_F(CudaTest, MemoryStatisticsFollowAllocations) {
  reset_peak_memory(kGpu);
  AllocatorStats before = memory_stats(kGpu);
  {
    Tensor big = Tensor::zeros({64, 1024, 1024}, DType::kFloat32, kGpu);  // 256 MiB
    AllocatorStats during = memory_stats(kGpu);
    EXPECT_GE(during.bytes_in_use - before.bytes_in_use, int64_t{256} << 20);
    EXPECT_GE(during.peak_bytes_in_use, during.bytes_in_use);
  }
  AllocatorStats after = memory_stats(kGpu);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_GE(after.peak_bytes_in_use - before.bytes_in_use, int64_t{256} << 20);
  // The freed block is reused, not given back and allocated again.
  int64_t system_allocations = after.num_system_allocations;
  Tensor again = Tensor::zeros({64, 1024, 1024}, DType::kFloat32, kGpu);
  EXPECT_EQ(memory_stats(kGpu).num_system_allocations, system_allocations);
}

TEST_F(CudaTest, OutOfMemoryIsResourceExhaustedAndTheDeviceStillWorks) {
  try {
    Tensor::empty({int64_t{1} << 30, int64_t{1} << 12}, DType::kFloat32, kGpu);  // 16 TiB
    FAIL() << "16 TiB were allocated";
  } catch (const ResourceExhaustedError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("gpu:0"), std::string::npos) << message;
    EXPECT_NE(message.find("bytes in use"), std::string::npos) << message;
    EXPECT_NE(message.find("shape [1073741824, 4096]"), std::string::npos) << message;
  }
  Tensor x = random_normal({100}).to(kGpu);
  expect_close(sum(x * 2.0), sum(x.to(kHost) * 2.0), 1e-5);
}

TEST_F(CudaTest, AsyncTransfersAreOrderedWithComputation) {
  Tensor host = random_normal({1024, 1024});
  Tensor pinned = empty_pinned(host.shape(), DType::kFloat32);
  pinned.assign(host);
  AsyncCopy up = to_device_async(pinned, kGpu);
  // Used at once: the compute stream waits for the copy.
  Tensor doubled = up.tensor * 2.0;
  up.transfer.wait();
  expect_close(doubled, host * 2.0, 0);
  // A device-to-host copy reads the value as queued; a later in-place update waits for it.
  Tensor out = empty_pinned(host.shape(), DType::kFloat32);
  Transfer down = to_host_async(doubled, out);
  doubled.assign(Tensor::zeros(host.shape(), DType::kFloat32, kGpu));
  down.wait();
  EXPECT_EQ(out.to_vector<float>(), (host * 2.0).to_vector<float>());
  EXPECT_EQ(sum(doubled).item<float>(), 0.f);
}

// A loss built from most ops (convolution, batch norm, pooling, dense layers, every
// activation, where, clip, dropout, gather, softmax cross-entropy, reductions), and its
// gradients with respect to every input.
std::vector<Tensor> loss_and_gradients(const std::vector<Tensor>& host_inputs, Device device) {
  DeviceScope scope(device);
  std::vector<Tensor> in;
  for (const Tensor& t : host_inputs) in.push_back(t.to(device));
  GradientTape tape;
  for (const Tensor& t : in) tape.watch(t);
  const Tensor &images = in[0], &filters = in[1], &conv_bias = in[2], &gamma = in[3], &beta = in[4],
               &w1 = in[5], &b1 = in[6], &w2 = in[7], &embedding = in[8];
  Tensor y = conv2d(images, filters, conv_bias, {1, 1}, Padding::kSame, {1, 1}, Activation::kRelu);
  y = batch_norm_training(y, gamma, beta, 1e-3).y;
  y = max_pool2d(y, {2, 2}, {2, 2});
  y = avg_pool2d(y, {3, 3}, {1, 1}, Padding::kSame);
  Tensor h = linear(reshape(y, {8, -1}), w1, b1, Activation::kTanh);
  h = gelu(h) + sigmoid(h) * elu(h) - softplus(h) * 0.1 + leaky_relu(h);
  h = clip_by_value(h, -3, 3) + where(greater(h, scalar_like(h, 0)), square(h), exp(h) * 0.5);
  Generator dropout_stream(3, 4);
  h = dropout(h, 0.2, &dropout_stream);
  Tensor ids = cast(Tensor::from_vector<double>({1, 5, 5, 19, 0, 7, 3, 2}), DType::kInt64);
  Tensor logits = matmul(h, w2) + gather(embedding, ids.to(device));
  Tensor labels = cast(Tensor::from_vector<double>({0, 9, 3, 3, 1, 8, 2, 7}), DType::kInt32);
  Tensor loss = mean(sparse_softmax_cross_entropy_with_logits(labels.to(device), logits)) +
                sum(square(log_softmax(logits))) * 0.01 + mean(max(logits, {1})) * 0.1 +
                mean(softmax(logits) * logits);
  std::vector<Tensor> out = {loss.to(kHost)};
  for (const Gradient& g : tape.gradient(loss, in)) out.push_back(g.to_dense().to(kHost));
  return out;
}

TEST_F(CudaTest, GraphOfManyOpsAndItsGradientsMatchTheCpu) {
  std::vector<Shape> shapes = {{8, 12, 12, 3}, {3, 3, 3, 6}, {6},      {6},     {6},
                               {216, 16},      {16},         {16, 10}, {20, 10}};
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    inputs.push_back(testing::random_values(shapes[i], DType::kFloat32, 100 + i, false) * 0.25);
  }
  inputs[3] = inputs[3] + 1.0;  // gamma near 1
  std::vector<Tensor> gpu = loss_and_gradients(inputs, kGpu);
  std::vector<Tensor> cpu = loss_and_gradients(inputs, kHost);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) {
    testing::Both b{cpu[i], gpu[i].to(kGpu)};
    EXPECT_TRUE(testing::matches_scaled(b, 2e-4)) << (i == 0 ? "loss" : "gradient ") << i;
  }
}

}  // namespace
}  // namespace cadre
