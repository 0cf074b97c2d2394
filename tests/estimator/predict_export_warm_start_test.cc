// Estimator: predict, export and load (the exported model predicts as the Estimator does),
// and warm start from another model's checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/predictor.h"
#include "checkpoint/tf_bundle.h"
#include "tests/estimator/estimator_test.h"
#include "tests/estimator/test_model.h"
#include "tests/support/fault_env.h"

namespace cadre {
namespace {

using testing::classifier_fn;
using testing::eval_input;
using testing::predict_input;
using testing::test_config;
using testing::train_input;

using testing::EstimatorTest;

// A failure at any step of an export leaves no export and nothing temporary behind, and
// the next export succeeds. (A crash leaves the temporary directory, which is never taken
// for an export.)
TEST_F(EstimatorTest, AnExportInterruptedAtAnyStepLeavesNothing) {
  auto env = std::make_shared<cadre::testing::FaultEnv>();
  RunConfig config = test_config(model_dir());
  config.env = env;
  Estimator estimator(classifier_fn, config);
  estimator.train(train_input, {.max_steps = 10});
  auto [x, y] = testing::classification_data(2);
  Features serving{{"x", x}};
  env->fail_from(-1);
  estimator.export_model(path("whole"), serving);
  int steps = env->mutations();
  ASSERT_GT(steps, 3);
  for (int failing = 0; failing < steps; ++failing) {
    std::filesystem::remove_all(path("exports"));
    env->fail_from(failing, /*once=*/true);
    EXPECT_THROW(estimator.export_model(path("exports"), serving), UnavailableError) << failing;
    env->fail_from(-1);
    if (std::filesystem::exists(path("exports"))) {
      EXPECT_TRUE(std::filesystem::is_empty(path("exports"))) << failing;
    }
  }
  std::string dir = estimator.export_model(path("exports"), serving);
  EXPECT_EQ(std::filesystem::path(dir).parent_path(), path("exports"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/export.json"));
}

// As TensorFlow's export_saved_model: each export is a new directory under the base named by
// the time in seconds, so that a program run twice exports twice instead of failing.
TEST_F(EstimatorTest, ExportingAgainAddsATimestampedExport) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  estimator.train(train_input, {.max_steps = 10});
  auto [x, y] = testing::classification_data(2);
  std::string first = estimator.export_model(path("exports"), Features{{"x", x}});
  estimator.train(train_input, {.max_steps = 20});
  std::string second = estimator.export_model(path("exports"), Features{{"x", x}});
  ASSERT_NE(first, second);
  for (const std::string& dir : {first, second}) {
    std::string name = std::filesystem::path(dir).filename();
    EXPECT_EQ(std::filesystem::path(dir).parent_path(), path("exports"));
    EXPECT_TRUE(!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) << name;
    EXPECT_GE(std::stoll(name), 1700000000) << "seconds since the epoch";
  }
  EXPECT_GT(std::stoll(std::filesystem::path(second).filename()),
            std::stoll(std::filesystem::path(first).filename()));
  EXPECT_EQ(Predictor::load(first, classifier_fn)->global_step(), 10);
  EXPECT_EQ(Predictor::load(second, classifier_fn)->global_step(), 20);
}

TEST_F(EstimatorTest, PredictStreamsPerExamplePredictions) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  estimator.train(train_input, {.max_steps = 30});
  Predictions predictions = estimator.predict(predict_input, {.predict_keys = {"class"}});
  int count = 0;
  while (auto p = predictions.next()) {
    ASSERT_EQ(p->size(), 1u);
    EXPECT_EQ(p->at("class").rank(), 0);
    ++count;
  }
  EXPECT_EQ(count, 20);  // batches of 8, 8 and 4
  EXPECT_FALSE(predictions.next().has_value());
}

TEST_F(EstimatorTest, UnknownPredictKeyListsTheValidOnes) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  estimator.train(train_input, {.max_steps = 5});
  Predictions predictions = estimator.predict(predict_input, {.predict_keys = {"klass"}});
  try {
    predictions.next();
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'klass'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("class, probabilities"), std::string::npos) << e.what();
  }
}

