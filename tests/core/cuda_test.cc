// The CUDA backend against the CPU: skipped on machines without a GPU.
#include <gtest/gtest.h>

#include "core/ops/array.h"
#include "core/ops/linalg.h"
#include "core/ops/random.h"
#include "core/tensor/device_backend.h"

namespace cadre {
namespace {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (num_gpus() == 0) GTEST_SKIP() << "no GPU on this machine";
  }
};

void expect_close(const Tensor& gpu, const Tensor& cpu, double tolerance) {
  ASSERT_EQ(gpu.device(), Device::gpu(0));
  std::vector<double> a = gpu.to_vector<double>(), b = cpu.to_vector<double>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tolerance * std::max(1.0, std::abs(b[i]))) << "element " << i;
  }
}

TEST_F(CudaTest, CopiesAndFills) {
  Tensor host = random_normal({37, 19});
  Tensor device = host.to(Device::gpu(0));
  EXPECT_EQ(device.to_vector<float>(), host.to_vector<float>());
  // Strided copy on the device: a transposed view made contiguous.
  expect_close(device.t().contiguous(), host.t().contiguous(), 0);
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt8,
                      DType::kBool, DType::kBFloat16, DType::kFloat16}) {
    Tensor filled = Tensor::full(Shape{5, 3}, 1.0, dtype, Device::gpu(0));
    EXPECT_EQ(filled.to_vector<double>(), std::vector<double>(15, 1.0)) << dtype;
  }
  AllocatorStats stats = device_backend(DeviceType::kGPU)->allocator(0).stats();
  EXPECT_GT(stats.bytes_in_use, 0);
}

TEST_F(CudaTest, MatmulMatchesTheCpu) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = random_normal(ta ? Shape{70, 50} : Shape{50, 70});
      Tensor b = random_normal(tb ? Shape{30, 70} : Shape{70, 30});
      expect_close(matmul(a.to(Device::gpu(0)), b.to(Device::gpu(0)), ta, tb), matmul(a, b, ta, tb), 1e-4);
    }
  }
  Tensor x = random_normal({4, 64, 32}), w = random_normal({32, 16}), bias = random_normal({16});
  expect_close(linear(x.to(Device::gpu(0)), w.to(Device::gpu(0)), bias.to(Device::gpu(0)),
                      kernels::Activation::kRelu),
               linear(x, w, bias, kernels::Activation::kRelu), 1e-4);
}

TEST_F(CudaTest, UnknownGpuListsDevices) {
  try {
    parse_device("gpu:" + std::to_string(num_gpus()));
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu:0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cadre
