// Canned estimators from scratch: TensorFlow's variable names (checked against a TensorFlow
// 2.15 DNNLinearCombinedClassifier's checkpoint), each head learns a separable problem and
// reports TensorFlow's metric names, bad options are InvalidArgumentError.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cadre/base/errors.h"
#include "cadre/estimator/canned.h"
#include "cadre/io/event_file.h"
#include "cadre/nn/optimizers.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

namespace fc = feature_column;
using testing::TempDir;

// x in [-1, 1] and a color; the class is 1 when x > 0 (three classes: x's third).
InputFn separable(int64_t n_classes, bool regression, bool repeat) {
  return [=](const InputContext&) {
    size_t i = 0;
    io::Dataset rows = io::Dataset::from_generator([=]() mutable -> std::optional<io::Element> {
      if (i == 256) return std::nullopt;
      float x = static_cast<float>(i * 37 % 256) / 128.0f - 1.0f;
      const char* color = i++ % 2 ? "red" : "blue";
      int64_t label = n_classes == 2 ? (x > 0 ? 1 : 0) : std::min<int64_t>((x + 1) * 1.5f, 2);
      Tensor y = regression ? Tensor::from_vector(std::vector<float>{2 * x + 1})
                            : Tensor::from_vector(std::vector<int64_t>{label});
      return io::Element{
          {{"x", Tensor::from_vector(std::vector<float>{x})}, {"color", io::bytes_tensor(color)}},
          y};
    });
    if (repeat) rows = rows.repeat();
    auto x = fc::numeric_column("x");
    auto color = fc::categorical_column_with_vocabulary_list("color", {"red", "blue"});
    return rows
        .map(fc::transform_fn(
            {x, color, fc::bucketized_column(x, {-0.5, 0, 0.5}), fc::embedding_column(color, 2)}))
        .padded_batch(32, -1);
  };
}

LinearOptions wide() {
  auto x = fc::numeric_column("x");
  return {.feature_columns = {x, fc::bucketized_column(x, {-0.5, 0, 0.5})}};
}

DnnOptions deep() {
  auto color = fc::categorical_column_with_vocabulary_list("color", {"red", "blue"});
  return {.hidden_units = {8, 4},
          .feature_columns = {fc::numeric_column("x"), fc::embedding_column(color, 2)}};
}

// The DNN at Adagrad 0.05 rather than TensorFlow 2's 0.001, to learn in a few hundred steps.
DnnOptions fast_deep() {
  DnnOptions dnn = deep();
  dnn.optimizer = nn::optimizers::adagrad(0.05);
  return dnn;
}

RunConfig run_config(const TempDir& dir) {
  RunConfig config;
  config.model_dir = dir.file("model_dir");
  config.tf_random_seed = 3;
  return config;
}

