// in_parallel, the fan-out for I/O-bound work: every call made once, all at once (the
// calling thread taking the first), and the first failure rethrown once every call ended.
#include "core/runtime/in_parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cadre {
namespace {

TEST(InParallelTest, CallsEachIndexOnceWithTheCallingThreadTakingTheFirst) {
  std::mutex mutex;
  std::map<int, int> calls;
  std::map<int, std::thread::id> threads;
  in_parallel(std::vector<int>{7, 3, 11}, [&](int i) {
    std::lock_guard<std::mutex> lock(mutex);
    ++calls[i];
    threads[i] = std::this_thread::get_id();
  });
  EXPECT_EQ(calls, (std::map<int, int>{{3, 1}, {7, 1}, {11, 1}}));
  EXPECT_EQ(threads[7], std::this_thread::get_id());
  EXPECT_NE(threads[3], std::this_thread::get_id());
  EXPECT_NE(threads[11], std::this_thread::get_id());
  EXPECT_NE(threads[3], threads[11]);

  calls.clear();
  in_parallel(4, [&](int i) {
    std::lock_guard<std::mutex> lock(mutex);
    ++calls[i];
  });
  EXPECT_EQ(calls, (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
}

TEST(InParallelTest, NothingToDoCallsNothing) {
  std::atomic<int> calls{0};
  in_parallel(std::vector<int>{}, [&](int) { ++calls; });
  in_parallel(0, [&](int) { ++calls; });
  in_parallel(-2, [&](int) { ++calls; });
  EXPECT_EQ(calls, 0);
}

// Every call waits for all the others to have started: this ends only if they run at once.
TEST(InParallelTest, TheCallsRunAtOnce) {
  constexpr int kCalls = 6;
  std::mutex mutex;
  std::condition_variable all_started;
  int started = 0;
  bool met = true;
  in_parallel(kCalls, [&](int) {
    std::unique_lock<std::mutex> lock(mutex);
    if (++started == kCalls) all_started.notify_all();
    if (!all_started.wait_for(lock, std::chrono::seconds(30), [&] { return started == kCalls; })) {
      met = false;
    }
  });
  EXPECT_TRUE(met) << "the calls ran one after another";
}

TEST(InParallelTest, AFailureIsRethrownOnceEveryCallHasEnded) {
  std::atomic<bool> slow_ended{false};
  try {
    in_parallel(3, [&](int i) {
      if (i == 1) throw std::runtime_error("call 1 failed");
      if (i == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        slow_ended = true;
      }
    });
    FAIL() << "the failure was lost";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "call 1 failed");
  }
  EXPECT_TRUE(slow_ended) << "in_parallel returned before every call ended";
}

TEST(InParallelTest, TheFirstFailureInCallOrderIsTheOneRethrown) {
  auto failing = [](const std::vector<int>& which, const std::vector<int>& fail) {
    try {
      in_parallel(which, [&](int i) {
        for (int f : fail) {
          if (f == i) throw std::runtime_error(std::to_string(i));
        }
      });
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("none");
  };
  // The calling thread's own failure wins, else the earliest index of `which` that failed,
  // however the threads were timed.
  EXPECT_EQ(failing({0, 1, 2}, {2, 0}), "0");
  EXPECT_EQ(failing({0, 1, 2, 3}, {3, 1}), "1");
  EXPECT_EQ(failing({5, 9, 4}, {4, 9}), "9");
  EXPECT_EQ(failing({0, 1}, {}), "none");
}

}  // namespace
}  // namespace cadre
