// Background threads of prefetch and parallel map: errors reach the consumer, threads stop
// with their iterator, and work overlaps.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "cadre/runtime/threading.h"
#include "core/base/clock.h"
#include "core/runtime/compute_elsewhere.h"

namespace cadre::io {
namespace {

using Clock = std::chrono::steady_clock;

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

Dataset::MapFn failing_at(int64_t bad) {
  return [bad](Element e) {
    if (e.value().item<int64_t>() == bad) {
      throw InvalidArgumentError("bad element " + std::to_string(bad));
    }
    return e;
  };
}

struct Case {
  const char* name;
  int parallel;
  bool prefetch;
};

class MapErrorTest : public ::testing::TestWithParam<Case> {};

TEST_P(MapErrorTest, ExceptionReachesTheConsumerAtItsPositionAndIterationContinues) {
  Dataset ds = Dataset::range(8).map(failing_at(3), GetParam().parallel);
  if (GetParam().prefetch) ds = ds.prefetch(2);
  Iterator it = ds.make_iterator();
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(it.next()->value().item<int64_t>(), i);
  try {
    it.next();
    FAIL() << "the map function's exception was lost";
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "bad element 3");
  }
  for (int64_t i = 4; i < 8; ++i) EXPECT_EQ(it.next()->value().item<int64_t>(), i);
  EXPECT_FALSE(it.next());
}

INSTANTIATE_TEST_SUITE_P(Stages, MapErrorTest,
                         ::testing::Values(Case{"inline", 1, false}, Case{"parallel", 3, false},
                                           Case{"inline_prefetch", 1, true},
                                           Case{"parallel_prefetch", 3, true}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(PipelineThreadsTest, ForeignExceptionsKeepTheirTypeAndMessage) {
  Dataset ds = Dataset::range(4)
                   .map(
                       [](Element e) -> Element {
                         if (e.value().item<int64_t>() == 1)
                           throw std::out_of_range("index 1 of 0");
                         return e;
                       },
                       2)
                   .prefetch(1);
  Iterator it = ds.make_iterator();
  it.next();
  EXPECT_THROW(
      {
        try {
          it.next();
        } catch (const std::out_of_range& e) {
          EXPECT_STREQ(e.what(), "index 1 of 0");
          throw;
        }
      },
      std::out_of_range);
}

TEST(PipelineThreadsTest, GeneratorErrorsPassThroughPrefetch) {
  Dataset ds = Dataset::from_generator([i = 0]() mutable -> std::optional<Element> {
                 if (i == 2) throw DataLossError("record 2 is damaged");
                 return Element(Tensor::scalar<int64_t>(i++));
               }).prefetch(4);
  Iterator it = ds.make_iterator();
  it.next();
  it.next();
  EXPECT_THROW(it.next(), DataLossError);
}

TEST(PipelineThreadsTest, DestroyingIteratorsStopsTheirThreads) {
  int before = thread_count();
  auto start = Clock::now();
  {
    // An endless input: the producer and the map workers are always busy or blocked on a
    // full buffer when the iterator dies.
    Iterator it = Dataset::range(1000)
                      .repeat()
                      .map([](Element e) { return e; }, 3)
                      .prefetch(2)
                      .make_iterator();
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(it.next());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the buffers fill
    EXPECT_EQ(thread_count(), before + 4);  // 3 map workers and the prefetch thread
  }
  EXPECT_EQ(thread_count(), before);
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(PipelineThreadsTest, DestroyingWaitsOnlyForTheCallInFlight) {
  int before = thread_count();
  auto start = Clock::now();
  {
    Iterator it = Dataset::range(100)
                      .map([](Element e) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(50));
                        return e;
                      })
                      .prefetch(1)
                      .make_iterator();
    it.next();
  }
  EXPECT_EQ(thread_count(), before);
  EXPECT_LT(seconds_since(start), 1.0);  // 100 calls would take 5 s
}

Dataset sleepy_map(int parallel, int ms) {
  return Dataset::range(8).map(
      [ms](Element e) {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        return e;
      },
      parallel);
}

TEST(PipelineThreadsTest, ParallelMapOverlapsCalls) {
  auto start = Clock::now();
  Iterator it = sleepy_map(4, 50).make_iterator();
  int n = 0;
  while (it.next()) ++n;
  EXPECT_EQ(n, 8);
  EXPECT_LT(seconds_since(start), 0.3);  // 8 x 50 ms one after the other would be 0.4 s
}

TEST(PipelineThreadsTest, PrefetchOverlapsProducerAndConsumer) {
  auto start = Clock::now();
  Iterator it = sleepy_map(1, 30).prefetch(2).make_iterator();
  while (it.next()) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  // In turn: 8 x (30 + 30) ms = 0.48 s; overlapped: about 8 x 30 ms + 30 ms = 0.27 s.
  EXPECT_LT(seconds_since(start), 0.42);
}

// An autotuned prefetch runs its producer thread only where a core is spare beside the
// compute threads of this process and of the job's others on this host, or where those
// threads compute elsewhere (on GPUs); else the consumer reads the input itself, with the
// same elements and state.
TEST(PipelineThreadsTest, AnAutotunedPrefetchReadsInlineWhenNoCoreIsSpare) {
  const int budget = intra_op_threads_budget();
  auto threads_of = [](bool spare, bool compute_elsewhere = false) {
    set_intra_op_threads(1);
    set_processes_sharing_cores(spare ? 1 : hardware_threads());
    std::optional<ComputeElsewhereScope> elsewhere;
    if (compute_elsewhere) elsewhere.emplace();
    EXPECT_EQ(spare_core(), (spare || compute_elsewhere) && hardware_threads() > 1);
    std::set<std::thread::id> readers;
    std::vector<int64_t> values;
    Iterator it = Dataset::range(40)
                      .map([&](Element e) {
                        readers.insert(std::this_thread::get_id());
                        return e;
                      })
                      .prefetch()
                      .make_iterator();
    for (int i = 0; i < 20; ++i) values.push_back(it.next()->value().item<int64_t>());
    IteratorState state = it.save();
    Iterator resumed =
        Dataset::range(40).map([](Element e) { return e; }).prefetch().make_iterator();
    resumed.restore(state);
    while (auto e = resumed.next()) values.push_back(e->value().item<int64_t>());
    std::vector<int64_t> expected(40);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(values, expected);
    return readers;
  };
  const std::set<std::thread::id> inline_readers = threads_of(false);
  EXPECT_EQ(inline_readers, std::set<std::thread::id>{std::this_thread::get_id()});
  if (hardware_threads() > 1) {
    const std::set<std::thread::id> background = threads_of(true);
    EXPECT_EQ(background.count(std::this_thread::get_id()), 0u);
    // Compute threads whose work runs on GPUs leave their cores to the prefetch.
    const std::set<std::thread::id> beside_gpus = threads_of(false, /*compute_elsewhere=*/true);
    EXPECT_EQ(beside_gpus.count(std::this_thread::get_id()), 0u);
  }
  set_processes_sharing_cores(1);
  set_intra_op_threads(budget);
}

// The thread tuner lowering the budget (a small model steps faster on fewer threads) leaves a
// core spare: the next element is read by the prefetch's own thread, and the elements go on
// in order.
TEST(PipelineThreadsTest, AnInlinePrefetchMovesToItsThreadOnceACoreIsSpare) {
  if (hardware_threads() < 2) GTEST_SKIP() << "needs two cores";
  const int budget = intra_op_threads_budget();
  set_intra_op_threads(hardware_threads());
  std::mutex mutex;
  std::vector<std::thread::id> readers;
  Iterator it = Dataset::range(40)
                    .map([&](Element e) {
                      std::lock_guard lock(mutex);
                      readers.push_back(std::this_thread::get_id());
                      return e;
                    })
                    .prefetch()
                    .make_iterator();
  std::vector<int64_t> values;
  for (int i = 0; i < 10; ++i) values.push_back(it.next()->value().item<int64_t>());
  set_intra_op_threads(hardware_threads() - 1);
  while (auto e = it.next()) values.push_back(e->value().item<int64_t>());
  set_intra_op_threads(budget);
  std::vector<int64_t> expected(40);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(values, expected);
  std::lock_guard lock(mutex);
  ASSERT_EQ(readers.size(), 40u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(readers[i], std::this_thread::get_id()) << i;
  for (int i = 10; i < 40; ++i) EXPECT_NE(readers[i], std::this_thread::get_id()) << i;
}

}  // namespace
}  // namespace cadre::io