TEST_F(EstimatorTest, PredictWithoutACheckpointIsNotFound) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  EXPECT_THROW(estimator.predict(predict_input), NotFoundError);
  EXPECT_THROW(estimator.evaluate(eval_input), NotFoundError);
}

TEST_F(EstimatorTest, ExportedModelPredictsExactlyAsTheEstimator) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  estimator.train(train_input, {.max_steps = 40});
  auto [x, y] = testing::classification_data(20, 100000);
  std::string dir = estimator.export_model(path("export"), Features{{"x", x.slice(0, 0, 2)}});
  EXPECT_TRUE(std::filesystem::exists(dir + "/variables.h5"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/export.json"));

  auto predictor = Predictor::load(dir, classifier_fn);
  EXPECT_EQ(predictor->global_step(), 40);
  EXPECT_EQ(predictor->signatures(), std::vector<std::string>{"serving_default"});
  std::vector<float> from_estimator;
  Predictions predictions = estimator.predict(predict_input);
  while (auto p = predictions.next()) {
    for (float v : p->at("probabilities").to_vector<float>()) from_estimator.push_back(v);
  }
  // The same batches as predict_input (8, 8, 4): a GEMM's last bits may depend on the
  // batch size, the model's values must not depend on the way they were loaded.
  std::vector<float> from_predictor;
  for (int64_t at = 0; at < 20; at += 8) {
    auto out = predictor->predict(Features{{"x", x.slice(0, at, std::min<int64_t>(at + 8, 20))}});
    for (float v : out.at("probabilities").to_vector<float>()) from_predictor.push_back(v);
  }
  EXPECT_EQ(from_predictor, from_estimator);
  // Inputs are checked against what was exported.
  EXPECT_THROW(predictor->predict(Features{{"y", x}}), InvalidArgumentError);
  EXPECT_THROW(predictor->predict(Features{{"x", x.slice(1, 0, 4)}}), InvalidArgumentError);
  EXPECT_THROW(predictor->predict(Features{{"x", x}}, "nope"), InvalidArgumentError);
}

TEST_F(EstimatorTest, WarmStartTakesTheChosenVariablesFromAnotherModel) {
  Estimator source(classifier_fn, test_config(model_dir("source")));
  source.train(train_input, {.max_steps = 30});
  WarmStartSettings warm;
  warm.ckpt_to_initialize_from = model_dir("source");
  warm.vars_to_warm_start = "hidden/.*";
  Estimator target(classifier_fn, test_config(model_dir("target")), {}, warm);
  auto recorder = std::make_shared<testing::LossRecorder>();
  target.train(train_input, {.max_steps = 1});
  // Step 1 moved the variables a little from the warm-started values: compare loosely for
  // hidden/ and check that logits/ did not come from the source.
  auto near = [](const Tensor& a, const Tensor& b) {
    auto va = a.to_vector<double>(), vb = b.to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vb[i]));
    return worst;
  };
  EXPECT_LT(
      near(source.get_variable_value("hidden/kernel"), target.get_variable_value("hidden/kernel")),
      0.02);
  EXPECT_GT(
      near(source.get_variable_value("logits/kernel"), target.get_variable_value("logits/kernel")),
      0.05);
  // The new model starts at step 0 and keeps its own optimizer state.
  EXPECT_EQ(checkpoint::CheckpointReader::open(*target.latest_checkpoint())->global_step(), 1);
}

