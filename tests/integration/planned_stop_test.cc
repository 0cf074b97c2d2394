// Planned stops as a cluster sends them: SIGTERM at a random step to a lone program, to the
// launcher, to the chief and to a worker, under OneDevice, Mirrored, MultiWorkerMirrored (2
// workers, with an evaluator), ParameterServer (2 ps tasks) and coordinator mode (a client
// driving workers over a ps task, or MultiWorkerMirrored workers; SIGTERM to the launcher,
// the client or a worker). Each ends in a checkpoint of the step the signal reached (the
// step in flight finishes; in coordinator mode with ps tasks, the units running), exit
// status 143 where nothing restarts the task, and a restarted job that resumes from that
// step: no step lost, and under the synchronous strategies final variables bit-identical to
// an uninterrupted run.
#include "cadre/estimator/planned_stop.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <random>
#include <regex>
#include <string>
#include <thread>

#include "cadre/checkpoint/reader.h"
#include "tests/support/processes.h"
#include "tests/support/same_variables.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

constexpr int64_t kMaxSteps = 1500;

std::string checkpoint_of(const std::string& model_dir, int64_t step) {
  return model_dir + "/model.ckpt-" + std::to_string(step) + ".h5";
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every step counted once (coordinator mode under ps tasks): the checkpoint of `step` has
// that global step, and Adam's step counter on the ps, which counts the gradients applied,
// is the same.
void expect_every_step_counted_once(const std::string& model_dir, int64_t step) {
  auto reader =
      checkpoint::CheckpointReader::open(model_dir + "/model.ckpt-" + std::to_string(step) + ".h5");
  EXPECT_EQ(reader->global_step(), step);
  bool found = false;
  for (const auto& [name, info] : reader->variables()) {
    if (!name.ends_with("/iterations")) continue;
    found = true;
    EXPECT_EQ(reader->read(name).item<int64_t>(), step) << name;
  }
  EXPECT_TRUE(found) << "no optimizer step counter in the checkpoint";
}

// The first number a regular expression's group finds in `text`, or -1.
int64_t find_step(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) return -1;
  return std::stoll(m[1]);
}

class PlannedStopTest : public testing::TempDirTest {
 protected:
  // The fashion_mnist arguments of every run here: no checkpoint but the planned stop's and
  // the last, so that nothing but the stop's checkpoint can carry a run across it.
  std::string program(const std::string& model_dir, const std::string& flags,
                      int64_t max_steps = kMaxSteps) {
    return std::string(CADRE_FASHION_MNIST) + " --model_dir=" + model_dir +
           " --max_steps=" + std::to_string(max_steps) +
           " --save_checkpoints_steps=100000 --eval_steps=2 --batch_size=64 " + flags;
  }

  // Runs `command` (run by `exec`, so that its pid is the shell's) and, once a progress line
  // of the chief (or of a lone program) shows step 200 or later, waits a random moment and
  // sends SIGTERM to `target`: "self" (the command) or a task of cadre_launch ("chief:0").
  testing::CommandResult run_and_stop(const std::string& command, const std::string& target) {
    std::uniform_int_distribution<int> delay_ms(0, 300);
    int delay = delay_ms(rng_);
    pid_t self = -1, task = -1;
    bool sent = false;
    const std::regex started("^started " + target + " pid=(\\d+)");
    const std::regex progress(R"((^|\] )I.* step ([2-9]\d\d|1\d\d\d)/)");
    testing::CommandResult run = testing::run_command(
        "echo \"pid=$$\"; exec " + command + " 2>&1", [&](const std::string& line) {
          std::smatch m;
          if (self < 0 && line.rfind("pid=", 0) == 0) self = std::stoi(line.substr(4));
          if (std::regex_search(line, m, started)) task = std::stoi(m[1]);
          if (sent || !std::regex_search(line, progress)) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(delay));
          pid_t pid = target == "self" ? self : task;
          ASSERT_GT(pid, 0) << "no pid for " << target;
          ::kill(pid, SIGTERM);
          sent = true;
        });
    EXPECT_TRUE(sent) << "the run ended before the signal: " << testing::tail(run.output);
    return run;
  }

  std::mt19937 rng_{std::random_device{}()};
};

