// Coordinator mode under cadre_launch --client=1, as processes on 127.0.0.1: a client
// dispatches units of steps to two workers over a ps task. A worker SIGKILLed twice costs
// nothing: the launcher restarts it alone, the other worker never restarts, the lost units
// run elsewhere, and the global step and the optimizer's step counter both end at exactly
// max_steps (each applied step counted once). A killed client is replaced by a new one that
// resumes from the last checkpoint while the workers keep running. MultiWorkerMirrored
// workers driven by a client, losing a worker or the client, end bit-identical to
// independent workers. A job with one worker finishes, its client evaluating each
// checkpoint. A client without workers is one clear error.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <map>
#include <regex>
#include <string>

#include "cadre/checkpoint/reader.h"
#include "tests/integration/model_dir_files.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"
#include "tests/support/same_variables.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class CoordinatorTest : public testing::TempDirTest {
 protected:
  testing::CommandResult launch(const std::string& model_dir, int64_t max_steps,
                                testing::KillSchedule* kills) {
    std::string command = std::string(CADRE_LAUNCH) +
                          " --client=1 --workers=2 --ps=1 --max_restarts=3 -- " +
                          CADRE_FASHION_MNIST + " --model_dir=" + model_dir +
                          " --strategy=parameter_server --max_steps=" + std::to_string(max_steps) +
                          " --save_checkpoints_steps=300 --eval_steps=5 --batch_size=64 2>&1";
    return testing::run_command(command, std::ref(*kills));
  }
  // The checkpoint of max_steps: its global step, and Adam's step counter on the ps, which
  // counts the gradients applied.
  void expect_every_step_counted_once(const std::string& model_dir, int64_t max_steps) {
    auto reader = checkpoint::CheckpointReader::open(model_dir + "/model.ckpt-" +
                                                     std::to_string(max_steps) + ".h5");
    EXPECT_EQ(reader->global_step(), max_steps);
    bool found = false;
    for (const auto& [name, info] : reader->variables()) {
      if (!name.ends_with("/iterations")) continue;
      found = true;
      EXPECT_EQ(reader->read(name).item<int64_t>(), max_steps) << name;
    }
    EXPECT_TRUE(found) << "no optimizer step counter in the checkpoint";
  }
};

TEST_F(CoordinatorTest, AWorkerKilledTwiceCostsNothingAndEveryStepCountsOnce) {
  const int64_t max_steps = 3000;
  testing::KillSchedule kills(testing::KillSchedule::Order::kInOrder);
  // Mid-unit both times: once the client has seen 300 steps, then once the restarted
  // worker runs units again.
  kills.add("worker:1", R"(^\[client:0\].* step [3-9][0-9][0-9]/3000 )");
  kills.add("worker:1", R"(^\[client:0\].*worker:1 is back: it runs units again)");
  testing::CommandResult run = launch(path("job"), max_steps, &kills);
  ASSERT_EQ(run.status, 0) << testing::tail(run.output, 6000);
  EXPECT_EQ(kills.done(), 2u) << testing::tail(run.output, 6000);
  // worker:0 and the ps task started once: nothing but the killed worker restarted.
  EXPECT_EQ(count(run.output, "started worker:0 pid="), 1) << testing::tail(run.output, 6000);
  EXPECT_EQ(count(run.output, "started ps:0 pid="), 1);
  EXPECT_EQ(count(run.output, "started client:0 pid="), 1);
  EXPECT_EQ(count(run.output, "started worker:1 pid="), 3);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      run.output, m,
      std::regex(
          R"(client: (\d+) units complete at global step (\d+); (\d+) dispatches, (\d+) lost)")))
      << testing::tail(run.output, 6000);
  EXPECT_EQ(m[1], "300");
  EXPECT_EQ(m[2], "3000");
  EXPECT_GE(std::stoi(m[4]), 2) << "each kill must have cost the worker its unit";
  expect_every_step_counted_once(path("job"), max_steps);
  // The client evaluated the final checkpoint (there is no evaluator task).
  EXPECT_TRUE(std::regex_search(
      run.output, std::regex(R"(\[client:0\] \{"task":"client".*"global_step":3000,"accuracy")")))
      << testing::tail(run.output);
}