TEST_F(EstimatorTest, WarmStartRenamesVariables) {
  Estimator source(classifier_fn, test_config(model_dir("source")));
  source.train(train_input, {.max_steps = 10});
  auto renamed_fn = [](const Features& f, const Tensor& labels, ModeKeys mode, const Params& p) {
    nn::NameScope scope("v2");
    return classifier_fn(f, labels, mode, p);
  };
  WarmStartSettings warm;
  warm.ckpt_to_initialize_from = *source.latest_checkpoint();
  warm.vars_to_warm_start = "v2/hidden/kernel";
  warm.var_name_to_prev_var_name = {{"v2/hidden/kernel", "hidden/kernel"}};
  RunConfig config = test_config(model_dir("target"));
  Estimator target(renamed_fn, config, {{"learning_rate", 1e-9}}, warm);
  target.train(train_input, {.max_steps = 1});
  auto a = source.get_variable_value("hidden/kernel").to_vector<float>();
  auto b = target.get_variable_value("v2/hidden/kernel").to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
}

// A TensorFlow checkpoint (what cadre_ckpt convert writes, as TensorFlow's Saver does):
// warm start takes its variables by name, and a model_dir holding one resumes from it,
// the optimizer's state included.
TEST_F(EstimatorTest, WarmStartAndResumeFromATensorFlowCheckpoint) {
  Estimator source(classifier_fn, test_config(model_dir("source")));
  source.train(train_input, {.max_steps = 10});
  auto cadre = checkpoint::CheckpointReader::open(*source.latest_checkpoint());
  std::shared_ptr<Env> env = posix_env();
  const std::string prefix = model_dir("tf") + "/model.ckpt-10";
  checkpoint::internal::write_as_tf_bundle(*cadre, *env, prefix);

  WarmStartSettings warm;
  warm.ckpt_to_initialize_from = prefix;
  // A learning rate too small to move anything: the values are the checkpoint's.
  const Params still = {{"learning_rate", 1e-12}};
  auto expect_near = [](const Tensor& a, const Tensor& b, const std::string& name) {
    std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
    ASSERT_EQ(va.size(), vb.size()) << name;
    for (size_t i = 0; i < va.size(); ++i) EXPECT_NEAR(va[i], vb[i], 1e-9) << name;
  };
  Estimator target(classifier_fn, test_config(model_dir("target")), still, warm);
  target.train(train_input, {.max_steps = 1});
  expect_near(source.get_variable_value("hidden/kernel"),
              target.get_variable_value("hidden/kernel"), "hidden/kernel");

  checkpoint::CheckpointState state;
  state.model_checkpoint_path = "model.ckpt-10";
  state.all_model_checkpoint_paths = {"model.ckpt-10"};
  checkpoint::write_state(*env, model_dir("tf"), state);
  Estimator resumed(classifier_fn, test_config(model_dir("tf")), still);
  resumed.train(train_input, {.max_steps = 12});
  auto after = checkpoint::CheckpointReader::open(*resumed.latest_checkpoint());
  EXPECT_EQ(after->global_step(), 12);
  for (const auto& [name, info] : cadre->variables()) {
    if (!info.slot_of.empty() || name.ends_with("/iterations")) continue;
    expect_near(cadre->read(name), after->read(name), name);
  }
  // The optimizer's step counter came back from training/Adam/iter.
  EXPECT_EQ(after->read("Adam/iterations").item<int64_t>(), 12);
}

TEST_F(EstimatorTest, ACheckpointOfAnotherModelIsRejectedByName) {
  Estimator first(classifier_fn, test_config(model_dir()));
  first.train(train_input, {.max_steps = 5});
  auto other_fn = [](const Features& f, const Tensor& labels, ModeKeys mode, const Params& p) {
    Tensor logits = nn::dense("other", f.at("x"), 3);
    return EstimatorSpec::train(nn::sparse_softmax_cross_entropy(labels, logits),
                                nn::optimizers::sgd(0.1));
  };
  Estimator second(other_fn, test_config(model_dir()));
  try {
    second.train(train_input, {.max_steps = 10});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'other/kernel'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.ckpt-5.h5"), std::string::npos) << e.what();
  }
  // Nothing was overwritten.
  EXPECT_EQ(checkpoint::CheckpointReader::open(*first.latest_checkpoint())->global_step(), 5);
}

}  // namespace
}  // namespace cadre