// A lone program: exit 75 with a checkpoint of the step reached; the same command resumes
// there and ends where an uninterrupted run ends, bit for bit.
TEST_F(PlannedStopTest, ALoneProgramStopsWithACheckpointAndResumesLosingNothing) {
  for (const char* flags : {"--strategy=one_device", "--strategy=mirrored --devices=cpu:0,cpu:1"}) {
    SCOPED_TRACE(flags);
    std::string name = std::string(flags).find("mirrored") != std::string::npos ? "m" : "o";
    testing::CommandResult reference =
        testing::run_command(program(path(name + "_ref"), flags) + " 2>&1");
    ASSERT_EQ(reference.status, 0) << testing::tail(reference.output);

    std::string dir = path(name);
    testing::CommandResult stopped = run_and_stop(program(dir, flags), "self");
    EXPECT_EQ(stopped.status, kRestartExitCode) << testing::tail(stopped.output);
    int64_t step = find_step(stopped.output, R"(a planned stop \(SIGTERM\) at step (\d+))");
    ASSERT_GE(step, 200) << testing::tail(stopped.output);
    EXPECT_LT(step, kMaxSteps);
    auto saved = checkpoint::CheckpointReader::open(checkpoint_of(dir, step));
    EXPECT_EQ(saved->global_step(), step);

    testing::CommandResult resumed = testing::run_command(program(dir, flags) + " 2>&1");
    ASSERT_EQ(resumed.status, 0) << testing::tail(resumed.output);
    EXPECT_EQ(find_step(resumed.output, R"(resuming from \S+ at step (\d+))"), step);
    testing::expect_same_variables(checkpoint_of(path(name + "_ref"), kMaxSteps),
                                   checkpoint_of(dir, kMaxSteps));
  }
}

// MultiWorkerMirrored on two workers with an evaluator: a notice to any one of them stops
// both workers after the same step. To the launcher: every task stops (the evaluator
// releasing its lease), the launcher exits 75, and the same command finishes the job. To the
// chief or a worker alone: the launcher restarts the training tasks itself.
TEST_F(PlannedStopTest, TwoWorkersStopAfterTheSameStepWhoeverIsToldAndLoseNothing) {
  const std::string tasks = std::string(CADRE_LAUNCH) + " --chief=1 --workers=1 --evaluator=1 -- ";
  const std::string flags = "--strategy=multi_worker_mirrored";
  testing::CommandResult reference =
      testing::run_command(tasks + program(path("ref"), flags) + " 2>&1");
  ASSERT_EQ(reference.status, 0) << testing::tail(reference.output);

  for (const std::string target : {"self", "chief:0", "worker:0"}) {
    SCOPED_TRACE(target);
    std::string dir = path("to_" + target.substr(0, target.find(':')));
    testing::CommandResult run = run_and_stop(tasks + program(dir, flags), target);
    int64_t chief =
        find_step(run.output, R"(\[chief:0\] \S+: a planned stop \([^)]*\) at step (\d+))");
    int64_t worker =
        find_step(run.output, R"(\[worker:0\] \S+: a planned stop \([^)]*\) at step (\d+))");
    ASSERT_GE(chief, 200) << testing::tail(run.output, 6000);
    EXPECT_EQ(chief, worker) << "the workers stopped after different steps";
    if (target == "self") {
      EXPECT_EQ(run.status, kRestartExitCode) << testing::tail(run.output, 6000);
      EXPECT_TRUE(
          std::regex_search(run.output, std::regex(R"(\[evaluator:0\] \S+: .*planned stop)")))
          << testing::tail(run.output, 6000);
      run = testing::run_command(tasks + program(dir, flags) + " 2>&1");
    }
    ASSERT_EQ(run.status, 0) << testing::tail(run.output, 6000);
    EXPECT_EQ(find_step(run.output, R"(\[chief:0\] .*resuming from \S+ at step (\d+))"), chief);
    testing::expect_same_variables(checkpoint_of(path("ref"), kMaxSteps),
                                   checkpoint_of(dir, kMaxSteps));
  }
}

