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

#include "cadre/estimator/train_and_evaluate.h"
#include "cadre/strategies/cluster_spec.h"
#include "tests/io/temp_dir.h"
#include "tests/support/processes.h"
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

class LaunchTest : public io::testing::TempDirTest {};

TEST_F(LaunchTest, AChiefAWorkerAndAnEvaluatorRunToTheEnd) {
  testing::CommandResult run = launch(
      "--chief=1 --workers=1 --evaluator=1" + program(path("m"), 200), [](const std::string&) {});
  EXPECT_EQ(run.status, 0) << testing::tail(run.output);
  for (const char* expected : {"started chief:0 pid=", "started worker:0 pid=",
                               "started evaluator:0 pid=", "[worker:0] ", "[chief:0] "}) {
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

// The manifests' pods compute a TF_CONFIG from their StatefulSet ordinal: run each
// StatefulSet's shell with a pod's hostname and parse what it exports.
TEST(KubernetesTest, EveryPodDerivesAValidTfConfigFromItsOrdinal) {
  launch::LaunchOptions options;
  options.chief = 1;
  options.workers = 2;
  options.evaluator = 1;
  options.command = {"/opt/cadre/bin/fashion_mnist", "--strategy=multi_worker_mirrored"};
  std::string yaml = launch::kubernetes_manifests(options, "job", "cadre:1", 2222);
  EXPECT_NE(yaml.find("kind: Service"), std::string::npos);
  EXPECT_NE(yaml.find("clusterIP: None"), std::string::npos);
  const std::vector<std::pair<std::string, std::string>> pods = {
      {"chief", "job-chief-0"}, {"worker", "job-worker-1"}, {"evaluator", "job-evaluator-0"}};
  for (const auto& [type, hostname] : pods) {
    size_t set = yaml.find("name: job-" + type + "\n");
    ASSERT_NE(set, std::string::npos) << type;
    size_t begin = yaml.find("- |\n", set) + 4;
    size_t end = yaml.rfind('\n', yaml.find("exec \"$0\"", begin)) + 1;  // before exec
    std::string script;
    for (size_t at = begin; at < end;) {  // drop the YAML indentation
      size_t newline = yaml.find('\n', at);
      std::string line = yaml.substr(at, newline - at);
      script += line.substr(line.find_first_not_of(' ')) + "\n";
      at = newline + 1;
    }
    std::string command = "HOSTNAME=" + hostname + " sh -c '" + script + "echo \"$TF_CONFIG\"'";
    ClusterConfig config = parse_tf_config(testing::run_command(command).output);
    EXPECT_EQ(config.task.type, type);
    EXPECT_EQ(config.task.index, hostname.back() - '0');
    EXPECT_EQ(config.num_worker_replicas(), 3);
    EXPECT_EQ(config.address({"worker", 1}), "job-worker-1.job:2222");
  }
}

}  // namespace
}  // namespace cadre
