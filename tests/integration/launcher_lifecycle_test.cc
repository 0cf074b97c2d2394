// cadre_launch under stress: stopped by a signal it stops every task (a second signal
// kills at once), killed outright its tasks die with it, a task that ends early does not
// make it spin, and the evaluator's death never touches training.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cadre/estimator/train_and_evaluate.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using Clock = std::chrono::steady_clock;

// A shell command each task runs; $TF_CONFIG tells the task its type.
std::vector<std::string> shell_tasks(const std::string& script) {
  return {"--", "/bin/sh", "-c", script};
}

class LauncherLifecycleTest : public cadre::testing::TempDirTest {
 protected:
  // Starts cadre_launch with its output in a file.
  pid_t start(const std::vector<std::string>& args) {
    log_ = path("launch.log");
    pid_t pid = ::fork();
    if (pid == 0) {
      if (!std::freopen(log_.c_str(), "w", stdout)) ::_exit(126);
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
      std::vector<char*> argv{const_cast<char*>(CADRE_LAUNCH)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  }

  std::string output() const { return testing::read_log(log_); }

  // The pids of the "started <task> pid=N" lines, once `count` tasks have started.
  std::vector<pid_t> started_pids(size_t count) {
    std::vector<pid_t> pids;
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      pids.clear();
      std::string text = output();
      std::regex started(R"(started \S+ pid=(\d+))");
      for (std::sregex_iterator it(text.begin(), text.end(), started), end; it != end; ++it) {
        pids.push_back(std::stoi((*it)[1]));
      }
      if (pids.size() >= count) return pids;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "tasks did not start: " << output();
    return pids;
  }

  // Waits for the launcher; its exit status (128 + signal when a signal ended it) and the
  // CPU seconds it used.
  std::pair<int, double> wait_launcher(pid_t pid) {
    int status = 0;
    rusage usage{};
    ::wait4(pid, &status, 0, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
                 usage.ru_stime.tv_usec / 1e6;
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), cpu};
  }

  std::string log_;
};

// Gone, or a zombie waiting for init: either way it runs no more.
bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  if (text.empty()) return true;
  size_t paren = text.rfind(')');
  return paren != std::string::npos && text.size() > paren + 2 && text[paren + 2] == 'Z';
}

