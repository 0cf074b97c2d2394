// cadre_launch runs a chief, a worker and an evaluator of a real program on loopback:
// output prefixed per task, "started" lines, exit status 0 when all succeed; a worker
// killed with SIGKILL under --max_restarts=2 restarts the training tasks, which resume from
// the last checkpoint and finish at max_steps.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <regex>
#include <string>

#include "cadre/checkpoint/reader.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"
#include "tools/cadre_launch/launcher.h"

namespace cadre {
namespace {

// Runs cadre_launch; calls on_line for each output line (which may kill a task).
template <typename F>
testing::CommandResult launch(const std::string& args, F on_line) {
  return testing::run_command(std::string(CADRE_LAUNCH) + " " + args + " 2>&1", on_line);
}

std::string program(const std::string& model_dir, int steps) {
  return std::string(" -- ") + CADRE_FASHION_MNIST + " --model_dir=" + model_dir +
         " --strategy=multi_worker_mirrored --max_steps=" + std::to_string(steps) +
         " --save_checkpoints_steps=100 --eval_steps=2 --batch_size=64";
}

class LaunchTest : public cadre::testing::TempDirTest {};

TEST_F(LaunchTest, AChiefAWorkerAndAnEvaluatorRunToTheEnd) {
  testing::CommandResult run = launch(
      "--chief=1 --workers=1 --evaluator=1" + program(path("m"), 200), [](const std::string&) {});
  EXPECT_EQ(run.status, 0) << testing::tail(run.output);
  for (const char* expected :
       {"started chief:0 pid=", "started worker:0 pid=", "started evaluator:0 pid=", "[worker:0] ",
        "[chief:0] ",
        "strategy multi_worker_mirrored: 1 replica on cpu:0 on each of 2 workers; batch 32 per "
        "replica (64 per step); gradients: shared memory all-reduce across 2 workers"}) {
    EXPECT_NE(run.output.find(expected), std::string::npos) << expected;
  }
  EXPECT_TRUE(std::regex_search(
      run.output,
      std::regex(
          R"(\[evaluator:0\] \{"task":"evaluator","model":"mlp","global_step":200,"accuracy":0\.[5-9])")))
      << testing::tail(run.output, 2000);
  EXPECT_EQ(read_training_finished(path("m")), 200);
}

TEST_F(LaunchTest, AKilledWorkerIsRestartedWithTheChiefAndTrainingFinishes) {
  // After the first checkpoint, once.
  testing::KillTaskOnce kill("worker:0", [](const std::string& line) {
    return line.find("saved checkpoint for step 100") != std::string::npos;
  });
  testing::CommandResult run =
      launch("--chief=1 --workers=1 --max_restarts=2" + program(path("m"), 400), std::ref(kill));
  EXPECT_TRUE(kill.killed());
  EXPECT_EQ(run.status, 0) << testing::tail(run.output);
  EXPECT_NE(run.output.find("restarting the training tasks together (restart 1 of 2)"),
            std::string::npos);
  EXPECT_NE(run.output.find("resuming from"), std::string::npos);
  EXPECT_NE(run.output.find(R"([chief:0] {"task":"chief","model":"mlp","global_step":400)"),
            std::string::npos);
}

TEST_F(LaunchTest, WithoutRestartsAFailureStopsTheClusterWithAnError) {
  testing::CommandResult run =
      launch("--chief=1 --workers=1 -- " + std::string(CADRE_FASHION_MNIST) +
                 " --model_dir=" + path("m") + " --strategy=multi_worker_mirrored --model=nope",
             [](const std::string&) {});
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.output.find("unknown model 'nope'"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("failed (exit status 1); stopping the cluster"), std::string::npos);
}

// Every worker's input position and random streams are in the chief's checkpoints: a job
// stopped at step 200 and relaunched ends at step 300 with the very variables of one that ran
// through. A third worker cannot take up two workers' positions: every worker then starts
// its new shard over, and says so.
TEST_F(LaunchTest, MultiWorkerResumeIsBitExact) {
  auto train = [&](const std::string& dir, int steps, int workers = 1) {
    testing::CommandResult run =
        launch("--chief=1 --workers=" + std::to_string(workers) + program(dir, steps) +
                   (workers == 2 ? " --batch_size=96" : ""),
               [](const std::string&) {});
    EXPECT_EQ(run.status, 0) << testing::tail(run.output);
    return run.output;
  };
  train(path("straight"), 300);
  train(path("split"), 200);
  std::string resumed = train(path("split"), 300);
  EXPECT_EQ(resumed.find("reads its new shard from the start"), std::string::npos);
  auto straight = checkpoint::CheckpointReader::open(path("straight") + "/model.ckpt-300.h5");
  auto split = checkpoint::CheckpointReader::open(path("split") + "/model.ckpt-300.h5");
  EXPECT_EQ(split->attributes().at("input_pipelines"), "2");
  for (const auto& [name, info] : straight->variables()) {
    Tensor a = straight->read(name), b = split->read(name);
    ASSERT_EQ(a.nbytes(), b.nbytes()) << name;
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << name << " differs";
  }
  std::string regrown = train(path("split"), 350, /*workers=*/2);
  EXPECT_NE(
      regrown.find("the checkpoint holds the input positions of 2 worker(s) and this job "
                   "shards its input over 3: every worker reads its new shard from the start"),
      std::string::npos)
      << testing::tail(regrown);
}

}  // namespace
}  // namespace cadre
