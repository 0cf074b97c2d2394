// A chief and a worker as two processes on 127.0.0.1 whose job fails: a worker that dies or
// hangs is named to the chief, which stops; a chief that fails by itself lets the worker go
// at once.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/integration/multi_worker_test.h"
#include "tests/support/processes.h"

namespace cadre {
namespace {

using testing::read_log;
using testing::wait_for;
using testing::multi_worker::MultiWorkerTest;
using testing::multi_worker::start;

TEST_F(MultiWorkerTest, AWorkerThatDiesIsNamedAndTheChiefStops) {
  expect_a_worker_that_dies_is_named_and_the_chief_stops({}, 3.0);
}

// Three times: a worker killed right after sending a message leaves the chief's next write
// to raise SIGPIPE (about one kill in three did, killing the chief with status 141, before
// the collective blocked it).
TEST_F(MultiWorkerTest, AWorkerThatDiesOverGlooIsNamedAndTheChiefStops) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    expect_a_worker_that_dies_is_named_and_the_chief_stops({{"HELPER_TRANSPORT", "gloo"}}, 3.0);
  }
}

// A worker that hangs (SIGSTOP: its connections stay open, as with a host that lost power
// or its network) over Gloo: the chief's read would wait for the collective's timeout (60 s
// here); the coordination service declares the worker dead at the heartbeat timeout (5 s)
// and the chief's all-reduce ends then, naming it.
TEST_F(MultiWorkerTest, AWorkerThatHangsOverGlooIsNamedAtTheHeartbeatTimeout) {
  auto [chief, worker] = start_training({{"HELPER_TRANSPORT", "gloo"}});
  ::kill(worker, SIGSTOP);
  auto stopped = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_for(chief), 1);
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  ::kill(worker, SIGKILL);
  wait_for(worker);
  std::string log = read_log(path("chief.log"));
  EXPECT_LT(seconds, 20.0) << testing::tail(log, 2000);
  EXPECT_NE(log.find("the cluster failed: task worker:0 has sent no heartbeat"), std::string::npos)
      << testing::tail(log, 2000);
}

// The chief fails by itself (its training throws) while the worker waits for it in an
// all-reduce: the chief leaves without waiting at the shutdown barrier (30 s), and the
// worker stops right after it, not at the heartbeat timeout (5 s).
TEST_F(MultiWorkerTest, AChiefThatFailsByItselfStopsTheJobAtOnce) {
  for (const char* transport : {"", "gloo"}) {
    SCOPED_TRACE(*transport ? transport : "shared memory");
    using Clock = std::chrono::steady_clock;
    auto began = Clock::now();
    auto [chief, worker] = start_failing_chief(transport, {});
    EXPECT_EQ(wait_for(chief), 1) << read_log(path("chief.log"));
    auto chief_ended = Clock::now();
    EXPECT_EQ(wait_for(worker), 1) << read_log(path("worker.log"));
    auto worker_ended = Clock::now();
    std::string chief_log = read_log(path("chief.log")), worker_log = read_log(path("worker.log"));
    EXPECT_LT(std::chrono::duration<double>(chief_ended - began).count(), 20.0)
        << testing::tail(chief_log, 2000);
    EXPECT_LT(std::chrono::duration<double>(worker_ended - chief_ended).count(), 3.0)
        << testing::tail(worker_log, 2000);
    EXPECT_NE(chief_log.find("failing at step 30"), std::string::npos)
        << testing::tail(chief_log, 2000);
    // The worker names the chief as the peer it lost.
    auto has = [&](const char* text) { return worker_log.find(text) != std::string::npos; };
    bool named = has("chief:0 (rank 0) gave up on the collective") || has("chief:0 (rank 0, pid") ||
                 has("a peer is gone (chief:0)");
    EXPECT_TRUE(named) << testing::tail(worker_log, 2000);
    // And the error the chief reported to the coordination service.
    EXPECT_TRUE(has("task chief:0 failed: HELPER_FAIL_AT_STEP: failing at step 30"))
        << testing::tail(worker_log, 2000) << "\nthe chief's log:\n"
        << testing::tail(chief_log, 2000);
  }
}

// The same chief, in a program that catches the error and lives on with its strategy:
// train() leaves the worker group as the error leaves it, so the worker does not wait for
// the chief's process to end.
TEST_F(MultiWorkerTest, AChiefThatCatchesItsTrainingErrorStillLetsTheWorkerGo) {
  for (const char* transport : {"", "gloo"}) {
    SCOPED_TRACE(*transport ? transport : "shared memory");
    using Clock = std::chrono::steady_clock;
    auto began = Clock::now();
    auto [chief, worker] = start_failing_chief(transport, {{"HELPER_KEEP_AFTER_FAILURE", "30"}});
    EXPECT_EQ(wait_for(worker, 25), 1) << read_log(path("worker.log"));
    double worker_seconds = std::chrono::duration<double>(Clock::now() - began).count();
    // The chief says it caught the error after train() has left the group.
    std::string chief_log;
    for (int i = 0; i < 500; ++i) {
      chief_log = read_log(path("chief.log"));
      if (chief_log.find("living on") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::string worker_log = read_log(path("worker.log"));
    EXPECT_NE(chief_log.find("living on"), std::string::npos) << testing::tail(chief_log, 2000);
    EXPECT_EQ(::kill(chief, 0), 0) << "the chief should still be living on";
    ::kill(chief, SIGKILL);
    wait_for(chief);
    EXPECT_LT(worker_seconds, 15.0) << testing::tail(worker_log, 2000);
    auto has = [&](const char* text) { return worker_log.find(text) != std::string::npos; };
    bool named = has("chief:0 (rank 0) gave up on the collective") ||
                 has("a peer is gone (chief:0)") || has("chief:0 (rank 0, pid");
    EXPECT_TRUE(named) << testing::tail(worker_log, 2000);
    // And the error the chief reported to the coordination service.
    EXPECT_TRUE(has("task chief:0 failed: HELPER_FAIL_AT_STEP: failing at step 30"))
        << testing::tail(worker_log, 2000) << "\nthe chief's log:\n"
        << testing::tail(chief_log, 2000);
  }
}

}  // namespace
}  // namespace cadre