// ParameterServer with two ps tasks, whose workers step on their own: the chief's
// checkpoint of the step it reached holds the ps tasks' variables (they serve until it is
// saved), and the restarted job resumes from it. A stop of the chief or of a ps task is the
// job's: the ps tasks tell the worker to stop after its step, so that none of its steps
// lands after the chief's checkpoint (before, the worker stepped on until the launcher
// stopped it, tens of steps lost; and a ps task told alone left after its grace period, the
// chief failed, and every step since the last periodic checkpoint was lost).
TEST_F(PlannedStopTest, AParameterServerJobResumesFromTheStepItStoppedAt) {
  const std::string tasks = std::string(CADRE_LAUNCH) + " --chief=1 --workers=1 --ps=2 -- ";
  const std::string flags = "--strategy=parameter_server";
  for (const std::string target : {"self", "chief:0", "worker:0", "ps:1"}) {
    SCOPED_TRACE(target);
    std::string dir = path("ps_" + target.substr(0, target.find(':')));
    testing::CommandResult run = run_and_stop(tasks + program(dir, flags), target);
    if (target == "self") {
      EXPECT_EQ(run.status, kRestartExitCode) << testing::tail(run.output, 6000);
      int64_t step =
          find_step(run.output, R"(\[chief:0\] \S+: a planned stop \([^)]*\) at step (\d+))");
      ASSERT_GE(step, 200) << testing::tail(run.output, 6000);
      EXPECT_EQ(checkpoint::CheckpointReader::open(checkpoint_of(dir, step))->global_step(), step);
      run = testing::run_command(tasks + program(dir, flags) + " 2>&1");
      EXPECT_EQ(find_step(run.output, R"(\[chief:0\] .*resuming from \S+ at step (\d+))"), step);
    } else if (target == "chief:0" || target == "ps:1") {
      int64_t step =
          find_step(run.output, R"(\[chief:0\] \S+: a planned stop \([^)]*\) at step (\d+))");
      ASSERT_GE(step, 200) << testing::tail(run.output, 6000);
      EXPECT_EQ(find_step(run.output, R"(\[chief:0\] .*resuming from \S+ at step (\d+))"), step);
      // Told by the ps tasks (or, should it be slower to hear them, by the launcher's
      // SIGTERM once the chief has exited), within the steps it had in flight.
      int64_t worker =
          find_step(run.output, R"(\[worker:0\] \S+: a planned stop \([^)]*\) at step (\d+))");
      EXPECT_GE(worker, 0) << testing::tail(run.output, 6000);
      EXPECT_LE(worker, step + 5) << "the worker stepped on after the chief's checkpoint";
      EXPECT_EQ(run.output.find(" failed ("), std::string::npos) << testing::tail(run.output, 6000);
    } else {
      EXPECT_TRUE(std::regex_search(run.output, std::regex(R"(\[worker:0\] \S+: a planned stop)")))
          << testing::tail(run.output, 6000);
    }
    ASSERT_EQ(run.status, 0) << testing::tail(run.output, 6000);
    // Asynchronous: the chief's last step may land after a worker's reached max_steps.
    EXPECT_GE(find_step(run.output, R"(\[chief:0\] \{"task":"chief".*"global_step":(\d+))"),
              kMaxSteps)
        << testing::tail(run.output, 6000);
  }
}

// Coordinator mode with a ps task (cadre_launch --client=1 --workers=2 --ps=1): SIGTERM to
// `target` at a random step. The client stops dispatching, lets the units running finish,
// and saves the checkpoint of the step reached, in which each step is counted once (its
// global step is the optimizer's step counter); a restarted client resumes from it, and
// the job's final checkpoint counts every step once. A worker told alone stops after its
// step and its unit goes to the other worker.
class CoordinatorStopTest : public PlannedStopTest {
 protected:
  static constexpr int64_t kSteps = 800;

