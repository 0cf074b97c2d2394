// The batching policy: a batch waits for requests on their way (Arrivals) and for nothing
// else, at most batch_timeout_micros; admission refuses examples past the bound at once;
// forward passes, batched or not, run with the threads they are given.
#include "serving/batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>

#include "cadre/base/errors.h"
#include "cadre/runtime/threading.h"
#include "tests/serving/serving_test_support.h"
#include "tests/support/temp_dir.h"

namespace cadre::serving_internal {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class BatcherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    std::string path = testing::export_version(dir_->file("model"), dir_->file("export"), 10, 1);
    version_ = new std::shared_ptr<LoadedVersion>(
        std::make_shared<LoadedVersion>(1, path, testing::serving_model_fn, Params{}));
  }
  static void TearDownTestSuite() {
    delete version_;
    delete dir_;
  }

  static std::map<std::string, Tensor> run(Batcher& batcher, Batcher::Arrival arrival,
                                           int64_t rows) {
    return batcher.run(std::move(arrival), *version_, "serving_default",
                       io::Features{{"x", testing::serving_examples(rows)}});
  }

  static testing::TempDir* dir_;
  static std::shared_ptr<LoadedVersion>* version_;
};

testing::TempDir* BatcherTest::dir_ = nullptr;
std::shared_ptr<LoadedVersion>* BatcherTest::version_ = nullptr;

BatchingOptions long_timeout() {
  BatchingOptions options;
  options.max_batch_size = 64;
  options.batch_timeout_micros = 10'000'000;
  return options;
}

TEST_F(BatcherTest, ALoneRequestRunsWithoutWaitingForTheTimeout) {
  Batcher batcher(long_timeout(), 100, 1);
  auto start = Clock::now();
  auto outputs = run(batcher, Batcher::Arrival(batcher), 2);
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_EQ(outputs.at("probabilities").dim(0), 2);
}

TEST_F(BatcherTest, ABatchWaitsForARequestOnItsWayAndRunsItWithTheFirst) {
  Batcher batcher(long_timeout(), 100, 1);
  Batcher::Arrival second(batcher);  // received, not yet decoded
  auto first =
      std::async(std::launch::async, [&] { return run(batcher, Batcher::Arrival(batcher), 1); });
  EXPECT_EQ(first.wait_for(milliseconds(300)), std::future_status::timeout);
  auto outputs = run(batcher, std::move(second), 3);
  ASSERT_EQ(first.wait_for(milliseconds(5000)), std::future_status::ready);
  EXPECT_EQ(first.get().at("probabilities").dim(0), 1);
  EXPECT_EQ(outputs.at("probabilities").dim(0), 3);
}

TEST_F(BatcherTest, ARequestThatFailsOnItsWayStopsTheWait) {
  Batcher batcher(long_timeout(), 100, 1);
  auto failed = std::make_unique<Batcher::Arrival>(batcher);
  auto first =
      std::async(std::launch::async, [&] { return run(batcher, Batcher::Arrival(batcher), 1); });
  EXPECT_EQ(first.wait_for(milliseconds(300)), std::future_status::timeout);
  failed.reset();
  EXPECT_EQ(first.wait_for(milliseconds(5000)), std::future_status::ready);
}

TEST_F(BatcherTest, ExamplesPastTheBoundAreRefusedAtOnce) {
  Batcher batcher(long_timeout(), 4, 1);
  auto held = std::make_unique<Batcher::Arrival>(batcher);  // keeps the first batch waiting
  auto first =
      std::async(std::launch::async, [&] { return run(batcher, Batcher::Arrival(batcher), 3); });
  EXPECT_EQ(first.wait_for(milliseconds(300)), std::future_status::timeout);
  auto start = Clock::now();
  EXPECT_THROW(run(batcher, Batcher::Arrival(batcher), 3), ResourceExhaustedError);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  held.reset();
  EXPECT_EQ(first.get().at("probabilities").dim(0), 3);
  EXPECT_EQ(run(batcher, Batcher::Arrival(batcher), 3).at("probabilities").dim(0), 3);
}

std::atomic<int> budget_seen{0};

// The test model, noting the threads its forward pass may use.
EstimatorSpec budget_noting_model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                                     const Params& params) {
  if (mode == ModeKeys::kPredict) budget_seen = current_thread_budget();
  return testing::serving_model_fn(features, labels, mode, params);
}

TEST_F(BatcherTest, AForwardPassRunsWithTheThreadsItIsGiven) {
  int budget = intra_op_threads_budget();
  set_intra_op_threads(2);
  auto version =
      std::make_shared<LoadedVersion>(1, (*version_)->path(), budget_noting_model_fn, Params{});
  for (bool enabled : {true, false}) {
    for (int threads : {1, 0}) {
      BatchingOptions options;
      options.enabled = enabled;
      Batcher batcher(options, 100, threads);
      budget_seen = 0;
      batcher.run(Batcher::Arrival(batcher), version, "serving_default",
                  io::Features{{"x", testing::serving_examples(2)}});
      EXPECT_EQ(budget_seen, threads == 1 ? 1 : 2) << "batching " << enabled;
    }
  }
  set_intra_op_threads(budget);
}

}  // namespace
}  // namespace cadre::serving_internal
