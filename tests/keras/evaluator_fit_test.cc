// model_to_estimator in a cluster: the Estimator made from a compiled Keras model runs
// train_and_evaluate in a chief process and in an evaluator process (TF_CONFIG each); the
// evaluator evaluates every checkpoint the chief writes, once, ending with the final one at
// max_steps, with the Keras model's loss and metrics.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "cadre/cadre.h"
#include "tests/keras/fresh_dir.h"
#include "tests/keras/keras_test_data.h"
#include "tests/support/eval_events.h"
#include "tests/support/processes.h"

namespace cadre::keras {
namespace {

using cadre::testing::read_log;
using cadre::testing::tail;

constexpr char kCluster[] = R"("cluster": {"chief": ["127.0.0.1:1"]})";
constexpr double kEvaluatorTaskSeconds = 120;

pid_t start(const std::string& type, const std::string& root) {
  std::string tf_config =
      std::string("{") + kCluster + R"(, "task": {"type": ")" + type + R"(", "index": 0}})";
  return cadre::testing::spawn({CADRE_KERAS_FIT_HELPER, root + "/model", "estimator"},
                               {{"TF_CONFIG", tf_config}}, root + "/" + type + ".log");
}

TEST(EvaluatorFitTest, ModelToEstimatorTrainsOnTheChiefAndTheEvaluatorFollowsIt) {
  std::string root = testing::fresh_dir("evaluator_fit");
  std::string dir = root + "/model";
  std::filesystem::create_directories(dir);
  cadre::testing::Children children;
  // The evaluator first: it waits for the chief's checkpoints.
  pid_t evaluator = children.add(start("evaluator", root));
  pid_t chief = children.add(start("chief", root));
  ASSERT_EQ(children.wait(chief, kEvaluatorTaskSeconds), 0) << tail(read_log(root + "/chief.log"));
  ASSERT_EQ(children.wait(evaluator, kEvaluatorTaskSeconds), 0)
      << tail(read_log(root + "/evaluator.log"));
  EXPECT_EQ(read_training_finished(dir), 30);
  EXPECT_EQ(cadre::testing::evaluations(dir), (std::map<int64_t, int>{{10, 1}, {20, 1}, {30, 1}}));
  // The evaluator's final evaluation is the Keras model's own on the chief's last checkpoint.
  Sequential model({InputLayer({8}, {.name = "x"}), Dense(16, "relu"), Dense(4)});
  RunConfig config;
  config.model_dir = dir;
  config.tf_random_seed = 7;
  model.compile({.optimizer = nn::optimizers::adam(0.01),
                 .loss = SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"},
                 .config = config});
  EvalResult final_eval = model.evaluate(testing::blobs(64));
  EXPECT_EQ(final_eval["global_step"], 30);
  std::string line = read_log(dir + "/final_eval_evaluator.txt");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      line, m, std::regex(R"(\{"task":"evaluator","global_step":30,"loss":([-0-9.e]+)\})")))
      << line << tail(read_log(root + "/evaluator.log"));
  EXPECT_NEAR(std::stod(m[1]), final_eval["loss"], 1e-6);
}

}  // namespace
}  // namespace cadre::keras