bool all_gone_within(const std::vector<pid_t>& pids, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    bool gone = true;
    for (pid_t pid : pids) gone = gone && process_gone(pid);
    if (gone) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST_F(LauncherLifecycleTest, SigtermStopsEveryTaskAndExits143) {
  std::vector<std::string> args = {"--chief=1", "--workers=2"};
  for (const std::string& a : shell_tasks("exec sleep 60")) args.push_back(a);
  pid_t launcher = start(args);
  std::vector<pid_t> tasks = started_pids(3);
  ASSERT_EQ(tasks.size(), 3u);
  ::kill(launcher, SIGTERM);
  auto [status, cpu] = wait_launcher(launcher);
  EXPECT_EQ(status, 143) << output();
  EXPECT_TRUE(all_gone_within(tasks, std::chrono::seconds(2))) << output();
  EXPECT_NE(output().find("got signal 15; a planned stop of every task"), std::string::npos)
      << output();
}

TEST_F(LauncherLifecycleTest, ASecondInterruptKillsTasksThatIgnoreTheFirst) {
  std::vector<std::string> args = {"--chief=1", "--workers=1"};
  for (const std::string& a : shell_tasks("trap '' INT TERM; sleep 60 & wait; sleep 60")) {
    args.push_back(a);
  }
  pid_t launcher = start(args);
  std::vector<pid_t> tasks = started_pids(2);
  ASSERT_EQ(tasks.size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the traps are set
  auto begin = Clock::now();
  ::kill(launcher, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(process_gone(tasks[0])) << "a task that ignores SIGINT gets a grace period";
  ::kill(launcher, SIGINT);
  auto [status, cpu] = wait_launcher(launcher);
  EXPECT_EQ(status, 130) << output();
  EXPECT_LT(Clock::now() - begin, std::chrono::seconds(5)) << "the second interrupt kills at once";
  EXPECT_TRUE(all_gone_within(tasks, std::chrono::seconds(2))) << output();
}

// A stop asked while a restart waits for a task to stop (within its grace period) starts
// no new tasks only to stop them again (it did: new tasks, and another grace period for the
// ones that had not yet installed their handlers).
TEST_F(LauncherLifecycleTest, ASigtermDuringARestartStartsNothingMore) {
  std::vector<std::string> args = {"--chief=1", "--workers=1", "--max_restarts=1",
                                   "--grace_secs=3"};
  // The worker fails after a second; the chief ignores SIGTERM, so the restart's stop of it
  // takes the whole grace period.
  for (const std::string& a :
       shell_tasks("case \"$TF_CONFIG\" in *'\"type\": \"worker\"'*) sleep 1; exit 1;; esac; "
                   "trap '' TERM; sleep 60 & wait; sleep 60")) {
    args.push_back(a);
  }
  pid_t launcher = start(args);
  ASSERT_EQ(started_pids(2).size(), 2u);
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (output().find("restarting the training tasks together") == std::string::npos &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(launcher, SIGTERM);
  auto begin = Clock::now();
  auto [status, cpu] = wait_launcher(launcher);
  EXPECT_EQ(status, 143) << output();  // the chief was killed: 128 + SIGTERM
  EXPECT_LT(Clock::now() - begin, std::chrono::seconds(5)) << output();
  std::string text = output();
  size_t after = text.find("restarting the training tasks together");
  ASSERT_NE(after, std::string::npos) << text;
  EXPECT_EQ(text.find("started ", after), std::string::npos) << text;
}

TEST_F(LauncherLifecycleTest, TasksDieWithALauncherKilledOutright) {
  std::vector<std::string> args = {"--chief=1", "--workers=1"};
  for (const std::string& a : shell_tasks("exec sleep 60")) args.push_back(a);
  pid_t launcher = start(args);
  std::vector<pid_t> tasks = started_pids(2);
  ASSERT_EQ(tasks.size(), 2u);
  ::kill(launcher, SIGKILL);
  wait_launcher(launcher);
  EXPECT_TRUE(all_gone_within(tasks, std::chrono::seconds(5)))
      << "a task must not outlive its launcher";
}

TEST_F(LauncherLifecycleTest, ATaskThatEndsEarlyDoesNotMakeTheLauncherSpin) {
  std::vector<std::string> args = {"--chief=1", "--workers=1"};
  for (const std::string& a :
       shell_tasks("case \"$TF_CONFIG\" in *'\"type\": \"chief\"'*) exit 0;; *) sleep 3;; esac")) {
    args.push_back(a);
  }
  pid_t launcher = start(args);
  auto [status, cpu] = wait_launcher(launcher);
  EXPECT_EQ(status, 0) << output();
  // Three seconds of waiting on the worker; polling a closed pipe took all of them.
  EXPECT_LT(cpu, 0.5) << "CPU seconds the launcher used while one task was left";
}

// The evaluator is killed in the middle of an evaluation: it is restarted alone, the
// training tasks never notice, and the job ends with the evaluator's final line.
TEST_F(LauncherLifecycleTest, AKilledEvaluatorRestartsAloneAndTrainingGoesOn) {
  testing::KillTaskOnce kill("evaluator:0", [](const std::string& line) {
    return line.find("[evaluator:0]") != std::string::npos &&
           line.find("evaluating") != std::string::npos;
  });
  testing::CommandResult run = testing::run_command(
      std::string(CADRE_LAUNCH) + " --chief=1 --workers=1 --evaluator=1 --max_restarts=1 -- " +
          CADRE_FASHION_MNIST + " --model_dir=" + path("m") +
          " --strategy=multi_worker_mirrored --max_steps=300 --save_checkpoints_steps=100"
          " --eval_steps=20 --batch_size=64 2>&1",
      std::ref(kill));
  ASSERT_TRUE(kill.killed()) << testing::tail(run.output);
  EXPECT_EQ(run.status, 0) << testing::tail(run.output);
  EXPECT_NE(run.output.find("evaluator:0 failed (killed by signal 9); restarting it alone"),
            std::string::npos)
      << testing::tail(run.output);
  EXPECT_EQ(run.output.find("restarting the training tasks"), std::string::npos);
  EXPECT_EQ(run.output.find("started chief:0", run.output.find("started chief:0") + 1),
            std::string::npos)
      << "the chief was started once";
  EXPECT_TRUE(std::regex_search(
      run.output,
      std::regex(R"(\[evaluator:0\] \{"task":"evaluator","model":"mlp","global_step":300)")))
      << testing::tail(run.output);
  EXPECT_EQ(read_training_finished(path("m")), 300);
}

// The evaluator holds no training state: it is restarted even without --max_restarts (up
// to 3 times), resumes after the last step it recorded, and the job ends well.
TEST_F(LauncherLifecycleTest, ADeadEvaluatorIsRestartedWithoutMaxRestarts) {
  testing::KillTaskOnce kill("evaluator:0", [](const std::string& line) {
    return line.find("[evaluator:0]") != std::string::npos;
  });
  testing::CommandResult run = testing::run_command(
      std::string(CADRE_LAUNCH) + " --chief=1 --workers=1 --evaluator=1 -- " + CADRE_FASHION_MNIST +
          " --model_dir=" + path("m") +
          " --strategy=multi_worker_mirrored --max_steps=200 --save_checkpoints_steps=100"
          " --eval_steps=2 --batch_size=64 2>&1",
      std::ref(kill));
  ASSERT_TRUE(kill.killed());
  EXPECT_EQ(run.status, 0) << testing::tail(run.output);
  EXPECT_NE(run.output.find("evaluator:0 failed (killed by signal 9); restarting it alone "
                            "(restart 1 of 3)"),
            std::string::npos)
      << testing::tail(run.output);
  EXPECT_TRUE(std::regex_search(
      run.output,
      std::regex(R"(\[evaluator:0\] \{"task":"evaluator","model":"mlp","global_step":200)")))
      << testing::tail(run.output);
}

}  // namespace
}  // namespace cadre