TEST(CannedHeadsTest, VariablesHaveTensorFlowsNames) {
  TempDir dir;
  DnnOptions dnn = deep();
  dnn.batch_norm = true;
  dnn.dropout = 0.1;
  Estimator estimator = dnn_linear_combined_classifier(wide(), dnn, run_config(dir));
  estimator.train(separable(2, false, true), {.max_steps = 1});
  std::vector<std::string> names = estimator.get_variable_names();
  for (const char* name :
       {"dnn/hiddenlayer_0/kernel", "dnn/hiddenlayer_0/bias", "dnn/hiddenlayer_1/kernel",
        "dnn/hiddenlayer_0/batchnorm_0/gamma", "dnn/hiddenlayer_1/batchnorm_1/moving_mean",
        "dnn/logits/kernel", "dnn/logits/bias",
        "dnn/input_from_feature_columns/input_layer/color_embedding/embedding_weights",
        "linear/linear_model/x/weights", "linear/linear_model/x_bucketized/weights",
        "linear/linear_model/bias_weights", "linear/linear_model/x/weights/Ftrl/accumulator",
        "dnn/logits/kernel/Adagrad/accumulator", "Ftrl/iterations", "Adagrad/iterations"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

// The learning rate the summaries show at step 1.
double learning_rate(Estimator estimator) {
  estimator.train(separable(2, false, true), {.max_steps = 1});
  for (const auto& entry : std::filesystem::directory_iterator(estimator.model_dir())) {
    if (!entry.path().filename().string().starts_with("events.out")) continue;
    for (const io::Event& event : io::read_event_file(entry.path().string())) {
      for (const io::SummaryValue& v : event.values) {
        if (v.tag == "learning_rate") return *v.scalar;
      }
    }
  }
  return -1;
}

// TensorFlow 2.15's defaults (tf.estimator's canned/*.py, the v2 model_fns): Ftrl at
// min(0.2, 1/sqrt(columns)) for a linear model, Adagrad at 0.001 for a DNN (its own default
// rate: the 0.05 of TensorFlow 1's DNNClassifier is not passed to it). A 0.05 here made
// the DNN alone train 2-5 AUC points off TensorFlow's on the census-like data.
TEST(CannedHeadsTest, DefaultLearningRatesAreTensorFlow2s) {
  TempDir a, b;
  RunConfig config = run_config(a);
  config.save_summary_steps = 1;
  EXPECT_NEAR(learning_rate(dnn_classifier(deep(), config)), 0.001, 1e-7);
  config.model_dir = b.file("model_dir");
  EXPECT_NEAR(learning_rate(linear_classifier(wide(), config)), 0.2, 1e-7);  // 1/sqrt(2) > 0.2
}

TEST(CannedHeadsTest, BinaryClassifiersLearnAndReportTensorFlowsMetrics) {
  TempDir a, b, c;
  for (Estimator estimator :
       {linear_classifier(wide(), run_config(a)), dnn_classifier(fast_deep(), run_config(b)),
        dnn_linear_combined_classifier(wide(), deep(), run_config(c))}) {
    estimator.train(separable(2, false, true), {.max_steps = 300});
    EvalResult result = estimator.evaluate(separable(2, false, false));
    EXPECT_GT(result.at("accuracy"), 0.9) << estimator.model_dir();
    EXPECT_GT(result.at("auc"), 0.95);
    for (const char* metric : {"auc_precision_recall", "precision", "recall", "average_loss",
                               "label/mean", "prediction/mean", "accuracy_baseline", "loss"}) {
      EXPECT_TRUE(result.contains(metric)) << metric;
    }
    EXPECT_NEAR(result.at("label/mean"), 0.5, 0.01);
  }
}

TEST(CannedHeadsTest, MultiClassClassifierAndRegressorLearn) {
  TempDir a, b;
  Estimator classifier = dnn_classifier(fast_deep(), run_config(a), /*n_classes=*/3);
  classifier.train(separable(3, false, true), {.max_steps = 400});
  EXPECT_GT(classifier.evaluate(separable(3, false, false)).at("accuracy"), 0.8);
  Predictions predictions = classifier.predict(separable(3, false, false));
  EXPECT_EQ(predictions.next()->at("probabilities").shape(), Shape({3}));

  // Faster than wide & deep's defaults (0.005 and 0.001), to fit in a few hundred steps.
  LinearOptions linear = wide();
  linear.optimizer = nn::optimizers::ftrl(0.3);
  DnnOptions dnn = deep();
  dnn.optimizer = nn::optimizers::adagrad(0.3);
  Estimator regressor = dnn_linear_combined_regressor(linear, dnn, run_config(b));
  regressor.train(separable(2, true, true), {.max_steps = 400});
  EvalResult result = regressor.evaluate(separable(2, true, false));
  EXPECT_LT(result.at("average_loss"), 0.1);
  EXPECT_NEAR(result.at("label/mean"), 1.0, 0.05);
  EXPECT_TRUE(result.contains("prediction/mean"));
}

TEST(CannedHeadsTest, BadOptionsAndLabelsAreInvalidArgument) {
  TempDir dir;
  EXPECT_THROW(linear_classifier({}, run_config(dir)), InvalidArgumentError);
  EXPECT_THROW(dnn_classifier({.feature_columns = deep().feature_columns}, run_config(dir)),
               InvalidArgumentError);
  DnnOptions dropout = deep();
  dropout.dropout = 1;
  EXPECT_THROW(dnn_classifier(dropout, run_config(dir)), InvalidArgumentError);
  EXPECT_THROW(linear_classifier(wide(), run_config(dir), /*n_classes=*/1), InvalidArgumentError);
  EXPECT_THROW(linear_regressor(wide(), run_config(dir), /*label_dimension=*/0),
               InvalidArgumentError);
  // Class 2 of three classes given to a binary classifier.
  Estimator binary = linear_classifier(wide(), run_config(dir));
  EXPECT_THROW(binary.train(separable(3, false, true), {.max_steps = 5}), InvalidArgumentError);
}

}  // namespace
}  // namespace cadre
