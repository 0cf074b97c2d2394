// Coordinator mode's step service in one process: a worker's server and the client's stub,
// with the training loop's side played by a thread. A unit's call returns when ps 0's answers
// say the unit is complete; a second unit while one runs is refused; a call the client
// abandons frees the worker; the worker's own training error reaches the client as a
// WorkerTrainingError with its code; Finish ends the loop's wait.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "cadre/base/errors.h"
#include "strategies/cluster/step_client.h"
#include "strategies/cluster/step_server.h"
#include "tests/support/job_secret.h"

namespace cadre {
namespace {

class StepServiceTest : public ::testing::Test {
 protected:
  StepServiceTest() {
    StepServerOptions options;
    options.security = testing::test_security();
    server_ = StepServer::start("127.0.0.1:0", options);
    client_ = std::make_unique<StepClient>(TaskId{"worker", 0}, server_->address(),
                                           testing::test_security());
  }
  // The training loop: takes `steps` steps of whatever unit comes, ps 0 counting each.
  std::future<void> loop(int steps, int64_t first_applied = 1) {
    return std::async(std::launch::async, [this, steps, first_applied] {
      for (int i = 0; i < steps; ++i) {
        std::optional<ps::WorkUnit> unit = server_->next_step(nullptr, nullptr);
        ASSERT_TRUE(unit.has_value());
        server_->step_done(*unit, {unit->id, first_applied + i, false, 100 + i});
      }
    });
  }

  std::unique_ptr<StepServer> server_;
  std::unique_ptr<StepClient> client_;
};

TEST_F(StepServiceTest, AUnitReturnsOnceComplete) {
  std::future<void> steps = loop(3);
  steps::RunUnitResponse done = client_->run_unit({1, 7, 3}, 10);
  steps.get();
  EXPECT_EQ(done.applied(), 3);
  EXPECT_FALSE(done.closed());
  EXPECT_EQ(done.steps_applied(), 3);
  EXPECT_EQ(done.global_step(), 102);
  // A unit run again elsewhere after its worker was lost: 2 of its 3 steps were applied
  // already, so one step completes it here.
  steps = loop(1, /*first_applied=*/3);
  done = client_->run_unit({1, 8, 3}, 10);
  steps.get();
  EXPECT_EQ(done.steps_applied(), 1);
}

TEST_F(StepServiceTest, OneUnitAtATimeAndAnAbandonedCallFreesTheWorker) {
  auto first = std::async(std::launch::async, [&] { return client_->run_unit({1, 1, 5}, 1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_THROW(client_->run_unit({1, 2, 5}, 5), FailedPreconditionError);
  EXPECT_THROW(first.get(), DeadlineExceededError);  // the client gives up on unit 1
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  std::future<void> steps = loop(2);
  EXPECT_EQ(client_->run_unit({1, 2, 2}, 10).applied(), 2);
  steps.get();
}

TEST_F(StepServiceTest, TheWorkersTrainingErrorReachesTheClientWithItsCode) {
  auto running = std::async(std::launch::async, [&] { return client_->run_unit({1, 1, 5}, 10); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  server_->stop("its training failed: model_fn: bad shape", ErrorCode::kInvalidArgument,
                /*training_failed=*/true);
  try {
    running.get();
    FAIL() << "expected WorkerTrainingError";
  } catch (const WorkerTrainingError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("model_fn: bad shape"), std::string::npos) << e.what();
  }
}

TEST_F(StepServiceTest, FinishEndsTheLoopsWait) {
  auto waiting =
      std::async(std::launch::async, [&] { return server_->next_step(nullptr, nullptr); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  client_->finish(5);
  EXPECT_FALSE(waiting.get().has_value());
  EXPECT_THROW(client_->run_unit({1, 1, 1}, 5), UnavailableError);
  // A marker seen while waiting ends it too.
  StepServerOptions options;
  options.security = testing::test_security();
  auto other = StepServer::start("127.0.0.1:0", options);
  EXPECT_FALSE(other->next_step([] { return true; }, nullptr).has_value());
}

// A planned stop of the worker while it waits for a unit ends the wait (the training loop
// stops) without ending training: the client's next unit is still served.
TEST_F(StepServiceTest, AnInterruptedWaitEndsWithoutEndingTraining) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(server_->next_step(nullptr, [] { return true; }).has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  std::future<void> steps = loop(2);
  steps::RunUnitResponse done = client_->run_unit({1, 3, 2}, 10);
  steps.get();
  EXPECT_EQ(done.steps_applied(), 2);
}

}  // namespace
}  // namespace cadre
