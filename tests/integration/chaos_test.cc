// Jobs under cadre_launch --max_restarts that lose tasks to SIGKILL at the worst moments: the
// chief while it writes a checkpoint, a worker mid-step, the evaluator mid-evaluation, a
// parameter server. Each job must end at max_steps with exit status 0, leave a model_dir
// whose state file names only files that exist, no temporary files and no leases, an
// evaluator's final line, and the variables of a run that lost nothing (collective training:
// bit for bit; parameter servers, whose workers step asynchronously: the same accuracy
// within 1%). SIGTERMs (planned stops) of every role and of the launcher mixed with SIGKILLs
// must, besides, lose no checkpoint and no step: each planned stop's checkpoint is the one
// the job resumes from (tools/chaos/run_chaos.py --sigterm_share is the long, random form).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/planned_stop.h"
#include "tests/support/processes.h"
#include "tests/support/same_variables.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

// What a job that lost tasks must leave behind, as one that lost none. Its last checkpoint
// is of max_steps, or past it where `exact` is false (asynchronous workers may step past).
void expect_a_clean_model_dir(const std::string& model_dir, int64_t max_steps, bool exact = true) {
  auto env = posix_env();
  std::optional<checkpoint::CheckpointState> state = checkpoint::read_state(*env, model_dir);
  ASSERT_TRUE(state.has_value());
  if (exact) {
    EXPECT_EQ(state->model_checkpoint_path,
              checkpoint::checkpoint_file_name("model.ckpt", max_steps));
  } else {
    EXPECT_GE(checkpoint::CheckpointReader::open(model_dir + "/" + state->model_checkpoint_path)
                  ->global_step(),
              max_steps);
  }
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

// The planned stops of a job's output (which may span reruns of its command): the chief's,
// in order, each followed by a start of the chief that resumes from its checkpoint and step
// (no checkpoint and no step lost); and the worker's, which, in a collective job, stops
// after the chief's step, or, under ParameterServer where the ps tasks tell it of the job's
// stop, within the steps it had in flight. Returns the chief's stops.
std::vector<int64_t> expect_planned_stops_lose_nothing(const std::string& output, bool collective) {
  static const std::regex stop(
      R"(^\[(chief|worker):0\] \S+: a planned stop \(([^)]*)\) at step (\d+))");
  static const std::regex resume(R"(^\[chief:0\] .* resuming from (\S+) at step (\d+))");
  std::vector<int64_t> stops;
  std::optional<int64_t> pending, chief;
  std::vector<std::pair<std::string, int64_t>> workers;
  auto end_of_generation = [&] {
    for (const auto& [why, step] : workers) {
      if (!chief) continue;
      if (collective) {
        EXPECT_EQ(step, *chief) << "the workers stopped after different steps";
      } else if (why == "of the job, told by a ps task") {
        EXPECT_LE(step, *chief + 5) << "the worker stepped on after the chief's checkpoint";
      }
    }
    chief.reset();
    workers.clear();
  };
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (line.starts_with("started chief:0 ")) {
      end_of_generation();
    } else if (std::regex_search(line, m, stop)) {
      int64_t step = std::stoll(m[3]);
      if (m[1] == "worker") {
        workers.emplace_back(m[2], step);
        continue;
      }
      EXPECT_FALSE(pending.has_value()) << "two planned stops, no resume between them";
      chief = step;
      pending = step;
      stops.push_back(step);
    } else if (pending && std::regex_search(line, m, resume)) {
      EXPECT_EQ(std::stoll(m[2]), *pending) << line;
      EXPECT_TRUE(
          std::string(m[1]).ends_with(checkpoint::checkpoint_file_name("model.ckpt", *pending)))
          << line;
      pending.reset();
    }
  }
  end_of_generation();
  EXPECT_FALSE(pending.has_value()) << "no run resumed from the planned stop at step " << *pending;
  return stops;
}

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
  testing::expect_same_variables(path("calm") + "/model.ckpt-600.h5",
                                 path("storm") + "/model.ckpt-600.h5");
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
  testing::expect_same_variables(path("calm") + "/model.ckpt-900.h5",
                                 path("storm") + "/model.ckpt-900.h5");
}

