// The hooks: call order, each built-in hook, checkpoint listeners, and the controls driven
// by the evaluation history (early stopping, reducing the learning rate on a plateau).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/early_stopping.h"
#include "cadre/estimator/exporters.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "cadre/io/event_file.h"
#include "cadre/io/summary_writer.h"
#include "cadre/ops/math.h"
#include "estimator/progress_text.h"
#include "tests/estimator/test_model.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::classifier_fn;
using testing::eval_input;
using testing::test_config;
using testing::train_input;

class HooksTest : public cadre::testing::TempDirTest {
 protected:
  std::string model_dir() const { return path("model"); }
  int64_t latest_step() const {
    return checkpoint::CheckpointReader::open(*checkpoint::latest_checkpoint(model_dir()))
        ->global_step();
  }
  // Scalars of `tag` in every event file of `dir`, by step.
  std::map<int64_t, double> scalars(const std::string& dir, const std::string& tag) const {
    std::map<int64_t, double> values;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.path().filename().string().starts_with("events.out.tfevents.")) continue;
      for (const io::Event& event : io::read_event_file(entry.path().string())) {
        for (const io::SummaryValue& value : event.values) {
          if (value.tag == tag && value.scalar) values[event.step] = *value.scalar;
        }
      }
    }
    return values;
  }
};

class RecordingHook : public Hook {
 public:
  void begin(Run& run) override { calls.push_back("begin"); }
  void after_create(Run& run) override {
    calls.push_back("after_create@" + std::to_string(run.global_step()));
  }
  void before_run(Run& run, RunContext& context) override {
    calls.push_back("before_run@" + std::to_string(run.global_step()));
    if (stop_before == run.global_step()) context.request_stop();
  }
  void after_run(Run& run, const StepResult& result, RunContext& context) override {
    calls.push_back("after_run@" + std::to_string(result.global_step));
    if (stop_at == result.global_step) context.request_stop();
  }
  void end(Run& run) override { calls.push_back("end@" + std::to_string(run.global_step())); }
  std::vector<std::string> calls;
  int64_t stop_at = -1;
  int64_t stop_before = -1;  // in before_run, at this global step
};

TEST_F(HooksTest, HooksAreCalledInOrderAndMayStopTheRun) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  auto hook = std::make_shared<RecordingHook>();
  hook->stop_at = 2;
  estimator.train(train_input, {.max_steps = 10, .hooks = {hook}});
  EXPECT_EQ(hook->calls,
            (std::vector<std::string>{"begin", "after_create@0", "before_run@0", "after_run@1",
                                      "before_run@1", "after_run@2", "end@2"}));
  EXPECT_EQ(latest_step(), 2);  // the end-of-training checkpoint
  // Evaluation and prediction call the same methods.
  auto eval_hook = std::make_shared<RecordingHook>();
  estimator.evaluate(eval_input, {.steps = 2, .hooks = {eval_hook}});
  EXPECT_EQ(eval_hook->calls,
            (std::vector<std::string>{"begin", "after_create@2", "before_run@2", "after_run@2",
                                      "before_run@2", "after_run@2", "end@2"}));
}

// A stop asked for in before_run ends a training run before its step (how a coordinator-mode
// worker leaves its loop when the client says training is over).
TEST_F(HooksTest, AStopRequestedBeforeAStepEndsTrainingBeforeIt) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  auto hook = std::make_shared<RecordingHook>();
  hook->stop_before = 1;
  EXPECT_EQ(estimator.train(train_input, {.max_steps = 10, .hooks = {hook}}), 1);
  EXPECT_EQ(hook->calls, (std::vector<std::string>{"begin", "after_create@0", "before_run@0",
                                                   "after_run@1", "before_run@1", "end@1"}));
  EXPECT_EQ(latest_step(), 1);
}

TEST_F(HooksTest, ProgressLineRedrawsOneLineInPlaceAndEndsIt) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  Estimator estimator(classifier_fn, test_config(model_dir()));
  estimator.train(train_input,
                  {.max_steps = 30, .hooks = {std::make_shared<ProgressLineHook>(out, 0.0)}});
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += static_cast<char>(c);
  std::fclose(out);
  // Each redraw returns to the start of the line and erases it; one newline at the end.
  EXPECT_NE(text.find("\r\033[Kstep 30/30  loss "), std::string::npos) << text;
  EXPECT_NE(text.find(" steps/s  ETA 0s"), std::string::npos) << text;
  EXPECT_GT(std::count(text.begin(), text.end(), '\r'), 20);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  EXPECT_EQ(text.back(), '\n');
}

