// Canned estimators: a model_dir TensorFlow 2.15's DNNLinearCombinedClassifier trained
// (testdata/tf_wide_deep, tools/compat/make_tf_canned_testdata.py) predicts and evaluates here
// as TensorFlow did and trains on; TensorFlow's variable names; each head learns; bad options.
#include "cadre/estimator/canned.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cadre/base/errors.h"
#include "cadre/io/csv.h"
#include "cadre/nn/optimizers.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

namespace fc = feature_column;
using testing::TempDir;

struct Columns {
  std::vector<fc::ColumnPtr> wide, all;
  std::vector<fc::DensePtr> deep;
};

// make_tf_canned_testdata.py's columns.
Columns tf_columns() {
  auto x = fc::numeric_column("x");
  auto color = fc::categorical_column_with_vocabulary_list("color", {"red", "green", "blue"});
  auto city = fc::categorical_column_with_hash_bucket("city", 7);
  Columns c;
  c.wide = {color, fc::bucketized_column(x, {-0.5, 0.0, 0.5}),
            fc::crossed_column({"color", "city"}, 11)};
  c.deep = {x, fc::indicator_column(color), fc::embedding_column(city, 3)};
  c.all = c.wide;
  c.all.insert(c.all.end(), c.deep.begin(), c.deep.end());
  return c;
}

InputFn test_rows(const Columns& columns, bool repeat = false) {
  return [columns, repeat](const InputContext&) {
    io::CsvOptions options;
    options.columns = {{"x"},
                       {"color", io::CsvType::kString},
                       {"city", io::CsvType::kString},
                       {"label", io::CsvType::kInt64}};
    options.label_column = "label";
    io::Dataset rows = io::csv_dataset({std::string(CADRE_TF_WIDE_DEEP) + "/test.csv"}, options);
    if (repeat) rows = rows.repeat();
    return rows.map(fc::transform_fn(columns.all)).padded_batch(16, -1);
  };
}

// expected.txt: "logistic p0 p1 ..." then "metric value" lines.
std::map<std::string, std::vector<double>> expected() {
  std::ifstream in(std::string(CADRE_TF_WIDE_DEEP) + "/expected.txt");
  std::map<std::string, std::vector<double>> values;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    for (double v; fields >> v;) values[key].push_back(v);
  }
  return values;
}

Estimator tf_trained(const std::string& model_dir) {
  std::filesystem::copy(CADRE_TF_WIDE_DEEP, model_dir);
  RunConfig config;
  config.model_dir = model_dir;
  Columns c = tf_columns();
  // The optimizers TensorFlow trained with, to train on as it would.
  return dnn_linear_combined_classifier(
      {.feature_columns = c.wide, .optimizer = nn::optimizers::ftrl(0.2)},
      {.hidden_units = {4, 3},
       .feature_columns = c.deep,
       .optimizer = nn::optimizers::adagrad(0.1)},
      config);
}

TEST(CannedTest, LoadsATensorFlowModelDirAndPredictsItsProbabilities) {
  TempDir dir;
  Estimator estimator = tf_trained(dir.file("model_dir"));
  std::map<std::string, std::vector<double>> tf = expected();
  Predictions predictions = estimator.predict(test_rows(tf_columns()));
  size_t row = 0;
  while (auto p = predictions.next()) {
    ASSERT_LT(row, tf["logistic"].size());
    EXPECT_NEAR(p->at("logistic").item<double>(), tf["logistic"][row], 1e-5) << row;
    std::vector<double> probabilities = p->at("probabilities").to_vector<double>();
    EXPECT_NEAR(probabilities[1], tf["logistic"][row], 1e-5);
    EXPECT_EQ(p->at("class_ids").item<int64_t>(), tf["logistic"][row] > 0.5 ? 1 : 0);
    ++row;
  }
  EXPECT_EQ(row, tf["logistic"].size());
}

TEST(CannedTest, EvaluatesATensorFlowModelDirToItsMetrics) {
  TempDir dir;
  Estimator estimator = tf_trained(dir.file("model_dir"));
  EvalResult result = estimator.evaluate(test_rows(tf_columns()));
  for (const char* metric :
       {"accuracy", "accuracy_baseline", "auc", "auc_precision_recall", "average_loss",
        "label/mean", "loss", "precision", "prediction/mean", "recall"}) {
    ASSERT_TRUE(result.contains(metric)) << metric;
    EXPECT_NEAR(result.at(metric), expected()[metric].at(0), 1e-5) << metric;
  }
}

// Ten steps on the test rows (one batch, in order) from TensorFlow's checkpoint: Ftrl's and
// Adagrad's slots and updates, sparse and dense, give TensorFlow's predictions after its own ten.
TEST(CannedTest, TrainsATensorFlowModelDirOnAsTensorFlowDoes) {
  TempDir dir;
  Estimator estimator = tf_trained(dir.file("model_dir"));
  EXPECT_EQ(estimator.train(test_rows(tf_columns(), true), {.max_steps = 40}), 40);
  std::vector<std::string> names = estimator.get_variable_names();
  for (const char* name : {"linear/linear_model/city_X_color/weights/Ftrl/linear",
                           "dnn/hiddenlayer_0/kernel/Adagrad/accumulator", "Adagrad/iterations"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  // TensorFlow saves no step counter for the DNN's optimizer: it is the global step.
  EXPECT_EQ(estimator.get_variable_value("Adagrad/iterations").item<int64_t>(), 40);
  std::vector<double> expected_after = expected()["logistic_after_10_more_steps"];
  Predictions predictions = estimator.predict(test_rows(tf_columns()));
  size_t row = 0;
  while (auto p = predictions.next()) {
    ASSERT_LT(row, expected_after.size());
    EXPECT_NEAR(p->at("logistic").item<double>(), expected_after[row++], 1e-5) << row;
  }
  EXPECT_EQ(row, expected_after.size());
}

}  // namespace
}  // namespace cadre
