// Kills a saving process with SIGKILL at random moments, many times, and checks that the
// state file never names a missing or partial checkpoint and that the latest stays
// loadable with the values of its step.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "checkpoint/reader.h"
#include "checkpoint/restore.h"
#include "checkpoint/state_file.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

pid_t start_helper(const std::string& model_dir, int keep_max) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string keep = std::to_string(keep_max);
    ::execl(CADRE_CRASH_HELPER, CADRE_CRASH_HELPER, model_dir.c_str(), keep.c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

// Checks the invariants of a model_dir after a crash; returns the latest step (0: none).
int64_t check_model_dir(const std::string& model_dir, int keep_max) {
  auto env = posix_env();
  std::optional<CheckpointState> state = read_state(*env, model_dir);
  if (!state) return 0;
  EXPECT_LE(state->all_model_checkpoint_paths.size(), static_cast<size_t>(keep_max));
  for (const std::string& name : state->all_model_checkpoint_paths) {
    std::string path = resolve_checkpoint_path(model_dir, name);
    auto reader = CheckpointReader::open(path);  // throws when missing or partial
    EXPECT_TRUE(reader->verify().empty()) << path;
  }
  // The latest restores strictly, with the values of its own step.
  std::string latest = resolve_checkpoint_path(model_dir, state->model_checkpoint_path);
  auto reader = CheckpointReader::open(latest);
  int64_t step = reader->global_step();
  EXPECT_EQ(checkpoint_step(base_name(latest), "model.ckpt"), step);
  CheckpointData expected = testing::small_model(step, static_cast<float>(step));
  expected.variables["big/kernel"] = testing::ramp({512, 1024}, 1, static_cast<float>(step));
  std::map<std::string, Tensor> targets;
  for (const auto& [name, value] : expected.variables)
    targets[name] = Tensor::zeros(value.shape(), value.dtype());
  restore(*reader, whole_targets(targets));
  for (const auto& [name, value] : expected.variables) {
    testing::expect_equal_tensors(value, targets[name], name);
  }
  return step;
}

TEST(CrashTest, SigkillDuringSavesNeverLeavesAStateFileNamingAMissingOrPartialFile) {
  testing::TempDir dir;
  const int kKeepMax = 3;
  const int kRepetitions = 40;
  std::mt19937 random(12345);
  std::uniform_int_distribution<int> delay_us(0, 120'000);
  int64_t previous_step = 0;
  int killed_with_checkpoints = 0;
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < kRepetitions; ++i) {
    pid_t pid = start_helper(dir.path(), kKeepMax);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(random)));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the helper exited by itself: " << WEXITSTATUS(status);
    int64_t step = check_model_dir(dir.path(), kKeepMax);
    if (HasFailure()) FAIL() << "after repetition " << i;
    // Progress is never lost: the latest step only moves forward.
    EXPECT_GE(step, previous_step);
    if (step > previous_step) ++killed_with_checkpoints;
    previous_step = step;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << kRepetitions << " kills in " << seconds << " s; the latest step reached "
            << previous_step << "; progress after " << killed_with_checkpoints << " kills\n";
  EXPECT_GT(previous_step, 0);
}

}  // namespace
}  // namespace cadre::checkpoint
