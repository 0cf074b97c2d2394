// The shared-memory collective: ranks as threads of this process over an in-memory store
// (sums over ranks x sizes, bit-identical on every rank; broadcasts; a rank that never
// arrives, or leaves), and ranks as processes (one killed in the middle of a reduction is
// named, and no segment is left in /dev/shm).
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
#include <functional>
#include <future>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/cluster/memory_store.h"
#include "strategies/collectives/host_collective.h"
#include "strategies/collectives/shm/collective.h"
#include "strategies/collectives/shm/segment.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

// The names this process's segments have in /dev/shm (they should have none once every
// rank has joined).
std::vector<std::string> own_segment_names() {
  std::vector<std::string> names;
  std::string pid = str_cat("-", ::getpid(), "-");
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = entry.path().filename().string();
    if (name.rfind("cadre-", 0) == 0 && name.find(pid) != std::string::npos) names.push_back(name);
  }
  return names;
}

void on_ranks(int ranks, SharedMemoryOptions options,
              const std::function<void(ProcessCollective&)>& fn) {
  MemoryStore store;
  std::vector<std::future<void>> done;
  for (int r = 0; r < ranks; ++r) {
    done.push_back(std::async(std::launch::async, [&, r] {
      std::unique_ptr<ProcessCollective> collective =
          shared_memory_collective(store, r, ranks, options);
      ASSERT_NE(collective, nullptr);
      EXPECT_EQ(collective->rank(), r);
      EXPECT_EQ(collective->size(), ranks);
      EXPECT_STREQ(collective->transport(), "shared memory");
      fn(*collective);
    }));
  }
  for (auto& d : done) d.get();
}

// What rank r contributes at element i: values of mixed magnitude, so that the order of the
// additions shows in the bits.
template <typename T>
std::vector<T> contribution(int r, size_t count) {
  std::mt19937 random(static_cast<uint32_t>(1000 + r));
  std::uniform_real_distribution<double> mantissa(-1, 1);
  std::vector<T> values(count);
  for (size_t i = 0; i < count; ++i) {
    values[i] = static_cast<T>(mantissa(random) * std::pow(10.0, static_cast<int>(i % 7) - 3));
  }
  return values;
}

// The sum in rank order, as one process would add them.
template <typename T>
std::vector<T> expected_sum(int ranks, size_t count) {
  std::vector<T> sum = contribution<T>(0, count);
  for (int r = 1; r < ranks; ++r) {
    std::vector<T> x = contribution<T>(r, count);
    for (size_t i = 0; i < count; ++i) sum[i] = sum[i] + x[i];
  }
  return sum;
}

class SharedMemoryTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

// 1000 elements go through one exchange, 100,003 through several reduce-scatter chunks of
// a 16 KiB slot with a ragged last one: the bits are those of summing in rank order.
TEST_P(SharedMemoryTest, SumIsTheRankOrderSumOnEveryRank) {
  auto [ranks, count] = GetParam();
  SharedMemoryOptions options;
  options.slot_bytes = 16 << 10;
  const std::vector<float> floats = expected_sum<float>(ranks, count);
  const std::vector<double> doubles = expected_sum<double>(ranks, count);
  on_ranks(ranks, options, [&, count = count](ProcessCollective& collective) {
    std::vector<float> f = contribution<float>(collective.rank(), count);
    std::vector<double> d = contribution<double>(collective.rank(), count);
    collective.sum(f.data(), count);
    collective.sum(d.data(), count);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(f[i], floats[i]) << "element " << i << " on rank " << collective.rank();
      ASSERT_EQ(d[i], doubles[i]) << "element " << i << " on rank " << collective.rank();
    }
  });
}