  std::string command(const std::string& dir) {
    return std::string(CADRE_LAUNCH) + " --client=1 --workers=2 --ps=1 -- " +
           program(dir, "--strategy=parameter_server", kSteps);
  }
  // The step the client stopped at, with the checks of its checkpoint and progress.
  int64_t client_stop(const testing::CommandResult& run, const std::string& dir) {
    int64_t step =
        find_step(run.output, R"(\[client:0\] \S+: a planned stop \(SIGTERM\) at step (\d+))");
    EXPECT_GE(step, 200) << testing::tail(run.output, 6000);
    EXPECT_LT(step, kSteps);
    if (step < 0) return step;
    expect_every_step_counted_once(dir, step);
    return step;
  }
  int64_t client_resumed_at(const testing::CommandResult& run) {
    return find_step(
        run.output, R"(\[client:0\] .*client \(generation \d+\): resuming from \S+ at step (\d+))");
  }
  void expect_finished(const testing::CommandResult& run, const std::string& dir) {
    ASSERT_EQ(run.status, 0) << testing::tail(run.output, 6000);
    EXPECT_TRUE(std::regex_search(run.output,
                                  std::regex(R"(client: \d+ units complete at global step 800;)")))
        << testing::tail(run.output, 6000);
    expect_every_step_counted_once(dir, kSteps);
    std::string progress = read_file(dir + "/client_progress");
    EXPECT_NE(progress.find("checkpoint_step: 800\nunits_complete: "), std::string::npos)
        << progress;
  }
};

// To the launcher: every task stops, the launcher exits 143, and the same command resumes
// from the client's checkpoint (before, the client died at once and saved nothing).
TEST_F(CoordinatorStopTest, ToldByTheLauncherTheClientSavesAndTheSameCommandResumes) {
  std::string dir = path("job");
  testing::CommandResult run = run_and_stop(command(dir), "self");
  EXPECT_EQ(run.status, kRestartExitCode) << testing::tail(run.output, 6000);
  int64_t step = client_stop(run, dir);
  ASSERT_GE(step, 0);
  std::string progress = read_file(dir + "/client_progress");
  EXPECT_NE(progress.find("checkpoint_step: " + std::to_string(step) + "\n"), std::string::npos)
      << progress;
  run = testing::run_command(command(dir) + " 2>&1");
  EXPECT_EQ(client_resumed_at(run), step) << testing::tail(run.output, 6000);
  expect_finished(run, dir);
}

// To the client alone: the launcher restarts it, and the new client resumes from the
// checkpoint while the workers and the ps task run on.
TEST_F(CoordinatorStopTest, ToldAloneTheClientSavesAndItsSuccessorResumesThere) {
  std::string dir = path("job");
  testing::CommandResult run = run_and_stop(command(dir), "client:0");
  int64_t step = client_stop(run, dir);
  ASSERT_GE(step, 0);
  EXPECT_EQ(client_resumed_at(run), step) << testing::tail(run.output, 6000);
  EXPECT_EQ(count(run.output, "started client:0 pid="), 2);
  EXPECT_EQ(count(run.output, "started worker:0 pid="), 1);
  EXPECT_EQ(count(run.output, "started ps:0 pid="), 1);
  expect_finished(run, dir);
}

// To a worker alone: it stops after its step and the launcher restarts it; the rest of its
// unit runs on the other worker, and the client goes on (it used to end with the worker's
// stop as the worker's training error, and start over from step 0).
TEST_F(CoordinatorStopTest, ToldAloneAWorkerHandsItsUnitOnAndComesBack) {
  std::string dir = path("job");
  testing::CommandResult run = run_and_stop(command(dir), "worker:0");
  EXPECT_TRUE(std::regex_search(run.output, std::regex(R"(\[worker:0\] \S+: a planned stop)")))
      << testing::tail(run.output, 6000);
  EXPECT_EQ(count(run.output, "started worker:0 pid="), 2) << testing::tail(run.output, 6000);
  EXPECT_EQ(count(run.output, "started client:0 pid="), 1) << testing::tail(run.output, 6000);
  expect_finished(run, dir);
}

