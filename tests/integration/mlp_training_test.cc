// End to end on the core: the 784-256-256-10 MLP trained on 2,000 Fashion-MNIST images.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "cadre/autodiff/tape.h"
#include "cadre/io/idx.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/math.h"
#include "cadre/ops/random.h"
#include "examples/fashion_mnist/models.h"

namespace cadre {
namespace {

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";

std::vector<float> train_losses(const io::ImagesAndLabels& data, uint64_t seed, int steps) {
  Tensor images = cast(data.images.slice(0, 0, 2000), DType::kFloat32).reshape({2000, 784}) / 255.0;
  Tensor labels = cast(data.labels.slice(0, 0, 2000), DType::kInt64);
  nn::VariableStore store(seed);
  nn::VariableStoreScope scope(store);
  Generator shuffle(seed, 1);
  auto optimizer = nn::optimizers::adam(1e-3);
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    Tensor ids =
        cast(floor(random_uniform({64}, 0, 2000, DType::kFloat64, &shuffle)), DType::kInt64);
    GradientTape tape;
    Tensor logits = examples::mlp_logits(gather(images, ids));
    Tensor loss = nn::sparse_softmax_cross_entropy(gather(labels, ids), logits);
    optimizer->minimize(tape, loss);
    losses.push_back(loss.item<float>());
  }
  return losses;
}

TEST(MlpTrainingTest, LossFallsAndRunsAreBitIdentical) {
  if (!std::filesystem::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  io::ImagesAndLabels data = io::read_mnist(kData, io::Split::kTrain);
  std::vector<float> first = train_losses(data, 42, 300);
  std::vector<float> second = train_losses(data, 42, 300);
  EXPECT_EQ(first, second);
  EXPECT_NEAR(first[0], std::log(10.0), 0.3);  // an untrained model guesses
  double end = std::accumulate(first.end() - 20, first.end(), 0.0) / 20;
  EXPECT_LT(end, 0.3 * first[0]);
  std::vector<float> other_seed = train_losses(data, 7, 5);
  EXPECT_NE(std::vector<float>(first.begin(), first.begin() + 5), other_seed);
}

}  // namespace
}  // namespace cadre