// The time left reads at a glance: "ETA 25s" as the contract's line has it, then minutes,
// hours, days and years; none for a max_steps beyond a century (not "26526104660046240s").
TEST_F(HooksTest, TheEtaReadsAtAGlanceAndIsLeftOutBeyondACentury) {
  using estimator_internal::eta_text;
  EXPECT_EQ(eta_text(0.4), "0s");
  EXPECT_EQ(eta_text(25.9), "25s");
  EXPECT_EQ(eta_text(725), "12m05s");
  EXPECT_EQ(eta_text(3 * 3600 + 7 * 60 + 59), "3h07m");
  EXPECT_EQ(eta_text(4.2 * 86400), "4.2d");
  EXPECT_EQ(eta_text(3.1 * 365.25 * 86400), "3.1y");
  EXPECT_EQ(eta_text(99 * 365.25 * 86400), "99.0y");
  EXPECT_EQ(eta_text(2.6526104660046240e16), std::nullopt);
  EXPECT_EQ(eta_text(INFINITY), std::nullopt);
  EXPECT_EQ(eta_text(NAN), std::nullopt);

  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  Estimator estimator(classifier_fn, test_config(model_dir()));
  estimator.train(train_input, {.max_steps = int64_t{1} << 62,
                                .hooks = {std::make_shared<ProgressLineHook>(out, 0.0),
                                          StopAtStepHook::after_steps(30)}});
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += static_cast<char>(c);
  std::fclose(out);
  EXPECT_NE(text.find("step 30/4611686018427387904  loss "), std::string::npos) << text;
  EXPECT_EQ(text.find("ETA"), std::string::npos) << text;
}

TEST_F(HooksTest, StopAtStepHookStopsAtAStepOrAfterSomeSteps) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  estimator.train(train_input, {.hooks = {StopAtStepHook::at_step(7)}});
  EXPECT_EQ(latest_step(), 7);
  estimator.train(train_input, {.hooks = {StopAtStepHook::after_steps(5)}});
  EXPECT_EQ(latest_step(), 12);
  EXPECT_THROW(StopAtStepHook::at_step(-1), InvalidArgumentError);
}

TEST_F(HooksTest, LoggingTensorHookLogsTheNamedValues) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  auto hook = std::make_shared<LoggingTensorHook>(
      std::vector<std::string>{"global_step", "loss", "logits"}, 2);
  estimator.train(train_input, {.max_steps = 4, .hooks = {hook}});
  EXPECT_NE(hook->last_line().find("global_step = 3"), std::string::npos) << hook->last_line();
  EXPECT_NE(hook->last_line().find("loss = "), std::string::npos);
  EXPECT_NE(hook->last_line().find("logits = "), std::string::npos);
  auto unknown = std::make_shared<LoggingTensorHook>(std::vector<std::string>{"nope"}, 1);
  try {
    estimator.train(train_input, {.max_steps = 6, .hooks = {unknown}});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("available: loss, global_step, logits"), std::string::npos)
        << e.what();
  }
}

TEST_F(HooksTest, StepCounterHookMeasuresRates) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  auto hook = std::make_shared<StepCounterHook>(5);
  estimator.train(train_input, {.max_steps = 20, .hooks = {hook}});
  EXPECT_GT(hook->steps_per_sec(), 0);
  EXPECT_NEAR(hook->examples_per_sec() / hook->steps_per_sec(), 16, 1e-6);  // batch 16
}

class RecordingListener : public CheckpointSaverListener {
 public:
  void begin() override { events.push_back("begin"); }
  void before_save(int64_t step) override {
    events.push_back("before_save@" + std::to_string(step));
  }
  bool after_save(int64_t step, const std::string& path) override {
    events.push_back("after_save@" + std::to_string(step));
    EXPECT_TRUE(std::filesystem::exists(path));
    return step == stop_after;
  }
  void end(int64_t step) override { events.push_back("end@" + std::to_string(step)); }
  std::vector<std::string> events;
  int64_t stop_after = -1;
};

