// The shared-memory collective with ranks as processes over a store in a directory: one
// killed in the middle of a reduction is named and leaves no segment in /dev/shm, and the
// names of dead creators are removed.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/collectives/shm/collective.h"
#include "strategies/collectives/shm/segment.h"
#include "tests/strategies/shm_test.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::own_segment_names;

// A store in a directory, one file per key, for ranks that are processes.
class DirectoryStore : public Store {
 public:
  explicit DirectoryStore(std::string dir) : dir_(std::move(dir)) {}
  void set(const std::string& key, const std::string& value) override {
    std::string path = file(key);
    { std::ofstream(path + ".tmp", std::ios::binary) << value; }
    std::filesystem::rename(path + ".tmp", path);
  }
  std::string get(const std::string& key, double timeout_seconds) override {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
    while (!std::filesystem::exists(file(key))) {
      if (std::chrono::steady_clock::now() > deadline) throw DeadlineExceededError(key);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return testing::read_file(file(key));
  }
  void wait(const std::vector<std::string>& keys, double timeout_seconds) override {
    for (const std::string& key : keys) get(key, timeout_seconds);
  }

 private:
  std::string file(const std::string& key) const {
    std::string name = key;
    for (char& c : name) c = c == '/' ? '_' : c;
    return dir_ + "/" + name;
  }
  std::string dir_;
};

// A worker killed while the others wait in a reduction is named, with its pid, well within
// a heartbeat timeout; the survivors' later calls fail at once; /dev/shm keeps nothing.
TEST(SharedMemoryProcessTest, AProcessKilledDuringAReductionIsNamedAndLeavesNoSegment) {
  testing::TempDir dir;
  SharedMemoryOptions options;
  options.rank_names = {"chief:0", "worker:0", "worker:1"};
  pid_t child = ::fork();
  if (child == 0) {
    int code = 0;
    try {
      DirectoryStore store(dir.path());
      auto collective = shared_memory_collective(store, 2, 3, options);
      std::vector<float> x(100000, 1.0f);
      collective->sum(x.data(), x.size());
      if (x[0] != 3.0f) code = 3;
      ::raise(SIGKILL);  // before the second reduction
    } catch (...) {
      code = 2;
    }
    ::_exit(code);
  }
  DirectoryStore store(dir.path());
  auto other = std::async(std::launch::async,
                          [&] { return shared_memory_collective(store, 1, 3, options); });
  auto collective = shared_memory_collective(store, 0, 3, options);
  auto second = other.get();
  ASSERT_NE(collective, nullptr);
  ASSERT_NE(second, nullptr);
  auto reduce_twice = [](ProcessCollective& c) -> std::string {
    std::vector<float> x(100000, 1.0f);
    c.sum(x.data(), x.size());
    if (x[0] != 3.0f) return "wrong first sum";
    try {
      c.sum(x.data(), x.size());
    } catch (const UnavailableError& e) {
      return e.what();
    } catch (const AbortedError& e) {
      return e.what();
    }
    return "the second sum returned";
  };
  auto start = std::chrono::steady_clock::now();
  auto peer = std::async(std::launch::async, [&] { return reduce_twice(*second); });
  std::string own = reduce_twice(*collective);
  std::string theirs = peer.get();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child exited with " << WEXITSTATUS(status);
  const std::string named = str_cat("worker:1 (rank 2, pid ", child, ") is gone");
  // One survivor sees the process gone; the other may hear it first from the survivor that
  // gave up.
  EXPECT_TRUE(own.find(named) != std::string::npos || theirs.find(named) != std::string::npos)
      << own << "\n"
      << theirs;
  EXPECT_LT(seconds, 2.0);
  float y = 1;
  EXPECT_THROW(collective->sum(&y, 1), AbortedError);
  collective.reset();
  second.reset();
  EXPECT_TRUE(own_segment_names().empty());
}

// A segment whose creator died before the others mapped it is removed by the next job.
TEST(SharedMemoryProcessTest, OrphanedNamesOfDeadCreatorsAreRemoved) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // its pid now names no process
  struct stat st;
  ASSERT_EQ(::stat("/proc/self/ns/pid", &st), 0);
  std::string dead = str_cat("/cadre-", st.st_ino, "-", child, "-feedfacefeedface");
  std::string live = str_cat("/cadre-", st.st_ino, "-", ::getpid(), "-feedfacefeedface");
  for (const std::string& name : {dead, live}) {
    int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
    ASSERT_GE(fd, 0) << name;
    ::close(fd);
  }
  EXPECT_GE(remove_orphan_segments(), 1);
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + dead));
  EXPECT_TRUE(std::filesystem::exists("/dev/shm" + live));
  ::shm_unlink(live.c_str());
}

}  // namespace
}  // namespace cadre
