// The shared-memory collective with ranks as threads of this process over an in-memory store
// (sums over ranks x sizes, bit-identical on every rank; broadcasts; a rank that never
// arrives, or leaves), and the host collective that chooses it (ranks as processes:
// shm_process_test.cc).
#include "tests/strategies/shm_test.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "cadre/base/errors.h"
#include "strategies/cluster/memory_store.h"
#include "strategies/collectives/host_collective.h"
#include "strategies/collectives/shm/collective.h"

namespace cadre {
namespace {

using testing::own_segment_names;

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
  options.peer_failure = [&] {
    return failed ? std::string("task worker:1 has sent no heartbeat") : "";
  };
  MemoryStore store;
  auto absent = std::async(std::launch::async,
                           [&] { return shared_memory_collective(store, 1, 2, options); });
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
  auto leaving = std::async(std::launch::async,
                            [&] { return shared_memory_collective(store, 0, 2, options); });
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
  auto other = std::async(std::launch::async,
                          [&] { return shared_memory_collective(store, 1, 2, options); });
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
  for (std::vector<std::string> keys :
       {std::vector<std::string>{"a", "a", "b", "b"}, std::vector<std::string>{"a", "b", "b"}}) {
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