TEST_F(HooksTest, CheckpointSaverHookSavesPeriodicallyAndAtTheEndAndTellsListeners) {
  Estimator estimator(classifier_fn, test_config(model_dir(), /*save_steps=*/10));
  auto listener = std::make_shared<RecordingListener>();
  estimator.train(train_input, {.max_steps = 25, .saving_listeners = {listener}});
  EXPECT_EQ(listener->events, (std::vector<std::string>{
                                  "begin", "before_save@10", "after_save@10", "before_save@20",
                                  "after_save@20", "before_save@25", "after_save@25", "end@25"}));
  // A listener may stop training.
  auto stopper = std::make_shared<RecordingListener>();
  stopper->stop_after = 35;  // saves count from the resumed step 25
  estimator.train(train_input, {.max_steps = 100, .saving_listeners = {stopper}});
  EXPECT_EQ(latest_step(), 35);
}

TEST_F(HooksTest, SummarySaverHookWritesTheSpecsScalars) {
  auto fn = [](const Features& f, const Tensor& labels, ModeKeys mode, const Params& p) {
    EstimatorSpec spec = classifier_fn(f, labels, mode, p);
    return spec.with_scalar_summaries({{"twice_loss", spec.loss * 2.0}});
  };
  RunConfig config = test_config(model_dir());
  config.save_summary_steps = 0;  // only the hook below writes
  Estimator estimator(fn, config);
  estimator.train(train_input, {.max_steps = 9, .hooks = {std::make_shared<SummarySaverHook>(4)}});
  auto loss = scalars(model_dir(), "loss");
  auto twice = scalars(model_dir(), "twice_loss");
  EXPECT_EQ(loss.size(), 3u);  // steps 1, 5, 9
  for (const auto& [step, value] : loss) EXPECT_NEAR(twice.at(step), 2 * value, 1e-5);
}

TEST_F(HooksTest, NanLossRaisesAndNoCheckpointOfTheDivergedStateIsWritten) {
  int calls = 0;
  auto diverging = [&calls](const Features& f, const Tensor& labels, ModeKeys mode,
                            const Params& p) {
    EstimatorSpec spec = classifier_fn(f, labels, mode, p);
    if (++calls >= 15) spec.loss = spec.loss * std::nan("");
    return spec;
  };
  Estimator estimator(diverging, test_config(model_dir(), /*save_steps=*/10));
  EXPECT_THROW(estimator.train(train_input, {.max_steps = 100}), NanLossDuringTrainingError);
  EXPECT_EQ(latest_step(), 10);
  for (const auto& entry : std::filesystem::directory_iterator(model_dir())) {
    EXPECT_EQ(entry.path().filename().string().find("model.ckpt-15"), std::string::npos);
  }
}

// Writes an evaluation history as an evaluator would.
void write_history(const std::string& dir, const std::vector<double>& losses) {
  io::SummaryWriter writer(dir);
  for (size_t i = 0; i < losses.size(); ++i) {
    writer.scalar("loss", losses[i], static_cast<int64_t>(10 * (i + 1)));
  }
}

TEST_F(HooksTest, EarlyStoppingStopsWhenTheMetricStopsImproving) {
  PlateauOptions options;
  options.eval_dir = model_dir() + "/eval";
  options.patience = 3;
  options.check_every_steps = 1;
  write_history(options.eval_dir, {1.0, 0.8, 0.7});  // improving
  Estimator estimator(classifier_fn, test_config(model_dir()));
  auto improving = std::make_shared<EarlyStoppingHook>(options);
  estimator.train(train_input, {.max_steps = 5, .hooks = {improving}});
  EXPECT_FALSE(improving->stopped());
  EXPECT_EQ(latest_step(), 5);

  write_history(options.eval_dir, {0.75, 0.72, 0.71});  // steps 10..30 again: no new best
  EXPECT_EQ(read_eval_history(options.eval_dir, "loss").back().second, 0.71f);
  auto stalled = std::make_shared<EarlyStoppingHook>(options);
  estimator.train(train_input, {.max_steps = 50, .hooks = {stalled}});
  EXPECT_FALSE(stalled->stopped()) << "0.71 < 0.8 is still an improvement over steps 10-20";

  write_history(options.eval_dir, {0.75, 0.72, 0.71, 0.9, 0.95, 0.72});
  auto plateau = std::make_shared<EarlyStoppingHook>(options);
  estimator.train(train_input, {.max_steps = 100, .hooks = {plateau}});
  EXPECT_TRUE(plateau->stopped());
  EXPECT_EQ(latest_step(), 51);
}