// SIGTERMs and SIGKILLs in turn, as a cluster sends them: a planned stop of the chief, a
// worker killed, a planned stop of the worker and of the evaluator, then of the launcher
// (exit 143), after which the same command is run again, as a user would. Every planned
// stop resumes from its own checkpoint and step, and the job ends bit-identical to one that
// lost nothing.
TEST_F(ChaosTest, ACollectiveJobStoppedAndKilledInTurnLosesNoStepAndEndsBitIdentical) {
  const std::string tasks = "--chief=1 --workers=1 --evaluator=1 --max_restarts=4";
  const std::string flags =
      "--strategy=multi_worker_mirrored --max_steps=800 --save_checkpoints_steps=150 "
      "--keep_checkpoint_max=2 --eval_steps=5 --batch_size=64";
  testing::CommandResult calm = launch(tasks, path("calm"), flags, nullptr);
  ASSERT_EQ(calm.status, 0) << testing::tail(calm.output);

  testing::KillSchedule kills(testing::KillSchedule::Order::kInOrder);
  kills.add("chief:0", R"(^\[chief:0\].* step 1\d\d/800 )", SIGTERM);
  kills.add("worker:0", R"(^\[chief:0\].* step 3\d\d/800 )", SIGKILL);
  kills.add("worker:0", R"(^\[chief:0\].* step 4\d\d/800 )", SIGTERM);
  kills.add("evaluator:0", R"(^\[evaluator:0\].*evaluator: evaluating )", SIGTERM);
  kills.add("launcher", R"(^\[chief:0\].* step [67]\d\d/800 )", SIGTERM);
  std::string command = std::string("echo \"launcher pid=$$\"; exec ") + CADRE_LAUNCH + " " +
                        tasks + " -- " + CADRE_FASHION_MNIST + " --model_dir=" + path("storm") +
                        " " + flags + " 2>&1";
  testing::CommandResult stopped = testing::run_command(command, std::ref(kills));
  EXPECT_EQ(stopped.status, kRestartExitCode) << testing::tail(stopped.output, 6000);
  EXPECT_NE(stopped.output.find("every task stopped cleanly"), std::string::npos)
      << testing::tail(stopped.output, 6000);
  testing::CommandResult rerun = testing::run_command(command, std::ref(kills));
  EXPECT_EQ(kills.done(), 5u) << testing::tail(stopped.output + rerun.output, 6000);
  ASSERT_EQ(rerun.status, 0) << testing::tail(rerun.output, 6000);

  std::vector<int64_t> stops =
      expect_planned_stops_lose_nothing(stopped.output + rerun.output, true);
  EXPECT_EQ(stops.size(), 3u) << "the chief's, the worker's and the launcher's";
  expect_a_clean_model_dir(path("storm"), 800);
  EXPECT_NE(final_line(rerun.output, "evaluator:0").find("\"global_step\":800"), std::string::npos)
      << testing::tail(rerun.output);
  testing::expect_same_variables(path("calm") + "/model.ckpt-800.h5",
                                 path("storm") + "/model.ckpt-800.h5");
}

// The same under ParameterServer (chief, worker, two ps tasks), whose workers step
// asynchronously: a planned stop of a ps task and of the chief (each the job's, told to the
// worker by the ps tasks), a worker killed, then a planned stop of the launcher and a rerun.
TEST_F(ChaosTest, AParameterServerJobStoppedAndKilledInTurnLosesNoStep) {
  const std::string tasks = "--chief=1 --workers=1 --ps=2 --evaluator=1 --max_restarts=4";
  const std::string flags =
      "--strategy=parameter_server --max_steps=900 --save_checkpoints_steps=200 "
      "--keep_checkpoint_max=2 --eval_steps=5";
  testing::KillSchedule kills(testing::KillSchedule::Order::kInOrder);
  kills.add("ps:1", R"(^\[chief:0\].* step [2-3]\d\d/900 )", SIGTERM);
  kills.add("chief:0", R"(^\[chief:0\].* step [4-5]\d\d/900 )", SIGTERM);
  kills.add("worker:0", R"(^\[chief:0\].* step 6\d\d/900 )", SIGKILL);
  kills.add("launcher", R"(^\[chief:0\].* step [7-8]\d\d/900 )", SIGTERM);
  std::string command = std::string("echo \"launcher pid=$$\"; exec ") + CADRE_LAUNCH + " " +
                        tasks + " -- " + CADRE_FASHION_MNIST + " --model_dir=" + path("storm") +
                        " " + flags + " 2>&1";
  testing::CommandResult stopped = testing::run_command(command, std::ref(kills));
  EXPECT_EQ(stopped.status, kRestartExitCode) << testing::tail(stopped.output, 6000);
  testing::CommandResult rerun = testing::run_command(command, std::ref(kills));
  EXPECT_EQ(kills.done(), 4u) << testing::tail(stopped.output + rerun.output, 6000);
  ASSERT_EQ(rerun.status, 0) << testing::tail(rerun.output, 6000);

  std::string output = stopped.output + rerun.output;
  std::vector<int64_t> stops = expect_planned_stops_lose_nothing(output, false);
  EXPECT_EQ(stops.size(), 3u) << "the ps task's, the chief's and the launcher's";
  // A planned stop is no failure: only the SIGKILL counts against --max_restarts.
  EXPECT_NE(output.find("(restart 1 of 4)"), std::string::npos) << testing::tail(output, 6000);
  EXPECT_EQ(output.find("(restart 2 of 4)"), std::string::npos) << testing::tail(output, 6000);
  expect_a_clean_model_dir(path("storm"), 900, /*exact=*/false);
  EXPECT_TRUE(std::regex_search(final_line(rerun.output, "evaluator:0"),
                                std::regex(R"("global_step":9\d\d)")))
      << testing::tail(rerun.output);
}

}  // namespace
}  // namespace cadre