// One worker, as the README's step 5 runs it: the client evaluates each checkpoint it saves
// under the workers' strategy, on its own devices (it used to take its restored copies for
// the ps tasks' variables, and hung in a pull from an object that was none).
TEST_F(CoordinatorTest, AJobWithOneWorkerFinishesAndTheClientEvaluatesEachCheckpoint) {
  const int64_t max_steps = 600;
  testing::CommandResult run = testing::run_command(
      std::string("timeout -s KILL 240 ") + CADRE_LAUNCH + " --client=1 --workers=1 --ps=1 -- " +
      CADRE_FASHION_MNIST + " --model_dir=" + path("one") +
      " --strategy=parameter_server --max_steps=600 --save_checkpoints_steps=200"
      " --eval_steps=5 --batch_size=64 2>&1");
  ASSERT_EQ(run.status, 0) << testing::tail(run.output, 6000);
  expect_every_step_counted_once(path("one"), max_steps);
  std::smatch m;
  int evaluations = 0;
  std::string rest = run.output;
  while (std::regex_search(rest, m,
                           std::regex(R"(\[client:0\].*evaluation of \S+model\.ckpt-(\d+))"))) {
    ++evaluations;
    rest = m.suffix();
  }
  EXPECT_GE(evaluations, 2) << testing::tail(run.output, 6000);  // of 200 or 400, and of 600
  EXPECT_TRUE(std::regex_search(
      run.output, std::regex(R"(\[client:0\] \{"task":"client".*"global_step":600,"accuracy")")))
      << testing::tail(run.output);
}

TEST_F(CoordinatorTest, ANewClientResumesFromTheLastCheckpointWhileTheWorkersRunOn) {
  const int64_t max_steps = 3000;
  testing::KillSchedule kills(testing::KillSchedule::Order::kInOrder);
  kills.add("client:0", R"(^\[client:0\].*saved checkpoint for step (6|7|8)[0-9][0-9])");
  testing::CommandResult run = launch(path("job"), max_steps, &kills);
  ASSERT_EQ(run.status, 0) << testing::tail(run.output, 6000);
  EXPECT_EQ(kills.done(), 1u) << testing::tail(run.output, 6000);
  EXPECT_EQ(count(run.output, "started client:0 pid="), 2);
  EXPECT_EQ(count(run.output, "started worker:0 pid="), 1) << testing::tail(run.output, 6000);
  EXPECT_EQ(count(run.output, "started worker:1 pid="), 1);
  EXPECT_TRUE(std::regex_search(
      run.output,
      std::regex(
          R"(\[client:0\].*client \(generation 2\): resuming from .*model\.ckpt-\d+\.h5 at step (6|7|8)\d\d)")))
      << testing::tail(run.output, 6000);
  auto reader = checkpoint::CheckpointReader::open(path("job") + "/model.ckpt-3000.h5");
  EXPECT_EQ(reader->global_step(), max_steps);
  std::string progress = read_file(path("job") + "/client_progress");
  EXPECT_NE(progress.find("generation: 2\n"), std::string::npos) << progress;
  EXPECT_NE(progress.find("checkpoint_step: 3000\n"), std::string::npos) << progress;
  EXPECT_NE(progress.find("finished: true\n"), std::string::npos) << progress;
}

// A client's checkpoints are sharded as a chief's are: each ps task writes its part, and the
// client commits the manifest. A client resuming a job whose model has an embedding only
// names the checkpoint: each ps task reads its own rows of the table and of its Adam slots.
TEST_F(CoordinatorTest, TheClientsCheckpointsAreWrittenAndReadByThePsTasks) {
  testing::CommandResult run;
  for (const char* max_steps : {"20", "25"}) {
    run = testing::run_command(std::string("HELPER_EMBEDDING=1 HELPER_SHARDED=1 ") + CADRE_LAUNCH +
                               " --client=1 --workers=1 --ps=2 -- " + CADRE_MULTI_WORKER_HELPER +
                               " " + path("job") + " " + max_steps + " 2>&1");
    ASSERT_EQ(run.status, 0) << testing::tail(run.output, 6000);
  }
  EXPECT_NE(run.output.find("resuming from " + path("job") + "/model.ckpt-20.h5"),
            std::string::npos)
      << testing::tail(run.output, 6000);
  for (const char* ps : {"[ps:0]", "[ps:1]"}) {
    for (const char* name : {"token/embeddings", "token/embeddings/Adam/m"}) {
      EXPECT_TRUE(std::regex_search(
          run.output, std::regex(std::string("\\") + ps + R"(.*read rows \[\d+, \d+\) of ')" +
                                 name + "' from model.ckpt-20.h5")))
          << ps << " did not read its rows of " << name << testing::tail(run.output, 6000);
    }
  }
  EXPECT_EQ(run.output.find("the chief restores the variables"), std::string::npos);
  EXPECT_EQ(testing::files_matching(path("job"), "model.ckpt-25.part-").size(), 2u);
  EXPECT_EQ(testing::ckpt_tool("verify " + path("job")).substr(0, 3), "0: ")
      << testing::ckpt_tool("verify " + path("job"));
}

