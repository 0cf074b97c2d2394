// A chief and an evaluator as separate processes (TF_CONFIG per process, as an orchestrator
// sets it): the evaluator evaluates every checkpoint exactly once although retention keeps
// only two, exits after the final one, catches up when started late, and redoes nothing
// when restarted.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/early_stopping.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "cadre/io/event_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/processes.h"

namespace cadre {
namespace {

constexpr char kCluster[] = R"("cluster": {"chief": ["127.0.0.1:1"]})";

pid_t start(const std::string& type, const std::string& model_dir, int steps, int step_ms) {
  std::string tf_config =
      std::string("{") + kCluster + R"(, "task": {"type": ")" + type + R"(", "index": 0}})";
  return testing::spawn(
      {CADRE_ROLE_HELPER, model_dir, std::to_string(steps), std::to_string(step_ms)},
      {{"TF_CONFIG", tf_config}});
}

using testing::wait_for;

// How many evaluations the eval directory records for each step.
std::map<int64_t, int> evaluations(const std::string& model_dir) {
  std::map<int64_t, int> count;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir + "/eval")) {
    for (const io::Event& event : io::read_event_file(entry.path().string())) {
      for (const io::SummaryValue& v : event.values) {
        if (v.tag == "loss") ++count[event.step];
      }
    }
  }
  return count;
}

class EvaluatorTest : public cadre::testing::TempDirTest {};

TEST_F(EvaluatorTest, EvaluatesEveryCheckpointOnceAndExitsAfterTheFinalOne) {
  std::string dir = path("model");
  pid_t chief = start("chief", dir, 60, 15);
  pid_t evaluator = start("evaluator", dir, 60, 0);
  EXPECT_EQ(wait_for(chief), 0);
  EXPECT_EQ(wait_for(evaluator), 0);
  EXPECT_EQ(read_training_finished(dir), 60);
  EXPECT_EQ(evaluations(dir),
            (std::map<int64_t, int>{{10, 1}, {20, 1}, {30, 1}, {40, 1}, {50, 1}, {60, 1}}));
  // Retention caught up once the evaluator released its leases.
  auto env = posix_env();
  EXPECT_LE(checkpoint::list_checkpoint_files(*env, dir).size(), 3u);

  // Restarted, it finds everything evaluated and exits at once.
  EXPECT_EQ(wait_for(start("evaluator", dir, 60, 0)), 0);
  EXPECT_EQ(evaluations(dir).size(), 6u);
}

TEST_F(EvaluatorTest, AnEvaluatorStartedLateCatchesUpOnWhatRetentionKept) {
  std::string dir = path("model");
  EXPECT_EQ(wait_for(start("chief", dir, 40, 0)), 0);
  EXPECT_EQ(wait_for(start("evaluator", dir, 40, 0)), 0);
  EXPECT_EQ(evaluations(dir), (std::map<int64_t, int>{{30, 1}, {40, 1}}));  // the two kept
}

TEST_F(EvaluatorTest, ATrainingClusterWithoutAMultiWorkerStrategyIsRefused) {
  pid_t pid = testing::spawn({CADRE_ROLE_HELPER, path("model"), "10", "0"},
                             {{"TF_CONFIG", R"({"cluster": {"chief": ["127.0.0.1:1"],
                                                            "worker": ["127.0.0.1:2"]},
                                               "task": {"type": "worker", "index": 0}})"}});
  EXPECT_EQ(wait_for(pid), 1);
}

}  // namespace
}  // namespace cadre
