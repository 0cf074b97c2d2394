// cadre_launch runs a chief, a worker and an evaluator of a real program on loopback:
// output prefixed per task, "started" lines, exit status 0 when all succeed; a worker
// killed with SIGKILL under --max_restarts=2 restarts the training tasks, which resume from
// the last checkpoint and finish at max_steps.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <regex>
#include <string>

#include "estimator/train_and_evaluate.h"
#include "tests/io/temp_dir.h"

namespace cadre {
namespace {

struct Launch {
  int status = -1;
  std::string output;
};

// Runs cadre_launch; calls on_line for each output line (which may kill a task).
template <typename F>
Launch launch(const std::string& args, F on_line) {
  std::string command = std::string(CADRE_LAUNCH) + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  Launch result;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe)) {
    result.output += line;
    on_line(std::string(line));
  }
  int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string program(const std::string& model_dir, int steps) {
  return std::string(" -- ") + CADRE_FASHION_MNIST + " --model_dir=" + model_dir +
         " --strategy=multi_worker_mirrored --max_steps=" + std::to_string(steps) +
         " --save_checkpoints_steps=100 --eval_steps=2 --batch_size=64";
}

class LaunchTest : public io::testing::TempDirTest {};

TEST_F(LaunchTest, AChiefAWorkerAndAnEvaluatorRunToTheEnd) {
  Launch run = launch("--chief=1 --workers=1 --evaluator=1" + program(path("m"), 200),
                      [](const std::string&) {});
  EXPECT_EQ(run.status, 0) << run.output.substr(run.output.size() > 3000 ? run.output.size() - 3000
                                                                         : 0);
  for (const char* expected : {"started chief:0 pid=", "started worker:0 pid=",
                               "started evaluator:0 pid=", "[worker:0] ", "[chief:0] "}) {
    EXPECT_NE(run.output.find(expected), std::string::npos) << expected;
  }
  EXPECT_TRUE(std::regex_search(
      run.output,
      std::regex(
          R"(\[evaluator:0\] \{"task":"evaluator","model":"mlp","global_step":200,"accuracy":0\.[5-9])")))
      << run.output.substr(run.output.size() > 2000 ? run.output.size() - 2000 : 0);
  EXPECT_EQ(read_training_finished(path("m")), 200);
}

TEST_F(LaunchTest, AKilledWorkerIsRestartedWithTheChiefAndTrainingFinishes) {
  bool killed = false;
  Launch run = launch("--chief=1 --workers=1 --max_restarts=2" + program(path("m"), 400),
                      [&](const std::string& line) {
                        static std::regex started(R"(started worker:0 pid=(\d+))");
                        static pid_t worker = -1;
                        std::smatch m;
                        if (std::regex_search(line, m, started)) worker = std::stoi(m[1]);
                        // After the first checkpoint, once.
                        if (!killed && worker > 0 &&
                            line.find("saved checkpoint for step 100") != std::string::npos) {
                          ::kill(worker, SIGKILL);
                          killed = true;
                        }
                      });
  EXPECT_TRUE(killed);
  EXPECT_EQ(run.status, 0) << run.output.substr(run.output.size() > 3000 ? run.output.size() - 3000
                                                                         : 0);
  EXPECT_NE(run.output.find("restarting the training tasks together (restart 1 of 2)"),
            std::string::npos);
  EXPECT_NE(run.output.find("resuming from"), std::string::npos);
  EXPECT_NE(run.output.find(R"([chief:0] {"task":"chief","model":"mlp","global_step":400)"),
            std::string::npos);
}

TEST_F(LaunchTest, WithoutRestartsAFailureStopsTheClusterWithAnError) {
  Launch run =
      launch("--chief=1 --workers=1 -- " + std::string(CADRE_FASHION_MNIST) +
                 " --model_dir=" + path("m") + " --strategy=multi_worker_mirrored --model=nope",
             [](const std::string&) {});
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.output.find("unknown model 'nope'"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("failed (exit status 1); stopping the cluster"), std::string::npos);
}

}  // namespace
}  // namespace cadre
