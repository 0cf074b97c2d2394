// Jobs under cadre_launch --max_restarts that lose tasks to SIGKILL at the worst moments: the
// chief while it writes a checkpoint, a worker mid-step, the evaluator mid-evaluation, a
// parameter server. Each job must end at max_steps with exit status 0, leave a model_dir
// whose state file names only files that exist, no temporary files and no leases, an
// evaluator's final line, and the variables of a run that lost nothing (collective training:
// bit for bit; parameter servers, whose workers step asynchronously: the same accuracy
// within 1%).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

void expect_same_variables(const std::string& calm, const std::string& storm) {
  auto a = checkpoint::CheckpointReader::open(calm);
  auto b = checkpoint::CheckpointReader::open(storm);
  ASSERT_EQ(a->variables().size(), b->variables().size());
  for (const auto& [name, info] : a->variables()) {
    Tensor x = a->read(name), y = b->read(name);
    ASSERT_EQ(x.nbytes(), y.nbytes()) << name;
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0) << name << " differs";
  }
}

// What a job that lost tasks must leave behind, as one that lost none.
void expect_a_clean_model_dir(const std::string& model_dir, int64_t max_steps) {
  auto env = posix_env();
  std::optional<checkpoint::CheckpointState> state = checkpoint::read_state(*env, model_dir);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->model_checkpoint_path, checkpoint::checkpoint_file_name("model.ckpt", max_steps));
  for (const std::string& name : state->all_model_checkpoint_paths) {
    EXPECT_TRUE(std::filesystem::exists(model_dir + "/" + name)) << name << " is named, not there";
  }
  for (const auto& entry : std::filesystem::recursive_directory_iterator(model_dir)) {
    std::string name = entry.path().filename().string();
    EXPECT_FALSE(is_temporary_name(name)) << entry.path() << " was left behind";
    EXPECT_FALSE(name.ends_with(".lease")) << entry.path() << " was left behind";
  }
  EXPECT_FALSE(std::filesystem::exists(model_dir + "/.leases/pending_deletions"))
      << "retention has not caught up";
}

class ChaosTest : public cadre::testing::TempDirTest {
 protected:
  testing::CommandResult launch(const std::string& tasks, const std::string& model_dir,
                                const std::string& flags, testing::KillSchedule* kills) {
    std::string command = std::string(CADRE_LAUNCH) + " " + tasks + " -- " + CADRE_FASHION_MNIST +
                          " --model_dir=" + model_dir + " " + flags + " 2>&1";
    if (kills == nullptr) return testing::run_command(command);
    return testing::run_command(command, std::ref(*kills));
  }
};

std::string final_line(const std::string& output, const std::string& task) {
  std::string text = output;
  std::string last;
  std::regex line("\\[" + task + R"(\] (\{"task".*\}))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator();
       ++it) {
    last = (*it)[1];
  }
  return last;
}

TEST_F(ChaosTest, ACollectiveJobLosingEveryRoleEndsBitIdenticalToOneThatLostNone) {
  const std::string tasks = "--chief=1 --workers=1 --evaluator=1 --max_restarts=4";
  const std::string flags =
      "--strategy=multi_worker_mirrored --max_steps=600 --save_checkpoints_steps=101 "
      "--keep_checkpoint_max=2 --eval_steps=5 --batch_size=64";
  testing::CommandResult calm = launch(tasks, path("calm"), flags, nullptr);
  ASSERT_EQ(calm.status, 0) << testing::tail(calm.output);

  testing::KillSchedule kills;
  // The progress line of step 101 comes right before the checkpoint of step 101 is written.
  kills.add("chief:0", R"(^\[chief:0\].* step 101/600 )");
  kills.add("worker:0", R"(^\[chief:0\].* step 401/600 )");  // mid-step
  kills.add("evaluator:0", R"(^\[evaluator:0\].*evaluator: evaluating .*model\.ckpt-303)");
  testing::CommandResult storm = launch(tasks, path("storm"), flags, &kills);
  EXPECT_EQ(kills.done(), 3u) << testing::tail(storm.output);
  EXPECT_EQ(storm.status, 0) << testing::tail(storm.output);
  EXPECT_NE(storm.output.find("restarting the training tasks together"), std::string::npos);
  EXPECT_NE(storm.output.find("evaluator:0 failed (killed by signal 9); restarting it"),
            std::string::npos);

  expect_a_clean_model_dir(path("storm"), 600);
  EXPECT_NE(final_line(storm.output, "evaluator:0").find("\"global_step\":600"), std::string::npos)
      << testing::tail(storm.output);
  expect_same_variables(path("calm") + "/model.ckpt-600.h5", path("storm") + "/model.ckpt-600.h5");
}

// One training task over two parameter servers steps in a fixed order, so a ps task lost
// mid-run (the whole cluster restarts from the last checkpoint) must change nothing at all.
// With several workers the steps interleave at random: PsClusterTest covers a lost worker,
// which restarts alone.
TEST_F(ChaosTest, AParameterServerJobLosingAPsTaskEndsBitIdenticalToOneThatLostNone) {
  const std::string tasks = "--chief=1 --ps=2 --evaluator=1 --max_restarts=4";
  const std::string flags =
      "--strategy=parameter_server --max_steps=900 --save_checkpoints_steps=200 "
      "--keep_checkpoint_max=2 --eval_steps=5";
  testing::CommandResult calm = launch(tasks, path("calm"), flags, nullptr);
  ASSERT_EQ(calm.status, 0) << testing::tail(calm.output);

  testing::KillSchedule kills;
  kills.add("ps:1", R"(^\[chief:0\].*saved checkpoint for step 400)");
  kills.add("evaluator:0", R"(^\[evaluator:0\].*evaluator: evaluating .*model\.ckpt-600)");
  testing::CommandResult storm = launch(tasks, path("storm"), flags, &kills);
  EXPECT_EQ(kills.done(), 2u) << testing::tail(storm.output);
  EXPECT_EQ(storm.status, 0) << testing::tail(storm.output);
  EXPECT_NE(storm.output.find("ps:1 failed (killed by signal 9); restarting the cluster"),
            std::string::npos);
  expect_a_clean_model_dir(path("storm"), 900);
  EXPECT_NE(final_line(storm.output, "evaluator:0").find("\"global_step\":900"), std::string::npos)
      << testing::tail(storm.output);
  expect_same_variables(path("calm") + "/model.ckpt-900.h5", path("storm") + "/model.ckpt-900.h5");
}

}  // namespace
}  // namespace cadre