// MultiWorkerMirrored workers driven by a client: the client hosts the rendezvous that
// starts their collective, sees a worker die, and starts the collective again; the workers
// (restarted by cadre_launch) resume from the last checkpoint. The result is bit for bit that
// of independent workers that lost nothing, and so is that of a job whose client was killed.
TEST_F(CoordinatorTest, ACollectiveDrivenByTheClientMatchesIndependentWorkers) {
  const std::string flags =
      " --strategy=multi_worker_mirrored --max_steps=400 --save_checkpoints_steps=100 "
      "--eval_steps=5 --batch_size=64 2>&1";
  testing::CommandResult independent =
      testing::run_command(std::string(CADRE_LAUNCH) + " --chief=1 --workers=1 -- " +
                           CADRE_FASHION_MNIST + " --model_dir=" + path("independent") + flags);
  ASSERT_EQ(independent.status, 0) << testing::tail(independent.output, 6000);

  testing::KillSchedule kills(testing::KillSchedule::Order::kInOrder);
  kills.add("worker:1", R"(^\[worker:0\].*saved checkpoint for step 200)");
  testing::CommandResult driven = testing::run_command(
      std::string(CADRE_LAUNCH) + " --client=1 --workers=2 --max_restarts=6 -- " +
          CADRE_FASHION_MNIST + " --model_dir=" + path("driven") + flags,
      std::ref(kills));
  ASSERT_EQ(driven.status, 0) << testing::tail(driven.output, 6000);
  EXPECT_EQ(kills.done(), 1u);
  EXPECT_EQ(count(driven.output, "started client:0 pid="), 1);
  EXPECT_NE(driven.output.find("client: the collective failed"), std::string::npos)
      << testing::tail(driven.output, 6000);
  EXPECT_TRUE(std::regex_search(
      driven.output, std::regex(R"(\[client:0\] \{"task":"client".*"global_step":400,)")))
      << testing::tail(driven.output);

  testing::expect_same_variables(path("independent") + "/model.ckpt-400.h5",
                                 path("driven") + "/model.ckpt-400.h5");

  // The client itself killed: a new one hosts a new round, the workers of the old one are
  // told to stop, and all resume from the last checkpoint; still the same result.
  testing::KillSchedule client_kill(testing::KillSchedule::Order::kInOrder);
  client_kill.add("client:0", R"(^\[worker:0\].*saved checkpoint for step 200)");
  testing::CommandResult replaced = testing::run_command(
      std::string(CADRE_LAUNCH) + " --client=1 --workers=2 --max_restarts=6 -- " +
          CADRE_FASHION_MNIST + " --model_dir=" + path("replaced") + flags,
      std::ref(client_kill));
  ASSERT_EQ(replaced.status, 0) << testing::tail(replaced.output, 6000);
  EXPECT_EQ(client_kill.done(), 1u);
  EXPECT_EQ(count(replaced.output, "started client:0 pid="), 2);
  testing::expect_same_variables(path("independent") + "/model.ckpt-400.h5",
                                 path("replaced") + "/model.ckpt-400.h5");
}

TEST_F(CoordinatorTest, AClientWithoutWorkersIsOneClearError) {
  std::string tf_config = R"({"cluster": {"client": ["127.0.0.1:)" +
                          std::to_string(testing::free_port()) + R"("], "ps": ["127.0.0.1:)" +
                          std::to_string(testing::free_port()) +
                          R"("]}, "task": {"type": "client", "index": 0}})";
  pid_t pid = testing::spawn(
      {CADRE_FASHION_MNIST, "--model_dir=" + path("job"), "--strategy=parameter_server"},
      {{"TF_CONFIG", tf_config}, testing::job_secret_env()}, path("log"));
  EXPECT_EQ(testing::wait_for(pid, 60), 1);
  std::string log = read_file(path("log"));
  EXPECT_NE(log.find("has a client but no worker"), std::string::npos) << log;
  EXPECT_EQ(log.find("Check failed"), std::string::npos) << log;
}

}  // namespace
}  // namespace cadre
