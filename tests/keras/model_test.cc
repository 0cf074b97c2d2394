// Building models: Sequential and functional, names, shapes, summary, and the errors a
// user meets before training.
#include <gtest/gtest.h>

#include "cadre/cadre.h"
#include "tests/keras/keras_test_data.h"

namespace cadre::keras {
namespace {

Sequential mlp() {
  return Sequential({InputLayer({784}), Dense(256, "relu"), Dense(256, "relu"), Dense(10)});
}

TEST(ModelTest, SequentialNamesLayersAsKerasDoes) {
  Sequential model = mlp();
  std::vector<std::string> names;
  for (const Layer& l : model.layers()) names.push_back(l.name());
  EXPECT_EQ(names, (std::vector<std::string>{"dense", "dense_1", "dense_2"}));
  EXPECT_EQ(model.count_params(), 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
}

TEST(ModelTest, SummaryPrintsLayersShapesAndParameterCounts) {
  std::string expected =
      "Model: \"sequential\"\n"
      "_________________________________________________________________\n"
      " Layer (type)                Output Shape              Param #   \n"
      "=================================================================\n"
      " dense (Dense)               (None, 256)               200960    \n"
      "                                                                 \n"
      " dense_1 (Dense)             (None, 256)               65792     \n"
      "                                                                 \n"
      " dense_2 (Dense)             (None, 10)                2570      \n"
      "                                                                 \n"
      "=================================================================\n"
      "Total params: 269322 (1.03 MB)\n"
      "Trainable params: 269322 (1.03 MB)\n"
      "Non-trainable params: 0 (0.00 Byte)\n"
      "_________________________________________________________________\n";
  EXPECT_EQ(mlp().summary_string(), expected);
}

TEST(ModelTest, FunctionalCnnShapesAndNonTrainableParams) {
  KerasTensor x = Input({784}, {.name = "image"});
  KerasTensor h = Reshape({28, 28, 1})(x);
  h = Conv2D(8, {3, 3}, "relu")(h);
  h = BatchNormalization()(h);
  h = MaxPooling2D({2, 2})(h);
  h = Flatten()(h);
  h = Dropout(0.25)(h);
  Model model(x, Dense(10, "softmax")(h), "cnn");
  EXPECT_EQ(model.get_layer("conv2d").kind(), "Conv2D");
  std::string summary = model.summary_string();
  EXPECT_NE(summary.find("image (InputLayer)          [(None, 784)]"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find(" conv2d (Conv2D)             (None, 26, 26, 8)         80"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("(None, 13, 13, 8)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("Non-trainable params: 16 (64.00 Byte)"), std::string::npos) << summary;
}

TEST(ModelTest, IncompatibleShapesNameBothLayersAtConstruction) {
  try {
    Sequential({InputLayer({784}), Dense(64, "relu"), Conv2D(8, {3, 3})});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("layer 'conv2d' (Conv2D)"), std::string::npos) << m;
    EXPECT_NE(m.find("layer 'dense' (Dense) with output shape (None, 64)"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 4"), std::string::npos) << m;
  }
  KerasTensor x = Input({8, 8, 1});
  EXPECT_THROW(Conv2D(4, {9, 9})(x), InvalidArgumentError);
  KerasTensor a = Input({4}, {.name = "a"}), b = Input({5}, {.name = "b"});
  EXPECT_THROW(Add()({Dense(3)(a), Dense(4)(b)}), InvalidArgumentError);
  EXPECT_THROW(Embedding(10, 4)(Input({3})), InvalidArgumentError);  // float ids
}

TEST(ModelTest, UnknownNamesListTheKnownOnes) {
  try {
    Loss loss("sparse_categorical_crossentropyy");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown loss 'sparse_categorical_crossentropyy'; known "
                                         "losses: sparse_categorical_crossentropy"),
              std::string::npos)
        << e.what();
  }
  try {
    Metric metric("acuracy");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown metric 'acuracy'; known metrics: accuracy"),
              std::string::npos);
  }
  EXPECT_THROW(Dense(3, "relux"), InvalidArgumentError);
  EXPECT_THROW(OptimizerArg("adamw"), InvalidArgumentError);
  Sequential model = mlp();
  EXPECT_THROW(model.compile({.optimizer = "adam"}), InvalidArgumentError);  // no loss
}

TEST(ModelTest, FitBeforeCompileSaysSo) {
  Sequential model({Dense(4)});
  try {
    model.fit(testing::blobs());
    FAIL();
  } catch (const FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find("is not compiled; call compile"), std::string::npos);
  }
}

TEST(ModelTest, DuplicateLayerNamesAreRefused) {
  EXPECT_THROW(
      Sequential({InputLayer({4}), Dense(3, {}, {.name = "a"}), Dense(3, {}, {.name = "a"})}),
      InvalidArgumentError);
}

TEST(ModelTest, AddThatFailsItsShapeCheckLeavesTheModelUnchanged) {
  Sequential model({InputLayer({784}), Dense(64, "relu")});
  std::string before = model.summary_string();
  Conv2D conv(8, {3, 3});
  EXPECT_THROW(model.add(conv), InvalidArgumentError);
  EXPECT_EQ(model.layers().size(), 1u);
  EXPECT_EQ(model.summary_string(), before);
  EXPECT_EQ(conv.name(), "");  // not named by a model it did not join
  model.add(Dense(10));
  std::vector<std::string> names;
  for (const Layer& l : model.layers()) names.push_back(l.name());
  EXPECT_EQ(names, (std::vector<std::string>{"dense", "dense_1"}));
  EXPECT_EQ(model.count_params(), 784 * 64 + 64 + 64 * 10 + 10);
  // The refused layer fits elsewhere and is named there.
  Sequential images({InputLayer({28, 28, 1}), conv});
  EXPECT_EQ(conv.name(), "conv2d");
}

TEST(ModelTest, BuildThatFailsLeavesTheModelUnbuilt) {
  Sequential model({Dense(4), Conv2D(8, {3, 3})});
  EXPECT_THROW(model.build({8}), InvalidArgumentError);
  EXPECT_FALSE(model.built());
  EXPECT_THROW(model.count_params(), FailedPreconditionError);
  model.build({8, 8, 1});  // Dense on the last axis: [8, 8, 4], then the convolution
  EXPECT_TRUE(model.built());
  EXPECT_EQ(model.count_params(), 1 * 4 + 4 + 3 * 3 * 4 * 8 + 8);
}

}  // namespace
}  // namespace cadre::keras
