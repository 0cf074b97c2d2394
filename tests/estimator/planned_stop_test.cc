// Planned stops in one process: a SIGTERM that arrives during a step ends train() after that
// step with a checkpoint of it and PlannedStopError, and the run resumed from it gives the
// losses of an uninterrupted run; a notice file does the same; a second signal kills at
// once; an evaluation is abandoned; a program that does not catch PlannedStopError still
// exits 143 with its message, not an abort.
#include "cadre/estimator/planned_stop.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "cadre/checkpoint/reader.h"
#include "tests/estimator/test_model.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

// Raises `signal` in this process (as a platform would send it) during step `at`, once;
// records every step's loss.
class SignalAtStep : public Hook {
 public:
  SignalAtStep(int64_t at, int signal, std::map<int64_t, double>* losses)
      : at_(at), signal_(signal), losses_(losses) {}
  void after_run(Run& run, const StepResult& result, RunContext& context) override {
    (*losses_)[result.global_step] = result.loss;
    if (result.global_step == at_) ::raise(signal_);
  }

 private:
  int64_t at_;
  int signal_;
  std::map<int64_t, double>* losses_;
};

// Writes the notice file after step 10.
class WriteNoticeAt : public Hook {
 public:
  explicit WriteNoticeAt(std::string file) : file_(std::move(file)) {}
  void after_run(cadre::Run&, const StepResult& result, RunContext&) override {
    if (result.global_step == 10) std::ofstream(file_) << "preempted\n";
  }

 private:
  std::string file_;
};

// Two SIGTERMs during step 5, as an impatient operator sends them.
class SignalTwice : public Hook {
 public:
  void after_run(cadre::Run&, const StepResult& result, RunContext&) override {
    if (result.global_step == 5) {
      ::raise(SIGTERM);
      ::raise(SIGTERM);
    }
  }
};

// Trains with `hook` to step 50 and lets whatever train() throws leave (a death test's body).
void train_with(const std::string& dir, std::shared_ptr<Hook> hook) {
  Estimator estimator(testing::classifier_fn, testing::test_config(dir, 1000));
  TrainArgs args;
  args.max_steps = 50;
  args.hooks.push_back(std::move(hook));
  estimator.train(testing::train_input, args);
}

// As train_with, for an exception that nothing catches: it ends in std::terminate, as one
// that leaves main does.
void train_uncaught(const std::string& dir, std::shared_ptr<Hook> hook) noexcept {
  train_with(dir, std::move(hook));
}

std::shared_ptr<Hook> sigterm_at(int64_t step) {
  static std::map<int64_t, double> losses;
  return std::make_shared<SignalAtStep>(step, SIGTERM, &losses);
}

class PlannedStopTest : public testing::TempDirTest {
 protected:
  std::map<int64_t, double> train(const std::string& dir, int64_t max_steps,
                                  std::optional<int64_t> signal_at, RunConfig config) {
    std::map<int64_t, double> losses;
    TrainArgs args;
    args.max_steps = max_steps;
    if (signal_at)
      args.hooks.push_back(std::make_shared<SignalAtStep>(*signal_at, SIGTERM, &losses));
    else
      args.hooks.push_back(std::make_shared<SignalAtStep>(-1, 0, &losses));
    Estimator estimator(testing::classifier_fn, config);
    estimator.train(testing::train_input, args);
    return losses;
  }
};

// The signal is raised in a process of its own (a notice, once had, stays for the process's
// life); this one resumes from the checkpoint it left, as a restarted program would.
TEST_F(PlannedStopTest, ASigtermEndsTrainingWithACheckpointOfTheStepAndLosesNoStep) {
  RunConfig config = testing::test_config(path("reference"), /*save_steps=*/1000);
  std::map<int64_t, double> reference = train(path("reference"), 60, std::nullopt, config);
  ASSERT_EQ(reference.size(), 60u);

  config.model_dir = path("stopped");
  EXPECT_EXIT(
      {
        try {
          train(path("stopped"), 60, 23, config);
        } catch (const PlannedStopError& stop) {
          // The step in flight finished and none after it ran; its checkpoint is there.
          bool right =
              stop.step() == 23 && stop.exit_code() == 143 &&
              std::string(stop.what()).find("a planned stop (SIGTERM) at step 23") !=
                  std::string::npos &&
              checkpoint::CheckpointReader::open(path("stopped/model.ckpt-23.h5"))->global_step() ==
                  23;
          std::fprintf(stderr, "%s\n", stop.what());
          std::_Exit(right ? 0 : 1);
        }
        std::_Exit(2);
      },
      ::testing::ExitedWithCode(0), "a planned stop \\(SIGTERM\\) at step 23");

  std::map<int64_t, double> resumed = train(path("stopped"), 60, std::nullopt, config);
  ASSERT_EQ(resumed.size(), 60u - 23u);
  EXPECT_EQ(resumed.begin()->first, 24);
  for (const auto& [step, loss] : resumed) EXPECT_EQ(loss, reference.at(step)) << "step " << step;
}

// The notice file of a platform's preemption watcher stops a run as a signal does.
TEST_F(PlannedStopTest, ANoticeFileStopsTrainingWithACheckpoint) {
  RunConfig config = testing::test_config(path("m"), /*save_steps=*/1000);
  config.planned_stop.signals = {};
  config.planned_stop.notice_file = path("preempted");
  Estimator estimator(testing::classifier_fn, config);
  TrainArgs args;
  args.max_steps = 100000;  // the file is looked for every half second
  args.hooks.push_back(std::make_shared<WriteNoticeAt>(path("preempted")));
  try {
    estimator.train(testing::train_input, args);
    FAIL() << "train() ran to max_steps";
  } catch (const PlannedStopError& stop) {
    EXPECT_GT(stop.step(), 10);
    EXPECT_NE(std::string(stop.what()).find("the notice file " + path("preempted")),
              std::string::npos)
        << stop.what();
    EXPECT_TRUE(
        std::filesystem::exists(path("m/model.ckpt-" + std::to_string(stop.step()) + ".h5")));
  }
}

// In a process of its own: a program that lets PlannedStopError leave main exits 143 with
// the message; a second SIGTERM kills at once (the signal's default action).
TEST_F(PlannedStopTest, AnUncaughtPlannedStopExits143AndASecondSignalKills) {
  EXPECT_EXIT(train_uncaught(path("uncaught"), sigterm_at(5)), ::testing::ExitedWithCode(143),
              "a planned stop \\(SIGTERM\\) at step 5");
  EXPECT_EXIT(train_with(path("twice"), std::make_shared<SignalTwice>()),
              ::testing::KilledBySignal(SIGTERM), "");
}

// An evaluation that a notice reaches is abandoned: PlannedStopError, and no eval summary.
TEST_F(PlannedStopTest, AnEvaluationIsAbandonedAtANotice) {
  RunConfig config = testing::test_config(path("e"), 1000);
  {
    Estimator estimator(testing::classifier_fn, config);
    TrainArgs args;
    args.max_steps = 10;
    estimator.train(testing::train_input, args);
  }
  config.planned_stop.signals = {};
  config.planned_stop.notice_file = path("notice");
  std::ofstream(path("notice")) << "now\n";
  Estimator estimator(testing::classifier_fn, config);
  EXPECT_THROW(estimator.evaluate(testing::eval_input), PlannedStopError);
  EXPECT_FALSE(std::filesystem::exists(path("e/eval")));
}

}  // namespace
}  // namespace cadre
