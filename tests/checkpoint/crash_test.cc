// Kills a saving process with SIGKILL at random moments, many times, and checks that the
// state file never names a missing or partial checkpoint, that the latest stays loadable
// with the values of its step, and that no save that returned is lost. The kill moments
// are timed from the helper's own progress reports, not from the fork, so that a busy
// machine (slow process start-up) cannot make every kill land before the first save.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <thread>

#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/checkpoint/state_file.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// How long the helper may take to report anything (start-up, a save) before the test gives
// up on it: far beyond any plausible delay, however busy the machine.
constexpr milliseconds kReportTimeout{60'000};

// A crash_helper.cc process with its stdout on a pipe. The destructor kills and reaps it
// when a failed assertion leaves it running.
class Helper {
 public:
  Helper(const std::string& model_dir, int keep_max) {
    const std::string keep = std::to_string(keep_max);  // no allocation after fork()
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);  // the duplicate is not close-on-exec
      ::execl(CADRE_CRASH_HELPER, CADRE_CRASH_HELPER, model_dir.c_str(), keep.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }
  ~Helper() {
    if (pid_ > 0) kill_and_wait();
    if (out_ >= 0) ::close(out_);
  }
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;

  bool started() const { return pid_ > 0 && out_ >= 0; }

  // SIGKILL, then the wait status (-1 when it could not be reaped).
  int kill_and_wait() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    pid_t reaped = ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return reaped > 0 ? status : -1;
  }

  // The helper's next report line, or nullopt at its end (the helper is gone) or when
  // `timeout` passes first.
  std::optional<std::string> next_line(milliseconds timeout) {
    const auto deadline = steady_clock::now() + timeout;
    while (true) {
      size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      pollfd readable{out_, POLLIN, 0};
      int ready = ::poll(&readable, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return std::nullopt;
      char chunk[256];
      ssize_t got = ::read(out_, chunk, sizeof(chunk));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(got));
    }
  }

  // Reads reports until `saves` more "saved <step>" lines have come; returns false on a
  // timeout or an early end. `last_saved` follows the steps reported.
  bool wait_for_saves(int saves, int64_t& last_saved) {
    while (saves > 0) {
      std::optional<std::string> line = next_line(kReportTimeout);
      if (!line) return false;
      if (parse_saved(*line, last_saved)) --saves;
    }
    return true;
  }

  // After the kill: takes in what the helper reported before it died.
  void drain(int64_t& last_saved) {
    while (std::optional<std::string> line = next_line(kReportTimeout)) {
      parse_saved(*line, last_saved);
    }
  }

 private:
  static bool parse_saved(const std::string& line, int64_t& last_saved) {
    if (!line.starts_with("saved ")) return false;
    last_saved = std::stoll(line.substr(6));
    return true;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
};

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
    Helper helper(dir.path(), kKeepMax);
    ASSERT_TRUE(helper.started()) << std::strerror(errno);
    // Kill times count from what the helper reports, not from the fork: start-up (loading
    // the libraries) alone can outlast the whole delay range on a busy machine, and then
    // every kill would land before the first save. Every other repetition first lets a save
    // complete, so that kills also land in later saves, with earlier checkpoints to lose.
    ASSERT_EQ(helper.next_line(kReportTimeout), "started") << "repetition " << i;
    int64_t last_saved = 0;  // the last step the helper reported saved (0: none)
    ASSERT_TRUE(helper.wait_for_saves(i % 2, last_saved))
        << "the helper reported no save within " << kReportTimeout.count() << " ms";
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(random)));
    int status = helper.kill_and_wait();
    ASSERT_NE(status, -1) << std::strerror(errno);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the helper exited by itself: " << WEXITSTATUS(status);
    helper.drain(last_saved);
    int64_t step = check_model_dir(dir.path(), kKeepMax);
    if (HasFailure()) FAIL() << "after repetition " << i;
    // Progress is never lost: the latest step only moves forward, and a save that returned
    // is in the state file.
    EXPECT_GE(step, previous_step);
    EXPECT_GE(step, last_saved) << "repetition " << i;
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
