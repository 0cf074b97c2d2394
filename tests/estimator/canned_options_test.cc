// The canned estimators' head options and exports: a weight column weighs the loss and every
// metric as repeating examples would; a label vocabulary takes string labels as their ids; an
// export carries TensorFlow's signatures.
#include <gtest/gtest.h>

#include <algorithm>

#include "cadre/base/errors.h"
#include "cadre/estimator/canned.h"
#include "cadre/estimator/predictor.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

namespace fc = feature_column;
using testing::TempDir;

struct Row {
  float x;
  int64_t label;
  float weight;
};

// 64 rows of x in [-1, 1), the label noisy in x, and weights 0, 1 or 2 (`repeat_by_weight`:
// each row repeated weight times instead, with weight 1).
std::vector<Row> rows(bool repeat_by_weight) {
  std::vector<Row> out;
  for (int i = 0; i < 64; ++i) {
    float x = static_cast<float>(i * 37 % 64) / 32.0f - 1.0f;
    Row row{x, (x > 0) != (i % 5 == 0) ? 1 : 0, static_cast<float>(i % 3)};
    if (!repeat_by_weight) {
      out.push_back(row);
      continue;
    }
    for (int k = 0; k < static_cast<int>(row.weight); ++k) out.push_back({row.x, row.label, 1});
  }
  return out;
}

const std::vector<std::string> kVocabulary = {"no", "yes"};

LinearOptions linear() {
  auto x = fc::numeric_column("x");
  return {.feature_columns = {x, fc::bucketized_column(x, {-0.5, 0, 0.5})}};
}

// The rows as examples through the columns; `string_labels`: "no"/"yes" instead of 0/1.
InputFn input(std::vector<Row> data, bool string_labels, bool repeat, int64_t batch = 64) {
  return [=](const InputContext&) {
    size_t i = 0;
    io::Dataset d = io::Dataset::from_generator([=]() mutable -> std::optional<io::Element> {
      if (i == data.size()) return std::nullopt;
      const Row& r = data[i++];
      Tensor label = string_labels ? io::bytes_tensor(kVocabulary[r.label])
                                   : Tensor::from_vector(std::vector<int64_t>{r.label});
      return io::Element{{{"x", Tensor::from_vector(std::vector<float>{r.x})},
                          {"w", Tensor::from_vector(std::vector<float>{r.weight})}},
                         label};
    });
    if (repeat) d = d.repeat();
    std::vector<fc::ColumnPtr> columns = linear().feature_columns;
    columns.push_back(fc::numeric_column("w"));
    return d.map(fc::transform_fn(columns)).padded_batch(batch, -1);
  };
}

RunConfig config(const std::string& model_dir) {
  RunConfig c;
  c.model_dir = model_dir;
  c.tf_random_seed = 5;
  return c;
}

TEST(CannedOptionsTest, AWeightColumnWeighsTheLossAndMetricsAsRepeatedExamples) {
  TempDir dir;
  const std::string model_dir = dir.file("model_dir");
  linear_classifier(linear(), config(model_dir))
      .train(input(rows(false), false, true), {.max_steps = 20});
  Estimator weighted =
      linear_classifier(linear(), config(model_dir), 2, std::nullopt, {.weight_column = "w"});
  Estimator plain = linear_classifier(linear(), config(model_dir));
  EvalResult by_weight = weighted.evaluate(input(rows(false), false, false));
  EvalResult repeated = plain.evaluate(input(rows(true), false, false, /*batch=*/1000));
  for (const char* metric :
       {"accuracy", "auc", "auc_precision_recall", "precision", "recall", "average_loss",
        "label/mean", "prediction/mean", "accuracy_baseline"}) {
    EXPECT_NEAR(by_weight.at(metric), repeated.at(metric), 1e-5) << metric;
  }
  // The loss sums the weighted losses over the batch (64 examples, weights summing to 63),
  // TensorFlow's SUM_OVER_BATCH_SIZE: one batch, so loss = average_loss * 63 / 64.
  EXPECT_NEAR(by_weight.at("loss"), by_weight.at("average_loss") * 63 / 64, 1e-5);
  // A missing weight feature names it.
  Estimator missing =
      linear_classifier(linear(), config(model_dir), 2, std::nullopt, {.weight_column = "v"});
  try {
    missing.evaluate(input(rows(false), false, false));
    FAIL() << "no error for a missing weight column";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("weight_column 'v'"), std::string::npos) << e.what();
  }
}