TEST_F(HooksTest, ReduceLrOnPlateauScalesTheLearningRate) {
  PlateauOptions options;
  options.eval_dir = model_dir() + "/eval";
  options.patience = 2;
  options.check_every_steps = 1;
  auto plateau = std::make_shared<ReduceLrOnPlateau>(options, /*factor=*/0.5, /*min=*/0.001);
  auto fn = [plateau](const Features& f, const Tensor& labels, ModeKeys mode, const Params& p) {
    EstimatorSpec spec = classifier_fn(f, labels, mode, p);
    if (mode == ModeKeys::kTrain)
      spec.train_op.optimizer = nn::optimizers::sgd(plateau->scaled(0.01));
    return spec;
  };
  RunConfig config = test_config(model_dir());
  config.save_summary_steps = 1;
  Estimator estimator(fn, config);
  estimator.train(train_input, {.max_steps = 2, .hooks = {plateau}});
  EXPECT_EQ(plateau->multiplier(), 1.0);
  write_history(options.eval_dir, {1.0, 1.1, 1.2, 1.3, 1.4});  // patience runs out twice
  estimator.train(train_input, {.max_steps = 4, .hooks = {plateau}});
  EXPECT_EQ(plateau->reductions(), 2);
  EXPECT_EQ(plateau->multiplier(), 0.25);
  auto lr = scalars(model_dir(), "learning_rate");
  EXPECT_NEAR(lr.at(2), 0.01, 1e-9);
  EXPECT_NEAR(lr.at(4), 0.0025, 1e-9);
  write_history(options.eval_dir, {1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0});
  estimator.train(train_input, {.max_steps = 5, .hooks = {plateau}});
  EXPECT_NEAR(scalars(model_dir(), "learning_rate").at(5), 0.001, 1e-9);  // the floor
}

TEST_F(HooksTest, TrainAndEvaluateEvaluatesEachCheckpointAndExports) {
  Estimator estimator(classifier_fn, test_config(model_dir(), /*save_steps=*/20));
  auto [x, y] = testing::classification_data(4);
  EvalSpec eval_spec(eval_input, /*steps=*/0);
  eval_spec.start_delay_secs = 0;
  eval_spec.throttle_secs = 0;
  eval_spec.exporters = {std::make_shared<LatestExporter>("latest", Features{{"x", x}}, 2),
                         std::make_shared<BestExporter>("best", Features{{"x", x}})};
  TrainAndEvaluateResult result =
      train_and_evaluate(estimator, TrainSpec(train_input, 60), eval_spec);
  EXPECT_EQ(result.final_eval.at("global_step"), 60);
  auto losses = scalars(model_dir() + "/eval", "loss");
  EXPECT_EQ(losses.size(), 3u);  // steps 20, 40, 60
  EXPECT_EQ(losses.begin()->first, 20);
  int latest = 0;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir() + "/export/latest")) {
    (void)entry;
    ++latest;
  }
  EXPECT_EQ(latest, 2);                  // exports_to_keep
  EXPECT_GE(result.exports.size(), 4u);  // 3 latest + at least the first best
}

TEST_F(HooksTest, TrainAndEvaluateEndsWithAFinalEvaluationWhenStoppedEarly) {
  PlateauOptions options;
  options.eval_dir = model_dir() + "/eval";
  options.patience = 1;
  options.check_every_steps = 1;
  write_history(options.eval_dir, {0.5, 2.0});
  Estimator estimator(classifier_fn, test_config(model_dir(), 20));
  EvalSpec eval_spec(eval_input, 0);
  eval_spec.start_delay_secs = 0;
  eval_spec.throttle_secs = 0;
  TrainAndEvaluateResult result = train_and_evaluate(
      estimator, TrainSpec(train_input, 1000, {std::make_shared<EarlyStoppingHook>(options)}),
      eval_spec);
  EXPECT_EQ(result.final_eval.at("global_step"), 1);
}

}  // namespace
}  // namespace cadre
