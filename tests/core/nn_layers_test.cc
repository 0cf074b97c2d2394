#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/math.h"
#include "cadre/ops/random.h"
#include "cadre/ops/reduce.h"
#include "cadre/random/generator.h"

namespace cadre {
namespace {

TEST(VariableStoreTest, LayersCreateVariablesOnceByName) {
  nn::VariableStore store(/*seed=*/1);
  nn::VariableStoreScope scope(store);
  Tensor x = random_normal({4, 3});
  Tensor y1 = nn::dense("hidden1", x, 5, nn::relu);
  Tensor y2 = nn::dense("hidden1", x, 5, nn::relu);
  EXPECT_EQ(y1.shape(), (Shape{4, 5}));
  EXPECT_EQ(y1.to_vector<float>(), y2.to_vector<float>());
  ASSERT_EQ(store.variables().size(), 2u);
  EXPECT_EQ(store.variables()[0]->name(), "hidden1/kernel");
  EXPECT_EQ(store.variables()[1]->name(), "hidden1/bias");
  {
    nn::NameScope block("block");
    nn::dense("out", y1, 2);
  }
  EXPECT_NE(store.find("block/out/kernel"), nullptr);
  // Asking for an existing name with another shape is an error that names it.
  try {
    nn::dense("hidden1", random_normal({4, 7}), 5);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("hidden1/kernel"), std::string::npos) << e.what();
  }
}

TEST(VariableStoreTest, InitialValuesDependOnSeedAndNameOnly) {
  auto kernel_of = [](uint64_t seed, bool other_first) {
    nn::VariableStore store(seed);
    nn::VariableStoreScope scope(store);
    if (other_first) nn::get_variable("other", Shape{3}, nn::initializers::glorot_uniform());
    return nn::get_variable("w", Shape{4, 4}, nn::initializers::glorot_uniform())
        .tensor()
        .to_vector<float>();
  };
  EXPECT_EQ(kernel_of(5, false), kernel_of(5, true));
  EXPECT_NE(kernel_of(5, false), kernel_of(6, false));
}

TEST(VariableStoreTest, NoStoreIsAClearError) {
  try {
    nn::dense("x", random_normal({1, 2}), 3);
    FAIL();
  } catch (const FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find("VariableStoreScope"), std::string::npos);
  }
}

TEST(VariableStoreTest, CreatorHookMakesTheVariables) {
  std::vector<std::string> made;
  nn::VariableStore store(0, [&](const nn::VariableSpec& spec, uint64_t seed) {
    made.push_back(spec.name);
    return nn::default_variable_creator(spec, seed);
  });
  nn::VariableStoreScope scope(store);
  nn::dense("d", random_normal({2, 2}), 2);
  nn::dense("d", random_normal({2, 2}), 2);
  EXPECT_EQ(made, (std::vector<std::string>{"d/kernel", "d/bias"}));
}

TEST(LayersTest, ConvPoolFlattenShapes) {
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  Tensor x = random_normal({2, 28, 28, 1});
  Tensor h = nn::conv2d("conv1", x, 32, {3, 3}, nn::relu);
  EXPECT_EQ(h.shape(), (Shape{2, 26, 26, 32}));
  h = nn::max_pool2d(h, {2, 2}, {2, 2});
  EXPECT_EQ(h.shape(), (Shape{2, 13, 13, 32}));
  nn::Conv2DOptions same;
  same.padding = Padding::kSame;
  same.strides = {2, 2};
  EXPECT_EQ(nn::conv2d("conv2", h, 8, {3, 3}, nn::linear, same).shape(), (Shape{2, 7, 7, 8}));
  EXPECT_EQ(nn::flatten(h).shape(), (Shape{2, 13 * 13 * 32}));
  EXPECT_EQ(store.find("conv1/kernel")->shape(), (Shape{3, 3, 1, 32}));
}

TEST(LayersTest, DropoutOnlyInTraining) {
  Tensor x = Tensor::ones(Shape{10000});
  EXPECT_EQ(nn::dropout(x, 0.5, false).to_vector<float>(), x.to_vector<float>());
  Tensor y = nn::dropout(x, 0.25, true);
  std::vector<float> v = y.to_vector<float>();
  int zeros = 0;
  for (float f : v) {
    if (f == 0) {
      ++zeros;
    } else {
      EXPECT_FLOAT_EQ(f, 1 / 0.75f);
    }
  }
  EXPECT_NEAR(zeros / 10000.0, 0.25, 0.02);
}

TEST(LayersTest, BatchNormUpdatesMovingStatistics) {
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  Generator g(11);
  Tensor x = random_normal({64, 3}, 2, 3, DType::kFloat32, &g);
  nn::BatchNormOptions options;
  options.momentum = 0.5;
  Tensor y = nn::batch_norm("bn", x, /*training=*/true, options);
  EXPECT_NEAR(mean(y).item<float>(), 0, 1e-5);
  std::vector<float> moving = store.find("bn/moving_mean")->tensor().to_vector<float>();
  std::vector<float> batch = mean(x, {0}).to_vector<float>();
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(moving[c], 0.5 * batch[c], 1e-5);
  EXPECT_FALSE(store.find("bn/moving_mean")->trainable());
  EXPECT_TRUE(store.find("bn/gamma")->trainable());
  // Inference uses the moving statistics.
  Tensor z = nn::batch_norm("bn", x, /*training=*/false, options);
  Tensor mm = store.find("bn/moving_mean")->tensor();
  Tensor mv = store.find("bn/moving_variance")->tensor();
  std::vector<float> want = ((x - mm) / sqrt(mv + options.epsilon)).to_vector<float>();
  std::vector<float> got = z.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5);
}

