// The client's unit dispatcher in one process, against two workers' step services whose
// training loops are threads counting their steps on a real UnitLedger (ps 0's): a worker
// that dies mid-unit loses its unit to the other, the steps it had applied stay counted and
// are not run again, and the units add up to exactly the steps asked for. Losing every
// worker for the timeout, or a worker's training error, ends the run with a clear error;
// workers whose inputs end end it short of its steps.
#include "strategies/cluster/unit_dispatcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "cadre/base/errors.h"
#include "strategies/cluster/step_server.h"
#include "strategies/ps/ps_client.h"
#include "strategies/ps/ps_server.h"
#include "strategies/ps/unit_ledger.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"

namespace cadre {
namespace {

// How a FakeWorker ends after `die_after` steps.
struct FakeEnd {
  ErrorCode code = ErrorCode::kUnavailable;  // its service's answer: a lost worker's
  // Set: its input ends, which it tells ps 0 (as pipeline `pipeline`) before it answers.
  ps::PsClient* ps0 = nullptr;
  int pipeline = 0;
};

// A worker: its step service and a loop that takes each step of the unit it is given on
// `ledger`, until told to stop or to die (or its input to end) after `die_after` steps.
class FakeWorker {
 public:
  FakeWorker(ps::UnitLedger& ledger, std::atomic<int64_t>& global_step, int die_after = -1,
             int step_ms = 2, FakeEnd end = {})
      : ledger_(ledger),
        global_step_(global_step),
        die_after_(die_after),
        step_ms_(step_ms),
        end_(end) {
    StepServerOptions options;
    options.security = testing::test_security();
    server_ = StepServer::start("127.0.0.1:0", options);
    loop_ = std::thread([this] { run(); });
  }
  ~FakeWorker() {
    server_->stop("test over", ErrorCode::kUnavailable, false);
    loop_.join();
  }
  std::string address() const { return server_->address(); }

 private:
  void run() {
    int steps = 0;
    while (std::optional<ps::WorkUnit> unit = server_->next_step(nullptr, nullptr)) {
      if (steps++ == die_after_) {
        // Mid-unit: the client's call fails as a lost worker's does, or as one whose input
        // ended.
        if (end_.ps0) {
          ps::InputPositionsRequest ended;
          ended.set_pipeline(end_.pipeline);
          ended.set_ended(true);
          end_.ps0->input_positions(ended);
        }
        server_->stop("its end", end_.code, false);
        return;
      }
      int64_t applied = ledger_.reserve(unit->generation, unit->id, unit->steps);
      if (applied > 0) ++global_step_;
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms_));
      server_->step_done(*unit, {unit->id, applied, applied == 0, global_step_.load()});
    }
  }

  ps::UnitLedger& ledger_;
  std::atomic<int64_t>& global_step_;
  int die_after_;
  int step_ms_;
  FakeEnd end_;
  std::unique_ptr<StepServer> server_;
  std::thread loop_;
};

class UnitDispatcherTest : public ::testing::Test {
 protected:
  UnitDispatcherTest() {
    ps::ServerOptions options;
    options.security = testing::test_security();
    ps_ = ps::ParameterServer::start("127.0.0.1:0", options);
    ps::ClientOptions client;
    client.security = testing::test_security();
    ps0_ = std::make_unique<ps::PsClient>(0, ps_->address(), client);
    ledger_.begin(1);
  }
  ClusterConfig cluster(const std::vector<std::string>& workers) {
    ClusterConfig c;
    for (size_t i = 0; i < workers.size(); ++i) c.jobs["worker"][static_cast<int>(i)] = workers[i];
    c.jobs["client"][0] = "127.0.0.1:1";
    c.jobs["ps"][0] = ps_->address();
    c.task = {"client", 0};
    c.security = testing::test_security();
    return c;
  }

  std::unique_ptr<ps::ParameterServer> ps_;
  std::unique_ptr<ps::PsClient> ps0_;
  ps::UnitLedger ledger_;
  std::atomic<int64_t> global_step_{0};
};

TEST_F(UnitDispatcherTest, ALostWorkersUnitRunsElsewhereAndEveryStepCountsOnce) {
  FakeWorker steady(ledger_, global_step_);
  FakeWorker dying(ledger_, global_step_, /*die_after=*/13);  // in its second unit
  DispatchOptions options;
  options.retry_seconds = 0.05;
  UnitDispatcher dispatcher(cluster({steady.address(), dying.address()}), *ps0_, 1, options);
  DispatchReport report = dispatcher.run(1, 95, 10, [](const DispatchReport&) {});
  EXPECT_EQ(report.units, 10);
  EXPECT_GE(report.lost, 1);
  EXPECT_EQ(global_step_.load(), 95);
  std::vector<int64_t> units;
  for (int64_t u = 1; u <= 10; ++u) units.push_back(u);
  std::vector<int64_t> applied = ledger_.applied(units);
  for (int64_t u = 1; u <= 9; ++u) EXPECT_EQ(applied[static_cast<size_t>(u - 1)], 10) << u;
  EXPECT_EQ(applied[9], 5);  // the last unit is shorter
}

