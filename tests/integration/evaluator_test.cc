// A chief and an evaluator as separate processes (TF_CONFIG per process, as an orchestrator
// sets it): the evaluator evaluates every checkpoint exactly once although retention keeps
// only two, exits after the final one, catches up when started late, and redoes nothing
// when restarted.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/early_stopping.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "tests/support/eval_events.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

constexpr char kCluster[] = R"("cluster": {"chief": ["127.0.0.1:1"]})";

pid_t start(const std::string& type, const std::string& model_dir, int steps, int step_ms,
            std::map<std::string, std::string> environment = {}) {
  environment["TF_CONFIG"] =
      std::string("{") + kCluster + R"(, "task": {"type": ")" + type + R"(", "index": 0}})";
  return testing::spawn(
      {CADRE_ROLE_HELPER, model_dir, std::to_string(steps), std::to_string(step_ms)},
      {environment.begin(), environment.end()});
}

using testing::evaluations;
using testing::wait_for;

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

// TensorFlow's defaults pace an evaluator (a first look after start_delay_secs, then one
// evaluation per throttle_secs); retention must not delete what it will want meanwhile, and
// once training has finished the backlog is evaluated at once, not one per throttle.
TEST_F(EvaluatorTest, TheEvaluatorsCheckpointsAreKeptFromTheStartAndTheBacklogRunsAtOnce) {
  std::string dir = path("model");
  auto started = std::chrono::steady_clock::now();
  pid_t evaluator = start("evaluator", dir, 60, 0,
                          {{"EVAL_START_DELAY_SECS", "3"}, {"EVAL_THROTTLE_SECS", "60"}});
  // Its lease is there before the chief saves anything.
  while (!std::filesystem::exists(dir + "/.leases") &&
         std::chrono::steady_clock::now() - started < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(wait_for(start("chief", dir, 60, 5)), 0);
  EXPECT_EQ(wait_for(evaluator), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(40))
      << "the throttle held back the backlog after training finished";
  EXPECT_EQ(evaluations(dir),
            (std::map<int64_t, int>{{10, 1}, {20, 1}, {30, 1}, {40, 1}, {50, 1}, {60, 1}}));
  auto env = posix_env();
  EXPECT_LE(checkpoint::list_checkpoint_files(*env, dir).size(), 3u);
}

// A finished job resumed with a larger max_steps: the evaluator started with it follows the
// new run to its end instead of taking the previous run's marker for it.
TEST_F(EvaluatorTest, AResumedJobIsFollowedToItsNewEnd) {
  std::string dir = path("model");
  pid_t evaluator = start("evaluator", dir, 20, 0);
  EXPECT_EQ(wait_for(start("chief", dir, 20, 0)), 0);
  EXPECT_EQ(wait_for(evaluator), 0);
  evaluator = start("evaluator", dir, 40, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // it sees the old marker first
  EXPECT_EQ(wait_for(start("chief", dir, 40, 5)), 0);
  EXPECT_EQ(wait_for(evaluator), 0);
  EXPECT_EQ(read_training_finished(dir), 40);
  EXPECT_EQ(evaluations(dir), (std::map<int64_t, int>{{10, 1}, {20, 1}, {30, 1}, {40, 1}}));
}

TEST_F(EvaluatorTest, ATrainingClusterWithoutAMultiWorkerStrategyIsRefused) {
  // HOME: a task of a real cluster makes the user's default secret there.
  std::filesystem::create_directories(path("home"));
  pid_t pid = testing::spawn({CADRE_ROLE_HELPER, path("model"), "10", "0"},
                             {{"TF_CONFIG", R"({"cluster": {"chief": ["127.0.0.1:1"],
                                                            "worker": ["127.0.0.1:2"]},
                                               "task": {"type": "worker", "index": 0}})"},
                              {"HOME", path("home")}});
  EXPECT_EQ(wait_for(pid), 1);
}

}  // namespace
}  // namespace cadre