TEST(LayersTest, EmbeddingLooksUpRowsWithSparseGradient) {
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  Tensor ids = Tensor::from_vector<int64_t>({3, 1, 3}, Shape{3});
  GradientTape tape;
  Tensor e = nn::embedding("emb", ids, 10, 4);
  EXPECT_EQ(e.shape(), (Shape{3, 4}));
  nn::Variable& t = *store.find("emb/embeddings");
  Gradient g = tape.gradient(sum(e), t.tensor());
  EXPECT_TRUE(g.is_sparse());
  EXPECT_EQ(g.sparse().indices.numel(), 3);
}

TEST(LossesTest, ReductionsAndValues) {
  Tensor labels = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2});
  Tensor preds = Tensor::from_vector<float>({1, 1, 1, 1}, Shape{2, 2});
  EXPECT_FLOAT_EQ(nn::mean_squared_error(labels, preds).item<float>(), (0 + 1 + 4 + 9) / 4.0f);
  nn::LossOptions none;
  none.reduction = nn::Reduction::kNone;
  EXPECT_EQ(nn::mean_squared_error(labels, preds, none).to_vector<float>(),
            (std::vector<float>{0.5, 6.5}));
  nn::LossOptions weighted;
  weighted.weights = Tensor::from_vector<float>({1, 0});
  EXPECT_FLOAT_EQ(nn::mean_squared_error(labels, preds, weighted).item<float>(), 0.25f);
  EXPECT_FLOAT_EQ(nn::mean_absolute_error(labels, preds).item<float>(), 1.5f);
  EXPECT_FLOAT_EQ(nn::huber(labels, preds).item<float>(), (0 + 0.5f + 1.5f + 2.5f) / 4);
  EXPECT_FLOAT_EQ(nn::l2_loss(labels).item<float>(), 15.0f);
  Tensor logits = Tensor::from_vector<float>({2, 0, 0, 2}, Shape{2, 2});
  Tensor ids = Tensor::from_vector<int32_t>({0, 1});
  Tensor onehot = Tensor::from_vector<float>({1, 0, 0, 1}, Shape{2, 2});
  EXPECT_NEAR(nn::sparse_softmax_cross_entropy(ids, logits).item<float>(),
              nn::softmax_cross_entropy(onehot, logits).item<float>(), 1e-6);
  EXPECT_NEAR(nn::sparse_softmax_cross_entropy(ids, logits).item<float>(),
              std::log(1 + std::exp(-2.0)), 1e-6);
  // max(x, 0) - x z + log(1 + exp(-|x|)), averaged over the last axis then the batch.
  Tensor z = Tensor::from_vector<float>({1, 0, 0.5, 1}, Shape{2, 2});
  Tensor x = Tensor::from_vector<float>({2, -1, 0, -3}, Shape{2, 2});
  double expected = 0;
  std::vector<float> zs = z.to_vector<float>(), xs = x.to_vector<float>();
  for (int i = 0; i < 4; ++i) {
    expected += std::max(xs[i], 0.0f) - xs[i] * zs[i] + std::log1p(std::exp(-std::abs(xs[i])));
  }
  EXPECT_NEAR(nn::sigmoid_cross_entropy(z, x).item<float>(), expected / 4, 1e-6);
}

// Keras' variance-scaling initializers: the spread follows the fans, normals are truncated
// at two standard deviations.
TEST(InitializersTest, VarianceScalingFollowsTheFans) {
  Generator generator(7, 0);
  const Shape shape{400, 200};  // fan_in 400, fan_out 200
  auto stats = [](const Tensor& t) {
    std::vector<float> v = t.to_vector<float>();
    double mean = 0, square = 0, largest = 0;
    for (float x : v) {
      mean += x;
      square += double(x) * x;
      largest = std::max(largest, double(std::abs(x)));
    }
    mean /= v.size();
    return std::tuple{mean, std::sqrt(square / v.size() - mean * mean), largest};
  };
  struct Case {
    nn::Initializer init;
    double stddev, bound;
  };
  const double glorot = std::sqrt(2.0 / 600), he = std::sqrt(2.0 / 400);
  for (const Case& c : {Case{nn::initializers::glorot_normal(), glorot, 2 * glorot / 0.8796},
                        Case{nn::initializers::he_normal(), he, 2 * he / 0.8796},
                        Case{nn::initializers::he_uniform(), std::sqrt(6.0 / 400) / std::sqrt(3.0),
                             std::sqrt(6.0 / 400)}}) {
    auto [mean, stddev, largest] = stats(c.init(shape, DType::kFloat32, generator));
    EXPECT_NEAR(mean, 0, 0.05 * c.stddev);
    EXPECT_NEAR(stddev, c.stddev, 0.03 * c.stddev);
    EXPECT_LE(largest, c.bound * 1.0001);
  }
}

}  // namespace
}  // namespace cadre
