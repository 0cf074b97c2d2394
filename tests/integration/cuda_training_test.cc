// MLP and CNN training runs of the Fashion-MNIST example's models on gpu:0 against cpu:0,
// and the reduced-precision modes against float32. Skipped on machines without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/random.h"
#include "cadre/random/generator.h"
#include "cadre/runtime/precision.h"
#include "examples/fashion_mnist/models.h"
#include "tests/core/cuda_test_util.h"

namespace cadre {
namespace {

using testing::CudaTest;
using testing::kGpu;
using testing::kHost;

// Losses of `steps` Adam steps of `model` on `device`, from the same initial variables
// (the initializers draw the same Philox streams on both devices) and the same batches.
std::vector<float> train_losses(const std::string& model, Device device, int steps) {
  Generator data(1, 2);
  Tensor images = random_uniform({512, 784}, 0, 1, DType::kFloat32, &data);
  Tensor labels = cast(floor(random_uniform({512}, 0, 10, DType::kFloat64, &data)), DType::kInt64);
  // Learnable: the label shifts the image's mean.
  images = images + cast(labels, DType::kFloat32).reshape({512, 1}) * 0.05;
  DeviceScope scope(device);
  images = images.to(device);
  labels = labels.to(device);
  nn::VariableStore store(42);
  nn::VariableStoreScope store_scope(store);
  auto optimizer = nn::optimizers::adam(1e-3);
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    Tensor batch = images.slice(0, (step * 64) % 512, (step * 64) % 512 + 64);
    Tensor batch_labels = labels.slice(0, (step * 64) % 512, (step * 64) % 512 + 64);
    GradientTape tape;
    Tensor loss =
        nn::sparse_softmax_cross_entropy(batch_labels, examples::model_logits(model, batch));
    optimizer->minimize(tape, loss);
    losses.push_back(loss.item<float>());
  }
  return losses;
}

TEST_F(CudaTest, MlpAndCnnTrainingMatchTheCpuLosses) {
  for (const std::string model : {"mlp", "cnn"}) {
    std::vector<float> gpu = train_losses(model, kGpu, 40);
    std::vector<float> cpu = train_losses(model, kHost, 40);
    for (size_t i = 0; i < gpu.size(); ++i) {
      // Rounding differences grow with the steps; they stay far below the loss's decrease.
      EXPECT_NEAR(gpu[i], cpu[i], 2e-3 * (1 + i / 10.0)) << model << " step " << i;
    }
    EXPECT_LT(gpu.back(), gpu.front()) << model;
  }
}

TEST_F(CudaTest, Tf32AndBf16TrainingStayCloseToFloat32) {
  std::vector<float> exact = train_losses("mlp", kGpu, 20);
  for (Float32Precision p : {Float32Precision::kTF32, Float32Precision::kBFloat16}) {
    set_float32_precision(p);
    std::vector<float> fast = train_losses("mlp", kGpu, 20);
    set_float32_precision(Float32Precision::kFloat32);
    for (size_t i = 0; i < fast.size(); ++i) {
      EXPECT_NEAR(fast[i], exact[i], 0.05 * exact[i]) << float32_precision_name(p) << " step " << i;
    }
  }
}

}  // namespace
}  // namespace cadre
