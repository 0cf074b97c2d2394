// An elastic MultiWorkerMirrored job on 127.0.0.1 (a chief and two workers under
// cadre_launch --elastic): a worker killed with SIGKILL is restarted alone; the chief and
// the other worker keep their processes and step on within seconds, and the restarted
// worker rejoins them and ends with their variables, bit for bit.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <regex>
#include <string>

#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using Clock = std::chrono::steady_clock;
using testing::tail;

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Kills worker:1 once the chief has saved the checkpoint of step 40, and measures how long
// the chief then takes to save one 20 steps past the step it was killed at.
class KillAndTime {
 public:
  void operator()(const std::string& line) {
    static const std::regex started(R"(^started (\S+) pid=(\d+))");
    static const std::regex saved(R"(\[chief:0\].*saved checkpoint for step (\d+))");
    std::smatch m;
    if (std::regex_search(line, m, started)) pids_[m[1]] = std::stoi(m[2]);
    if (!std::regex_search(line, m, saved)) return;
    const int step = std::stoi(m[1]);
    if (kill_step_ < 0 && step >= 40 && pids_.count("worker:1")) {
      ::kill(pids_["worker:1"], SIGKILL);
      killed_at_ = Clock::now();
      kill_step_ = step;
    } else if (kill_step_ >= 0 && seconds_ < 0 && step >= kill_step_ + 20) {
      seconds_ = std::chrono::duration<double>(Clock::now() - killed_at_).count();
    }
  }
  int kill_step() const { return kill_step_; }
  double seconds() const { return seconds_; }

 private:
  std::map<std::string, pid_t> pids_;
  int kill_step_ = -1;
  Clock::time_point killed_at_;
  double seconds_ = -1;
};

// The fingerprint of its variables each training task printed at its end, by task.
std::map<std::string, std::string> fingerprints_in(const std::string& output) {
  std::map<std::string, std::string> out;
  static const std::regex fingerprint(R"re(\{"task":"(\w+:\d)","fingerprint":"([0-9a-f]+)")re");
  for (std::sregex_iterator it(output.begin(), output.end(), fingerprint), end; it != end; ++it) {
    out[(*it)[1]] = (*it)[2];
  }
  return out;
}

class ElasticJobTest : public cadre::testing::TempDirTest {
 protected:
  // Paced at 20 ms a step: the job is still training when a restarted worker is back.
  // `environment`: the helper's other variables; model_dir `model_dir`.
  std::string command(int max_restarts, const std::string& environment = "",
                      const std::string& model_dir = "m") const {
    return environment + " HELPER_ELASTIC=1 HELPER_STEP_SLEEP_MS=20 " + CADRE_LAUNCH +
           " --chief=1 --workers=2 --elastic --max_restarts=" + std::to_string(max_restarts) +
           " -- " + CADRE_MULTI_WORKER_HELPER + " " + path(model_dir) + " 400 2>&1";
  }
  void expect_a_sigkilled_worker_rejoins(const std::string& environment);
};

// Over shared memory (one host), then over Gloo's TCP, as across hosts, where the gradient
// buckets are summed beside the backward pass and are made again for each generation.
TEST_F(ElasticJobTest, ASigkilledWorkerRejoinsWhileTheOthersStepOn) {
  for (const std::string transport : {"", "HELPER_TRANSPORT=gloo"}) {
    SCOPED_TRACE(transport);
    expect_a_sigkilled_worker_rejoins(transport);
  }
}

void ElasticJobTest::expect_a_sigkilled_worker_rejoins(const std::string& environment) {
  KillAndTime kill;
  auto [status, output] = testing::run_command(
      command(1, environment, environment.empty() ? "m" : "m_other"), std::ref(kill));
  ASSERT_GE(kill.kill_step(), 40) << tail(output);
  std::printf("20 steps past the kill %.2f s after it\n", kill.seconds());
  EXPECT_EQ(status, 0) << tail(output);
  EXPECT_NE(output.find("cadre_launch: worker:1 failed (killed by signal 9); restarting it alone"),
            std::string::npos)
      << tail(output);
  // The chief and worker:0 ran as one process each from start to end.
  EXPECT_EQ(occurrences(output, "started chief:0"), 1u) << tail(output);
  EXPECT_EQ(occurrences(output, "started worker:0"), 1u) << tail(output);
  EXPECT_EQ(occurrences(output, "started worker:1"), 2u) << tail(output);
  EXPECT_GT(kill.seconds(), 0) << "no checkpoint 20 steps past the kill\n" << tail(output);
  EXPECT_LT(kill.seconds(), 10) << "steps resumed only after " << kill.seconds() << " s";
  // The restarted worker took the members' state (not its checkpoint's) and trained with them.
  EXPECT_TRUE(std::regex_search(
      output, std::regex(R"(\[worker:1\].*members took step (\d+) and the variables of worker)")))
      << tail(output);
  std::map<std::string, std::string> fingerprints = fingerprints_in(output);
  ASSERT_EQ(fingerprints.size(), 3u) << tail(output);
  EXPECT_EQ(fingerprints["worker:0"], fingerprints["chief:0"]);
  EXPECT_EQ(fingerprints["worker:1"], fingerprints["chief:0"]) << "the rejoined worker's variables";
}

// Without restarts left, the chief and worker:0 go on as a group of two once the service
// declares worker:1 dead (silent for two heartbeat intervals, 1 s here, after their collective
// broke), and finish; the launcher's status says a task failed.
TEST_F(ElasticJobTest, WithoutARestartTheOthersFinishWithoutTheDeadWorker) {
  KillAndTime kill;
  auto [status, output] = testing::run_command(command(0), std::ref(kill));
  ASSERT_GE(kill.kill_step(), 40) << tail(output);
  std::printf("20 steps past the kill %.2f s after it\n", kill.seconds());
  EXPECT_EQ(status, 1) << tail(output);
  EXPECT_NE(output.find("worker:1 failed (killed by signal 9); the others step on without it"),
            std::string::npos)
      << tail(output);
  EXPECT_NE(output.find("the worker group's generation 2 is chief:0,worker:0"), std::string::npos)
      << tail(output);
  EXPECT_GT(kill.seconds(), 0) << tail(output);
  EXPECT_LT(kill.seconds(), 10);
  EXPECT_EQ(occurrences(output, "started worker:1"), 1u) << tail(output);
  std::map<std::string, std::string> fingerprints = fingerprints_in(output);
  ASSERT_EQ(fingerprints.size(), 2u) << tail(output);
  EXPECT_EQ(fingerprints["worker:0"], fingerprints["chief:0"]);
}

}  // namespace
}  // namespace cadre
