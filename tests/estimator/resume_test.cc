// A training process killed with SIGKILL at any step and started again with the same
// command ends where an uninterrupted run ends: the same final loss and the same variables
// (variables, Adam slots, global step, dropout generator and shuffled input position all
// come back from the checkpoint).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

constexpr int kMaxSteps = 80;

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};

Child start(const std::string& model_dir) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    std::string steps = std::to_string(kMaxSteps);
    ::execl(CADRE_RESUME_HELPER, CADRE_RESUME_HELPER, model_dir.c_str(), steps.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, ::fdopen(fds[0], "r")};
}

// Reads the child's lines until "step <kill_at>" (then SIGKILL) or its end; returns the
// "final" line's loss, or nullopt when killed.
std::optional<double> run(const std::string& model_dir, int kill_at, int* last_step_seen) {
  Child child = start(model_dir);
  char line[256];
  std::optional<double> final_loss;
  bool killed = false;
  while (std::fgets(line, sizeof line, child.out)) {
    long long step;
    double loss;
    if (std::sscanf(line, "step %lld %lf", &step, &loss) == 2) {
      *last_step_seen = static_cast<int>(step);
      if (step == kill_at) {
        ::kill(child.pid, SIGKILL);
        killed = true;
        break;
      }
    } else if (std::sscanf(line, "final %lld %lf", &step, &loss) == 2) {
      EXPECT_EQ(step, kMaxSteps);
      final_loss = loss;
    }
  }
  std::fclose(child.out);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  if (killed) {
    EXPECT_TRUE(WIFSIGNALED(status));
    return std::nullopt;
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "helper failed in " << model_dir;
  return final_loss;
}

std::map<std::string, std::vector<double>> variables_of(const std::string& model_dir) {
  auto reader = checkpoint::CheckpointReader::open(*checkpoint::latest_checkpoint(model_dir));
  std::map<std::string, std::vector<double>> values;
  for (const auto& [name, info] : reader->variables()) {
    values[name] = reader->read(name).to_vector<double>();
  }
  return values;
}

class ResumeTest : public cadre::testing::TempDirTest {};

TEST_F(ResumeTest, KilledAndRestartedRunsEndExactlyAsAnUninterruptedOne) {
  int seen = 0;
  std::optional<double> reference = run(path("straight"), -1, &seen);
  ASSERT_TRUE(reference.has_value());
  auto reference_variables = variables_of(path("straight"));
  // Kill points: before the first checkpoint, right at one (every 10 steps), just after,
  // in between, twice in one run, and after the last step's checkpoint.
  const std::vector<std::vector<int>> schedules = {{3},      {10},     {11}, {37},
                                                   {25, 61}, {52, 53}, {79}, {kMaxSteps}};
  for (const std::vector<int>& kills : schedules) {
    std::string dir =
        path("killed_" + std::to_string(kills.front()) + "_" + std::to_string(kills.size()));
    for (int kill_at : kills) {
      EXPECT_FALSE(run(dir, kill_at, &seen).has_value());
      EXPECT_GE(seen, kill_at);
    }
    std::optional<double> final_loss = run(dir, -1, &seen);
    ASSERT_TRUE(final_loss.has_value()) << dir;
    EXPECT_NEAR(*final_loss, *reference, 1e-5 * std::abs(*reference)) << dir;
    EXPECT_EQ(*final_loss, *reference) << dir << ": resuming is exact, not only close";
    EXPECT_EQ(variables_of(dir), reference_variables) << dir;
  }
}

}  // namespace
}  // namespace cadre
