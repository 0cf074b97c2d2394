// The built-in Keras layers one by one, outside a model: output shapes and weights as the
// model builder sees them, values against ones computed by hand, gradients against central
// finite differences (float64), and each layer rebuilt from its saved config.
#include "cadre/keras/layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/nn/variable_store.h"
#include "keras/layer_impl.h"
#include "tests/support/grad_check.h"

namespace cadre::keras {
namespace {

using Impl = Layer::Impl;
using cadre::testing::expect_gradients_match;
using cadre::testing::random_tensor;
using internal::Dims;

Tensor doubles(std::vector<double> values, Shape shape) {
  return Tensor::from_vector(values, std::move(shape));
}

// A layer's implementation, named as a model would name it.
std::shared_ptr<Impl> named(const Layer& layer, const std::string& name) {
  layer.impl()->set_name(name);
  return layer.impl();
}

// Runs layers in a store of their own, so that their variables can be read and set.
class LayersTest : public ::testing::Test {
 protected:
  Tensor call(const Impl& layer, std::vector<Tensor> inputs, bool training = false,
              Tensor* logits = nullptr) {
    nn::VariableStoreScope scope(store_);
    return layer.call(inputs, training, logits);
  }
  // Sets a variable the layer made on its first call.
  void set(const std::string& name, const Tensor& value) {
    nn::Variable* variable = store_.find(name);
    ASSERT_NE(variable, nullptr) << "no variable " << name;
    variable->assign(value);
  }
  std::vector<double> values(const std::string& name) {
    return store_.find(name)->tensor().to_vector<double>();
  }
  // The layer's gradient with respect to its inputs, against finite differences.
  void expect_input_gradients_match(const Impl& layer, std::vector<Tensor> inputs,
                                    bool training = false) {
    nn::VariableStoreScope scope(store_);
    expect_gradients_match(
        [&](const std::vector<Tensor>& x) { return layer.call(x, training, nullptr); }, inputs);
  }