TEST(CannedOptionsTest, ALabelVocabularyTakesStringLabelsAsTheirIds) {
  TempDir a, b;
  Estimator ids = linear_classifier(linear(), config(a.file("m")));
  Estimator strings = linear_classifier(linear(), config(b.file("m")), 2, std::nullopt,
                                        {.label_vocabulary = kVocabulary});
  ids.train(input(rows(false), false, true), {.max_steps = 30});
  strings.train(input(rows(false), true, true), {.max_steps = 30});
  EvalResult from_ids = ids.evaluate(input(rows(false), false, false, 16));
  EvalResult from_strings = strings.evaluate(input(rows(false), true, false, 16));
  for (const char* metric : {"accuracy", "auc", "average_loss", "loss"}) {
    EXPECT_DOUBLE_EQ(from_ids.at(metric), from_strings.at(metric)) << metric;
  }
  // Labels outside the vocabulary, or a vocabulary of the wrong size, are errors.
  Estimator other = linear_classifier(linear(), config(b.file("other")), 2, std::nullopt,
                                      {.label_vocabulary = {"n", "y"}});
  EXPECT_THROW(other.train(input(rows(false), true, true), {.max_steps = 1}), InvalidArgumentError);
  EXPECT_THROW(linear_classifier(linear(), config(b.file("x")), 3, std::nullopt,
                                 {.label_vocabulary = kVocabulary}),
               InvalidArgumentError);
  EXPECT_THROW(linear_regressor(linear(), config(b.file("x")), 1, std::nullopt,
                                {.label_vocabulary = kVocabulary}),
               InvalidArgumentError);
}

TEST(CannedOptionsTest, ExportsCarryTensorFlowsSignatures) {
  TempDir dir;
  Estimator classifier =
      dnn_classifier({.hidden_units = {4}, .feature_columns = {fc::numeric_column("x")}},
                     config(dir.file("c")), 2, std::nullopt, {.label_vocabulary = kVocabulary});
  classifier.train(input(rows(false), true, true), {.max_steps = 5});
  io::Features serving{
      {"x", Tensor::from_vector(std::vector<float>{0.5f, -0.5f}, Shape{2, 1})},
      {"x_bucketized", Tensor::from_vector(std::vector<int64_t>{3, 1}, Shape{2, 1})}};
  ModelFn model_fn = classifier.model_fn();
  auto predictor = Predictor::load(classifier.export_model(dir.file("export"), serving), model_fn);
  std::vector<std::string> signatures = predictor->signatures();
  std::sort(signatures.begin(), signatures.end());
  EXPECT_EQ(signatures, (std::vector<std::string>{"classification", "predict", "serving_default"}));
  const ExportOutput& classify = predictor->export_output("serving_default");
  EXPECT_EQ(classify.kind_name(), "classify");
  EXPECT_EQ(classify.scores, "probabilities");
  EXPECT_EQ(classify.class_names, kVocabulary);

  Estimator regressor = linear_regressor(linear(), config(dir.file("r")));
  regressor.train(input(rows(false), false, true), {.max_steps = 5});
  auto regression =
      Predictor::load(regressor.export_model(dir.file("export_r"), serving), regressor.model_fn());
  EXPECT_EQ(regression->export_output("regression").kind_name(), "regress");
  EXPECT_EQ(regression->export_output("serving_default").value, "predictions");
}

}  // namespace
}  // namespace cadre