// Workers whose inputs end after 7 and 23 steps: the first one's unit goes to the other, and
// once both have ended the run ends short of its steps, each step taken counted once. The
// first answers OUT_OF_RANGE; the second's answer is lost (it is gone), and ps 0, which it
// told, holds its input ended.
TEST_F(UnitDispatcherTest, TheRunEndsOnceEveryWorkersInputHasEnded) {
  FakeWorker first(ledger_, global_step_, 7, 2, {ErrorCode::kOutOfRange});
  FakeWorker second(ledger_, global_step_, 23, 2, {ErrorCode::kUnavailable, ps0_.get(), 2});
  DispatchOptions options;
  options.retry_seconds = 0.05;
  UnitDispatcher dispatcher(cluster({first.address(), second.address()}), *ps0_, 1, options);
  DispatchReport report = dispatcher.run(1, 1000, 10, [](const DispatchReport&) {});
  EXPECT_TRUE(report.input_ended);
  EXPECT_FALSE(report.stopped);
  EXPECT_EQ(report.lost, 0);
  EXPECT_EQ(global_step_.load(), 30);
  EXPECT_EQ(report.units, 3);  // 30 steps: units 1-3, whichever worker took their steps
}

TEST_F(UnitDispatcherTest, WorkersThatNeverAnswerEndTheRunAfterTheTimeout) {
  DispatchOptions options;
  options.retry_seconds = 0.05;
  options.all_lost_timeout_seconds = 1;
  std::string nobody = "127.0.0.1:" + std::to_string(testing::free_port());
  UnitDispatcher dispatcher(cluster({nobody}), *ps0_, 1, options);
  auto start = std::chrono::steady_clock::now();
  try {
    dispatcher.run(1, 10, 10, [](const DispatchReport&) {});
    FAIL() << "expected UnavailableError";
  } catch (const UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("every worker has been lost"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// A planned stop of the client: from the tick that stops it, no unit is dispatched; the
// units running finish, so that every unit is either complete or never started and the
// global step is the sum of complete units.
TEST_F(UnitDispatcherTest, AStopLetsTheUnitsRunningFinishAndDispatchesNoMore) {
  FakeWorker a(ledger_, global_step_), b(ledger_, global_step_);
  UnitDispatcher dispatcher(cluster({a.address(), b.address()}), *ps0_, 1);
  DispatchReport report = dispatcher.run(1, 1000, 10, [&](const DispatchReport&) {
    if (global_step_.load() >= 50) dispatcher.stop(10);
  });
  EXPECT_TRUE(report.stopped);
  EXPECT_EQ(report.abandoned, 0);
  EXPECT_LT(report.units, 100);
  EXPECT_EQ(global_step_.load(), report.units * 10);
  std::vector<int64_t> units;
  for (int64_t u = 1; u <= 100; ++u) units.push_back(u);
  for (int64_t applied : ledger_.applied(units)) EXPECT_TRUE(applied == 0 || applied == 10);
}

// A unit that outlasts the drain is abandoned: run() returns soon after, the worker stops
// the unit after its step in flight, and serves the next client's units.
TEST_F(UnitDispatcherTest, AStopAbandonsUnitsThatOutlastTheDrain) {
  FakeWorker slow(ledger_, global_step_, /*die_after=*/-1, /*step_ms=*/100);
  UnitDispatcher dispatcher(cluster({slow.address()}), *ps0_, 1);
  auto start = std::chrono::steady_clock::now();
  DispatchReport report = dispatcher.run(1, 100, 100, [&](const DispatchReport&) {
    if (global_step_.load() >= 2) dispatcher.stop(0.3);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(report.stopped);
  EXPECT_EQ(report.abandoned, 1);
  EXPECT_EQ(report.units, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int64_t stopped_at = global_step_.load();
  EXPECT_LT(stopped_at, 20);
  ledger_.begin(2);
  UnitDispatcher next(cluster({slow.address()}), *ps0_, 2);
  DispatchReport rest = next.run(1, 3, 10, [](const DispatchReport&) {});
  EXPECT_EQ(rest.units, 1);
  EXPECT_EQ(global_step_.load(), stopped_at + 3);
}

}  // namespace
}  // namespace cadre
