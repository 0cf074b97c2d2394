#include "cadre/runtime/threading.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/random.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"
#include "core/runtime/background_thread.h"
#include "core/runtime/parallel_for.h"

namespace cadre {
namespace {

// SCHED_BATCH and the niceness asked for, for the calling thread only; the name shows.
TEST(ThreadingTest, ABackgroundThreadIsBatchScheduledNicerAndNamed) {
  errno = 0;
  int own_nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
  ASSERT_EQ(errno, 0);
  int policy = -1, nice = -100;
  char name[16] = {};
  std::thread([&] {
    make_background_thread("cadre-test-bg", 3);
    policy = ::sched_getscheduler(0);
    nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
    ::pthread_getname_np(::pthread_self(), name, sizeof name);
  }).join();
  EXPECT_EQ(policy, SCHED_BATCH);
  EXPECT_EQ(nice, std::min(19, own_nice + 3));
  EXPECT_STREQ(name, "cadre-test-bg");
  EXPECT_EQ(::sched_getscheduler(0), SCHED_OTHER);
  EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid())), own_nice);
}

TEST(ThreadingTest, ParallelForCoversTheRangeOnce) {
  std::vector<std::atomic<int>> hits(100003);
  parallel_for(0, 100003, 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadingTest, ReplicaScopesSplitTheBudget) {
  int budget = intra_op_threads_budget();
  {
    ReplicaThreadScope scope(2);
    EXPECT_EQ(current_thread_budget(), std::max(1, budget / 2));
  }
  EXPECT_EQ(current_thread_budget(), budget);
  set_intra_op_threads(1);
  EXPECT_EQ(current_thread_budget(), 1);
  set_intra_op_threads(budget);
}

// A budget libgomp cannot create (a hundred thousand threads crashed it) is refused, naming
// both numbers, and leaves the budget as it was; up to the maximum is allowed.
TEST(ThreadingTest, ABudgetPastTheMaximumIsRefused) {
  const int budget = intra_op_threads_budget();
  EXPECT_EQ(max_intra_op_threads(), kMaxThreadsPerCore * hardware_threads());
  for (int threads : {100000, max_intra_op_threads() + 1}) {
    try {
      set_intra_op_threads(threads);
      ADD_FAILURE() << "a budget of " << threads << " threads was accepted";
    } catch (const InvalidArgumentError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find(std::to_string(threads)), std::string::npos) << what;
      EXPECT_NE(what.find("more than " + std::to_string(max_intra_op_threads())), std::string::npos)
          << what;
    }
    EXPECT_EQ(intra_op_threads_budget(), budget);
  }
  set_intra_op_threads(max_intra_op_threads());
  EXPECT_EQ(intra_op_threads_budget(), max_intra_op_threads());
  set_intra_op_threads(budget);
}

// CADRE_NUM_THREADS, read when the budget is first needed, is lowered to the maximum with a
// warning (in a fresh process: the budget of this one is already read).
TEST(ThreadingDeathTest, ACadreNumThreadsPastTheMaximumIsLoweredWithAWarning) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("CADRE_NUM_THREADS", "100000", 1);
        int budget = intra_op_threads_budget();
        std::fprintf(stderr, "budget %d\n", budget);
        std::exit(budget == max_intra_op_threads() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "CADRE_NUM_THREADS=100000 is more than [0-9]+, the most this process may use(.|\n)*budget "
      "[0-9]+");
}

TEST(ThreadingTest, SumsAreTheSameBitsWithAnyThreadCount) {
  Generator g(3);
  Tensor x = random_normal({3000000}, 0, 1, DType::kFloat32, &g);
  Tensor rows = random_normal({5000, 64}, 0, 1, DType::kFloat32, &g);
  int budget = intra_op_threads_budget();
  set_intra_op_threads(1);
  float one = sum(x).item<float>();
  std::vector<float> cols_one = sum(rows, {0}).to_vector<float>();
  set_intra_op_threads(4);
  float four = sum(x).item<float>();
  std::vector<float> cols_four = sum(rows, {0}).to_vector<float>();
  set_intra_op_threads(budget);
  EXPECT_EQ(one, four);
  EXPECT_EQ(cols_one, cols_four);
}

TEST(ThreadingTest, ReplicaThreadsRunKernelsConcurrently) {
  Tensor a = random_normal({64, 128}), b = random_normal({128, 32});
  // Computed with the replica threads' budget: oneDNN's result may differ in the last bits
  // between thread counts (on AMD Zen it does), but not between runs of one configuration.
  std::vector<float> expected;
  std::thread([&] {
    ReplicaThreadScope scope(3);
    expected = matmul(a, b).to_vector<float>();
  }).join();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&] {
      ReplicaThreadScope scope(3);
      for (int i = 0; i < 20; ++i) {
        if (matmul(a, b).to_vector<float>() != expected) mismatches++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace cadre