TEST_P(SharedMemoryTest, BroadcastGivesEveryRankTheRootsBytes) {
  auto [ranks, count] = GetParam();
  SharedMemoryOptions options;
  options.slot_bytes = 16 << 10;
  on_ranks(ranks, options, [count = count, ranks = ranks](ProcessCollective& collective) {
    const int root = ranks - 1;
    std::vector<int32_t> values(count, collective.rank() == root ? 7 : collective.rank());
    for (size_t i = 0; i < count; i += 97) values[i] += collective.rank() == root ? int(i) : 0;
    collective.broadcast(values.data(), values.size() * sizeof(int32_t), root);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(values[i], 7 + (i % 97 == 0 ? int(i) : 0)) << i;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(RanksBySizes, SharedMemoryTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(size_t{1}, size_t{1000},
                                                              size_t{100003})));

// Thousands of back-to-back tiny sums and broadcasts, as a training loop makes (the slots
// are reused every other call): no lost wake-up, no torn value.
TEST(SharedMemoryCollectiveTest, ManySmallCollectivesInARow) {
  on_ranks(3, {}, [](ProcessCollective& collective) {
    for (int i = 0; i < 5000; ++i) {
      double x = collective.rank() + i;
      collective.sum(&x, 1);
      ASSERT_EQ(x, 3 + 3.0 * i) << "call " << i;
      int64_t step = collective.rank() == 0 ? i : -1;
      collective.broadcast(&step, sizeof step, 0);
      ASSERT_EQ(step, i);
    }
  });
}

TEST(SharedMemoryCollectiveTest, NoNameIsLeftOnceEveryRankHasJoined) {
  on_ranks(2, {}, [](ProcessCollective&) {});
  EXPECT_TRUE(own_segment_names().empty()) << own_segment_names().front();
}

// A rank that never comes to a collective: the others fail with what the coordination
// service says, and every later call fails at once.
TEST(SharedMemoryCollectiveTest, APeerFailureEndsTheWaitWithItsName) {
  std::atomic<bool> failed{false};
  SharedMemoryOptions options;
  options.peer_failure = [&] { return failed ? std::string("task worker:1 has sent no heartbeat") : ""; };
  MemoryStore store;
  auto absent = std::async(std::launch::async, [&] {
    return shared_memory_collective(store, 1, 2, options);
  });
  auto collective = shared_memory_collective(store, 0, 2, options);
  auto held = absent.get();  // joined, and never calls sum
  std::thread fail([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    failed = true;
  });
  auto start = std::chrono::steady_clock::now();
  float x = 1;
  try {
    collective->sum(&x, 1);
    ADD_FAILURE() << "the sum returned without its peer";
  } catch (const AbortedError& e) {
    EXPECT_NE(std::string(e.what()).find("task worker:1 has sent no heartbeat"), std::string::npos)
        << e.what();
  }
  fail.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_THROW(collective->sum(&x, 1), AbortedError);
  // The absent rank learns too, through the segment.
  EXPECT_THROW(held->sum(&x, 1), AbortedError);
}

// A rank that leaves (its training failed) ends the others' wait at once, by name, long
// before the collective's timeout; its later calls fail too.
TEST(SharedMemoryCollectiveTest, ARankThatLeavesEndsTheOthersWaitWithItsName) {
  SharedMemoryOptions options;
  options.rank_names = {"chief:0", "worker:0"};
  MemoryStore store;
  auto leaving = std::async(std::launch::async, [&] {
    return shared_memory_collective(store, 0, 2, options);
  });
  auto collective = shared_memory_collective(store, 1, 2, options);
  auto leaver = leaving.get();
  std::thread leave([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    leaver->leave();
  });
  auto start = std::chrono::steady_clock::now();
  std::vector<float> x(1 << 20, 1.0f);  // the chunked path
  try {
    collective->sum(x.data(), x.size());
    ADD_FAILURE() << "the sum returned without its peer";
  } catch (const AbortedError& e) {
    EXPECT_NE(std::string(e.what()).find("chief:0 (rank 0) gave up on the collective"),
              std::string::npos)
        << e.what();
  }
  leave.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  float y = 1;
  EXPECT_THROW(collective->sum(&y, 1), AbortedError);
  EXPECT_THROW(leaver->sum(&y, 1), AbortedError);
}

TEST(SharedMemoryCollectiveTest, ARankThatNeverArrivesEndsAtTheTimeout) {
  SharedMemoryOptions options;
  options.timeout_seconds = 0.5;
  MemoryStore store;
  auto other = std::async(std::launch::async, [&] { return shared_memory_collective(store, 1, 2, options); });
  auto collective = shared_memory_collective(store, 0, 2, options);
  auto held = other.get();
  auto start = std::chrono::steady_clock::now();
  double x = 1;
  EXPECT_THROW(collective->sum(&x, 1), DeadlineExceededError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST(SharedMemoryCollectiveTest, BadArgumentsAreRefused) {
  MemoryStore store;
  EXPECT_THROW(shared_memory_collective(store, 2, 2, {}), InvalidArgumentError);
  SharedMemoryOptions tiny;
  tiny.slot_bytes = 100;
  EXPECT_THROW(shared_memory_collective(store, 0, 2, tiny), InvalidArgumentError);
}

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
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
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
  auto other = std::async(std::launch::async, [&] { return shared_memory_collective(store, 1, 3, options); });
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
      << own << "\n" << theirs;
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

// Processes of one kernel meet through shared memory unless told to use Gloo; either way
// the sums agree.
TEST(HostCollectiveTest, OneHostChoosesSharedMemoryAndGlooOnRequest) {
  for (HostTransport transport : {HostTransport::kAuto, HostTransport::kGloo}) {
    MemoryStore store;
    HostCollectiveOptions options;
    options.transport = transport;
    options.timeout_seconds = 30;
    std::vector<std::future<std::string>> done;
    for (int r = 0; r < 2; ++r) {
      done.push_back(std::async(std::launch::async, [&, r] {
        auto collective = host_collective(store, r, 2, "127.0.0.1", options);
        float x = 1.5f;
        collective->sum(&x, 1);
        EXPECT_EQ(x, 3.0f);
        return std::string(collective->transport());
      }));
    }
    for (auto& d : done) {
      EXPECT_EQ(d.get(), transport == HostTransport::kAuto ? "shared memory" : "Gloo");
    }
  }
}

// Ranks on two simulated hosts (a, a, b, b) and on a host of their own (a, b, b): shared
// memory within each host, Gloo between the hosts' first processes; sums and broadcasts
// from any root agree on every rank.
TEST(HostCollectiveTest, SeveralHostsReduceWithinEachThenAcross) {
  for (std::vector<std::string> keys : {std::vector<std::string>{"a", "a", "b", "b"},
                                        std::vector<std::string>{"a", "b", "b"}}) {
    const int ranks = static_cast<int>(keys.size());
    MemoryStore store;
    std::vector<std::future<void>> done;
    for (int r = 0; r < ranks; ++r) {
      done.push_back(std::async(std::launch::async, [&, r] {
        HostCollectiveOptions options;
        options.timeout_seconds = 30;
        options.host_key = keys[r];
        auto collective = host_collective(store, r, ranks, "127.0.0.1", options);
        EXPECT_STREQ(collective->transport(), "shared memory within hosts, Gloo across");
        EXPECT_EQ(collective->rank(), r);
        std::vector<double> x(50000);
        for (size_t i = 0; i < x.size(); ++i) x[i] = r * 1000.0 + static_cast<double>(i);
        collective->sum(x.data(), x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(x[i], 1000.0 * ranks * (ranks - 1) / 2 + ranks * static_cast<double>(i)) << i;
        }
        for (int root = 0; root < ranks; ++root) {
          std::vector<int32_t> v(3000, r == root ? 100 + root : -1);
          collective->broadcast(v.data(), v.size() * sizeof(int32_t), root);
          ASSERT_EQ(v, std::vector<int32_t>(3000, 100 + root)) << "root " << root << ", rank " << r;
        }
      }));
    }
    for (auto& d : done) d.get();
  }
}

}  // namespace
}  // namespace cadre