// MultiWorkerMirrored workers driven by a client (cadre_launch --client=1 --workers=2): the
// workers stop after the same step with worker 0's checkpoint, and every run ends bit for bit
// as an uninterrupted one, without a restart of the collective counted against
// client_max_restarts.
class CollectiveClientStopTest : public PlannedStopTest {
 protected:
  std::string command(const std::string& dir, int64_t max_steps) {
    return std::string(CADRE_LAUNCH) + " --client=1 --workers=2 -- " +
           program(dir, "--strategy=multi_worker_mirrored", max_steps);
  }
  // Runs the job uninterrupted into path("ref").
  void run_reference(int64_t max_steps) {
    testing::CommandResult reference =
        testing::run_command(command(path("ref"), max_steps) + " 2>&1");
    ASSERT_EQ(reference.status, 0) << testing::tail(reference.output, 6000);
  }
  // The step both workers stopped at (checked equal, and checkpointed).
  int64_t workers_stop(const testing::CommandResult& run, const std::string& dir,
                       int64_t max_steps) {
    int64_t first =
        find_step(run.output, R"(\[worker:0\] \S+: a planned stop \([^)]*\) at step (\d+))");
    int64_t second =
        find_step(run.output, R"(\[worker:1\] \S+: a planned stop \([^)]*\) at step (\d+))");
    EXPECT_GE(first, 200) << testing::tail(run.output, 6000);
    EXPECT_LT(first, max_steps) << testing::tail(run.output, 6000);
    EXPECT_EQ(first, second) << "the workers stopped after different steps";
    if (first < 0) return first;
    EXPECT_EQ(checkpoint::CheckpointReader::open(checkpoint_of(dir, first))->global_step(), first);
    return first;
  }
  void expect_resumed_to_the_end(const testing::CommandResult& run, const std::string& dir,
                                 int64_t step, int64_t max_steps) {
    ASSERT_EQ(run.status, 0) << testing::tail(run.output, 6000);
    EXPECT_EQ(find_step(run.output, R"(\[worker:0\] .*resuming from \S+ at step (\d+))"), step)
        << testing::tail(run.output, 6000);
    EXPECT_NE(run.output.find("after 0 restart(s) of the collective"), std::string::npos)
        << testing::tail(run.output, 6000);
    testing::expect_same_variables(checkpoint_of(path("ref"), max_steps),
                                   checkpoint_of(dir, max_steps));
  }
};

// To the launcher: every task stops (the client once the workers have), exit 143, and the
// same command resumes. To a worker alone: both stop, the launcher restarts them, and the
// client's service takes their registration for a new round (it used to fail the cluster:
// 'restarted after the cluster had formed').
TEST_F(CollectiveClientStopTest, ToldByTheLauncherOrAWorkerTheWorkersStopTogether) {
  const int64_t max_steps = kMaxSteps;
  run_reference(max_steps);
  for (const std::string target : {"self", "worker:1"}) {
    SCOPED_TRACE(target);
    std::string dir = path(target.substr(0, target.find(':')));
    testing::CommandResult run = run_and_stop(command(dir, max_steps), target);
    int64_t step = workers_stop(run, dir, max_steps);
    ASSERT_GE(step, 0);
    if (target == "self") {
      EXPECT_EQ(run.status, kRestartExitCode) << testing::tail(run.output, 6000);
      run = testing::run_command(command(dir, max_steps) + " 2>&1");
    } else {
      EXPECT_EQ(count(run.output, "started client:0 pid="), 1);
    }
    expect_resumed_to_the_end(run, dir, step, max_steps);
  }
}

// To the client alone: it asks the workers for a planned stop through its service (they
// hear it at their next heartbeat), waits for worker 0's checkpoint, and exits 143; the
// launcher restarts it and the workers, which resume there (before, the client died at
// once and the workers failed without a checkpoint).
TEST_F(CollectiveClientStopTest, ToldAloneTheClientStopsItsWorkersWithACheckpoint) {
  const int64_t max_steps = 6000;  // the workers hear the client within a heartbeat (1 s)
  run_reference(max_steps);
  std::string dir = path("job");
  testing::CommandResult run = run_and_stop(command(dir, max_steps), "client:0");
  int64_t step = workers_stop(run, dir, max_steps);
  ASSERT_GE(step, 0);
  EXPECT_TRUE(std::regex_search(
      run.output, std::regex(R"(\[client:0\] \S+: a planned stop \(SIGTERM\) at step )" +
                             std::to_string(step) + ", worker 0's checkpoint")))
      << testing::tail(run.output, 6000);
  EXPECT_EQ(count(run.output, "started client:0 pid="), 2);
  expect_resumed_to_the_end(run, dir, step, max_steps);
}

}  // namespace
}  // namespace cadre