  nn::VariableStore store_{/*seed=*/1};
};

void expect_near(const Tensor& got, const std::vector<double>& want, double tolerance = 1e-12) {
  std::vector<double> values = got.to_vector<double>();
  ASSERT_EQ(values.size(), want.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(values[i], want[i], tolerance) << i;
}

TEST_F(LayersTest, DenseIsTheActivationOfXTimesTheKernelPlusTheBias) {
  auto dense = named(Dense(2, "relu"), "d");
  EXPECT_EQ(dense->output_shape({{-1, 3}}), (Dims{-1, 2}));
  EXPECT_EQ(dense->output_shape({{-1, 5, 3}}), (Dims{-1, 5, 2}));
  auto weights = dense->weights({{-1, 3}});
  ASSERT_EQ(weights.size(), 2u);
  EXPECT_EQ(weights[0].name, "kernel");
  EXPECT_EQ(weights[0].shape, (Dims{3, 2}));
  EXPECT_EQ(weights[1].name, "bias");
  EXPECT_EQ(weights[1].shape, (Dims{2}));
  EXPECT_THROW(dense->output_shape({{-1}}), InvalidArgumentError);

  Tensor x = doubles({1, 2, 3, -1, 0, 1}, {2, 3});
  call(*dense, {x});
  set("d/kernel", doubles({1, 0, 0, 1, 1, -1}, {3, 2}));
  set("d/bias", doubles({0.5, -0.5}, {2}));
  // [1, 2, 3]: [4, -1] + b = [4.5, -1.5]; [-1, 0, 1]: [0, -1] + b = [0.5, -1.5]; then relu.
  expect_near(call(*dense, {x}), {4.5, 0, 0.5, 0});

  auto no_bias = named(Dense(2, {}, {.use_bias = false}), "n");
  EXPECT_EQ(no_bias->weights({{-1, 3}}).size(), 1u);
  call(*no_bias, {x});
  EXPECT_EQ(store_.find("n/bias"), nullptr);
  EXPECT_THROW(Dense(0), InvalidArgumentError);
  EXPECT_THROW(Dense(2, "swish"), InvalidArgumentError);
}

TEST_F(LayersTest, ADenseSoftmaxKeepsItsLogits) {
  auto dense = named(Dense(3, "softmax"), "s");
  Tensor x = random_tensor({4, 5}, 1);
  Tensor logits;
  Tensor y = call(*dense, {x}, false, &logits);
  ASSERT_TRUE(logits.defined());
  EXPECT_EQ(logits.shape(), (Shape{4, 3}));
  std::vector<double> p = y.to_vector<double>(), z = logits.to_vector<double>();
  for (int row = 0; row < 4; ++row) {
    double total = 0;
    for (int k = 0; k < 3; ++k) total += std::exp(z[row * 3 + k]);
    for (int k = 0; k < 3; ++k)
      EXPECT_NEAR(p[row * 3 + k], std::exp(z[row * 3 + k]) / total, 1e-12);
  }
}

TEST_F(LayersTest, DenseGradientsMatchFiniteDifferences) {
  expect_input_gradients_match(*named(Dense(4, "tanh"), "t"), {random_tensor({3, 5}, 2)});
  expect_input_gradients_match(*named(Dense(2, "sigmoid"), "g"), {random_tensor({2, 3, 4}, 3)});
}

TEST_F(LayersTest, Conv2DSlidesItsKernelAsTensorFlowDoes) {
  auto valid = named(Conv2D(1, {2, 2}), "v");
  EXPECT_EQ(valid->output_shape({{-1, 3, 3, 1}}), (Dims{-1, 2, 2, 1}));
  auto weights = valid->weights({{-1, 3, 3, 1}});
  ASSERT_EQ(weights.size(), 2u);
  EXPECT_EQ(weights[0].shape, (Dims{2, 2, 1, 1}));
  Tensor x = doubles({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1});
  call(*valid, {x});
  set("v/kernel", doubles({1, 1, 1, 1}, {2, 2, 1, 1}));
  expect_near(call(*valid, {x}), {12, 16, 24, 28});  // the sums of the 2x2 windows

  // SAME with strides 2 pads after: windows at rows and columns 0 and 2, the second ones
  // half outside the image.
  auto same = named(Conv2D(1, {2, 2}, {}, {.strides = {2, 2}, .padding = "same"}), "s");
  EXPECT_EQ(same->output_shape({{-1, 3, 3, 1}}), (Dims{-1, 2, 2, 1}));
  call(*same, {x});
  set("s/kernel", doubles({1, 1, 1, 1}, {2, 2, 1, 1}));
  set("s/bias", doubles({-1}, {1}));
  expect_near(call(*same, {x}), {12 - 1, 3 + 6 - 1, 7 + 8 - 1, 9 - 1});

  EXPECT_THROW(valid->output_shape({{-1, 3, 3}}), InvalidArgumentError);
  EXPECT_THROW(named(Conv2D(1, {4, 1}), "big")->output_shape({{-1, 3, 3, 1}}),
               InvalidArgumentError);
  EXPECT_THROW(Conv2D(1, {2, 2}, {}, {.padding = "full"}), InvalidArgumentError);
}

TEST_F(LayersTest, Conv2DGradientsMatchFiniteDifferences) {
  expect_input_gradients_match(*named(Conv2D(2, {2, 3}, "tanh"), "c"),
                               {random_tensor({2, 4, 5, 3}, 4)});
  expect_input_gradients_match(
      *named(Conv2D(3, {3, 3}, {}, {.strides = {2, 1}, .padding = "same"}), "p"),
      {random_tensor({1, 5, 4, 2}, 5)});
}

TEST_F(LayersTest, PoolingTakesTheMaximumOrTheMeanOfEachWindow) {
  Tensor x = doubles({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 4, 4, 1});
  auto max = named(MaxPooling2D(), "m");
  auto mean = named(AveragePooling2D(), "a");
  EXPECT_EQ(max->output_shape({{-1, 4, 4, 1}}), (Dims{-1, 2, 2, 1}));  // strides: the pool
  EXPECT_EQ(mean->output_shape({{-1, 5, 5, 3}}), (Dims{-1, 2, 2, 3}));
  EXPECT_TRUE(max->weights({{-1, 4, 4, 1}}).empty());
  expect_near(call(*max, {x}), {6, 8, 14, 16});
  expect_near(call(*mean, {x}), {3.5, 5.5, 11.5, 13.5});
  auto overlapping = named(MaxPooling2D({3, 3}, {.strides = {1, 1}}), "o");
  EXPECT_EQ(overlapping->output_shape({{-1, 4, 4, 1}}), (Dims{-1, 2, 2, 1}));
  expect_near(call(*overlapping, {x}), {11, 12, 15, 16});
  EXPECT_THROW(named(MaxPooling2D({5, 5}), "big")->output_shape({{-1, 4, 4, 1}}),
               InvalidArgumentError);
}

TEST_F(LayersTest, AveragePoolingGradientsMatchFiniteDifferences) {
  expect_input_gradients_match(*named(AveragePooling2D({2, 2}, {.padding = "same"}), "a"),
                               {random_tensor({2, 5, 5, 2}, 6)});
}

TEST_F(LayersTest, FlattenAndReshapeKeepTheValuesInOrder) {
  Tensor x = random_tensor({2, 2, 3, 4}, 7);
  auto flatten = named(Flatten(), "f");
  EXPECT_EQ(flatten->output_shape({{-1, 2, 3, 4}}), (Dims{-1, 24}));
  EXPECT_EQ(flatten->output_shape({{-1, -1, 3}}), (Dims{-1, -1}));
  Tensor flat = call(*flatten, {x});
  EXPECT_EQ(flat.shape(), (Shape{2, 24}));
  EXPECT_EQ(flat.to_vector<double>(), x.to_vector<double>());

  auto reshape = named(Reshape({4, -1}), "r");
  EXPECT_EQ(reshape->output_shape({{-1, 2, 3, 4}}), (Dims{-1, 4, 6}));
  Tensor reshaped = call(*reshape, {x});
  EXPECT_EQ(reshaped.shape(), (Shape{2, 4, 6}));
  EXPECT_EQ(reshaped.to_vector<double>(), x.to_vector<double>());
  EXPECT_THROW(reshape->output_shape({{-1, 5}}), InvalidArgumentError);  // 5 is not 4 * k
  EXPECT_THROW(named(Reshape({7}), "seven")->output_shape({{-1, 2, 3}}), InvalidArgumentError);
  EXPECT_THROW(Reshape({-1, -1}), InvalidArgumentError);
  EXPECT_THROW(Reshape({0, 3}), InvalidArgumentError);
  expect_input_gradients_match(*reshape, {x});
}

TEST_F(LayersTest, ActivationAppliesItsFunctionAndKeepsTheLogitsOfASoftmax) {
  Tensor x = doubles({-2, -0.5, 0, 1.5}, {1, 4});
  expect_near(call(*named(Activation("relu"), "r"), {x}), {0, 0, 0, 1.5});
  expect_near(call(*named(Activation("linear"), "l"), {x}), {-2, -0.5, 0, 1.5});
  std::vector<double> tanh_x;
  for (double v : {-2.0, -0.5, 0.0, 1.5}) tanh_x.push_back(std::tanh(v));
  expect_near(call(*named(Activation("tanh"), "t"), {x}), tanh_x, 1e-12);
  Tensor logits;
  Tensor p = call(*named(Activation("softmax"), "s"), {x}, false, &logits);
  EXPECT_EQ(logits.to_vector<double>(), x.to_vector<double>());
  double total = std::exp(-2) + std::exp(-0.5) + std::exp(0) + std::exp(1.5);
  expect_near(p, {std::exp(-2) / total, std::exp(-0.5) / total, 1 / total, std::exp(1.5) / total},
              1e-12);
  try {
    Activation("swish");
    FAIL() << "an unknown activation";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("relu"), std::string::npos) << e.what();
  }
  expect_input_gradients_match(*named(Activation("gelu"), "g"), {random_tensor({3, 4}, 8)});
}

TEST_F(LayersTest, DropoutZeroesAFractionInTrainingAndScalesTheRest) {
  auto dropout = named(Dropout(0.25), "d");
  Tensor ones = Tensor::full({100, 100}, 1.0).cast(DType::kFloat64);
  EXPECT_EQ(call(*dropout, {ones}).to_vector<double>(), ones.to_vector<double>());
  int zeros = 0;
  for (double v : call(*dropout, {ones}, /*training=*/true).to_vector<double>()) {
    if (v == 0) {
      ++zeros;
    } else {
      EXPECT_NEAR(v, 1 / 0.75, 1e-6);
    }
  }
  EXPECT_NEAR(zeros / 10000.0, 0.25, 0.03);
  EXPECT_THROW(Dropout(1), InvalidArgumentError);
  EXPECT_THROW(Dropout(-0.1), InvalidArgumentError);
}

TEST_F(LayersTest, BatchNormalizationUsesTheBatchInTrainingAndTheMovingStatisticsAfter) {
  auto norm = named(BatchNormalization({.momentum = 0.9, .epsilon = 0}), "bn");
  EXPECT_EQ(norm->output_shape({{-1, 2}}), (Dims{-1, 2}));
  auto weights = norm->weights({{-1, 2}});
  ASSERT_EQ(weights.size(), 4u);
  EXPECT_TRUE(weights[0].trainable);   // gamma
  EXPECT_TRUE(weights[1].trainable);   // beta
  EXPECT_FALSE(weights[2].trainable);  // moving_mean
  EXPECT_FALSE(weights[3].trainable);  // moving_variance
  // Columns [1, 3] and [10, 30]: means 2 and 20, variances 1 and 100.
  Tensor x = doubles({1, 10, 3, 30}, {2, 2});
  expect_near(call(*norm, {x}, /*training=*/true), {-1, -1, 1, 1});
  // moving = 0.9 * moving + 0.1 * batch, from 0 and 1.
  expect_near(store_.find("bn/moving_mean")->tensor(), {0.2, 2});
  expect_near(store_.find("bn/moving_variance")->tensor(), {0.9 + 0.1 * 1, 0.9 + 0.1 * 100}, 1e-9);
  set("bn/gamma", doubles({2, 1}, {2}));
  set("bn/beta", doubles({0, 5}, {2}));
  // Inference: (x - moving_mean) / sqrt(moving_variance) * gamma + beta.
  double v1 = 1.0, v2 = 10.9;
  expect_near(call(*norm, {x}),
              {(1 - 0.2) / std::sqrt(v1) * 2, (10 - 2) / std::sqrt(v2) + 5,
               (3 - 0.2) / std::sqrt(v1) * 2, (30 - 2) / std::sqrt(v2) + 5},
              1e-9);
  EXPECT_THROW(norm->output_shape({{-1, -1}}), InvalidArgumentError);
}

TEST_F(LayersTest, BatchNormalizationGradientsMatchFiniteDifferences) {
  auto norm = named(BatchNormalization(), "bn");
  expect_input_gradients_match(*norm, {random_tensor({4, 3}, 9)}, /*training=*/true);
  expect_input_gradients_match(*norm, {random_tensor({4, 3}, 10)}, /*training=*/false);
}

TEST_F(LayersTest, EmbeddingLooksUpTheRowsOfItsTable) {
  auto embedding = named(Embedding(5, 3), "e");
  EXPECT_EQ(embedding->output_shape({{-1, 4}}), (Dims{-1, 4, 3}));
  EXPECT_EQ(embedding->output_dtype({DType::kInt64}), DType::kFloat32);
  EXPECT_THROW(embedding->output_dtype({DType::kFloat32}), InvalidArgumentError);
  ASSERT_EQ(embedding->weights({{-1, 4}}).size(), 1u);
  EXPECT_EQ(embedding->weights({{-1, 4}})[0].shape, (Dims{5, 3}));
  Tensor ids = Tensor::from_vector<int64_t>({4, 0, 4, 2}, Shape{2, 2});
  Tensor rows = call(*embedding, {ids});
  EXPECT_EQ(rows.shape(), (Shape{2, 2, 3}));
  std::vector<double> table = values("e/embeddings");
  std::vector<double> want;
  for (int64_t id : {4, 0, 4, 2}) {
    for (int k = 0; k < 3; ++k) want.push_back(table[id * 3 + k]);
  }
  expect_near(rows, want, 0);
  EXPECT_THROW(Embedding(0, 3), InvalidArgumentError);
}

TEST_F(LayersTest, AddSumsAndConcatenateJoinsAlongItsAxis) {
  auto sum = named(Add(), "add");
  auto join = named(Concatenate(), "cat");
  EXPECT_EQ(sum->arity(), 0);
  EXPECT_EQ(sum->output_shape({{-1, 2}, {-1, 2}, {-1, 2}}), (Dims{-1, 2}));
  EXPECT_THROW(sum->output_shape({{-1, 2}, {-1, 3}}), InvalidArgumentError);
  EXPECT_THROW(sum->output_shape({{-1, 2}, {-1, 2, 1}}), InvalidArgumentError);
  EXPECT_EQ(join->output_shape({{-1, 2}, {-1, 3}}), (Dims{-1, 5}));
  EXPECT_EQ(named(Concatenate(1), "c1")->output_shape({{-1, 2, 4}, {-1, 3, 4}}), (Dims{-1, 5, 4}));
  EXPECT_THROW(named(Concatenate(0), "c0")->output_shape({{-1, 2}, {-1, 2}}), InvalidArgumentError);

  Tensor a = doubles({1, 2, 3, 4}, {2, 2}), b = doubles({10, 20, 30, 40}, {2, 2});
  Tensor c = doubles({5, 6}, {2, 1});
  expect_near(call(*sum, {a, b, a}), {12, 24, 36, 48});
  expect_near(call(*join, {a, c}), {1, 2, 5, 3, 4, 6});
  expect_input_gradients_match(*sum, {random_tensor({2, 3}, 11), random_tensor({2, 3}, 12)});
  expect_input_gradients_match(*join, {random_tensor({2, 3}, 13), random_tensor({2, 1}, 14)});
}

// A saved model rebuilds each layer from its kind, name and config: the same layer again.
TEST_F(LayersTest, EveryLayerIsRebuiltFromItsConfig) {
  std::vector<Layer> layers = {
      Dense(3, "relu", {.use_bias = false}),
      Conv2D(4, {3, 2}, "tanh", {.strides = {2, 1}, .padding = "same"}),
      MaxPooling2D({3, 3}, {.strides = {1, 2}}),
      AveragePooling2D({2, 2}, {.padding = "same"}),
      Flatten(),
      Reshape({4, -1}),
      Dropout(0.375),
      Activation("softmax"),
      BatchNormalization({.momentum = 0.5, .epsilon = 0.25, .center = false, .synchronized = true}),
      Embedding(7, 2),
      Add(),
      Concatenate(1),
  };
  for (const Layer& layer : layers) {
    SCOPED_TRACE(layer.kind());
    auto rebuilt = internal::layer_from_config(layer.kind(), "again", layer.impl()->config());
    EXPECT_EQ(rebuilt->kind(), layer.kind());
    EXPECT_EQ(rebuilt->name(), "again");
    EXPECT_EQ(rebuilt->config(), layer.impl()->config());
  }
  EXPECT_THROW(internal::layer_from_config("Dense", "d", {{"units", "3"}}), DataLossError);
  EXPECT_THROW(internal::layer_from_config(
                   "Dense", "d", {{"units", "x"}, {"activation", "relu"}, {"use_bias", "1"}}),
               DataLossError);
  EXPECT_THROW(internal::layer_from_config("Swish", "s", {}), DataLossError);
}

}  // namespace
}  // namespace cadre::keras
