// Estimator: train, resume, evaluate, their event files and summaries, and the errors a user
// meets first (predict, export and warm start: predict_export_warm_start_test.cc).
#include "tests/estimator/estimator_test.h"

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/estimator/basic_hooks.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "cadre/io/event_file.h"
#include "tests/estimator/test_model.h"
#include "tests/support/fault_env.h"

namespace cadre {
namespace {

using testing::classifier_fn;
using testing::eval_input;
using testing::predict_input;
using testing::test_config;
using testing::train_input;

using testing::EstimatorTest;

TEST_F(EstimatorTest, TrainingLowersTheLossAndReachesAccuracy) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  auto recorder = std::make_shared<testing::LossRecorder>();
  estimator.train(train_input, {.max_steps = 300, .hooks = {recorder}});
  ASSERT_EQ(recorder->losses.size(), 300u);
  double first = (recorder->losses[0] + recorder->losses[1] + recorder->losses[2]) / 3;
  double last = (recorder->losses[297] + recorder->losses[298] + recorder->losses[299]) / 3;
  EXPECT_LT(last, first * 0.5);
  EvalResult result = estimator.evaluate(eval_input);
  EXPECT_EQ(result.at("global_step"), 300);
  EXPECT_GT(result.at("accuracy"), 0.85);
  EXPECT_GT(result.at("loss"), 0);
  // The checkpoint at the end, and one per 50 steps kept per keep_checkpoint_max = 5.
  EXPECT_EQ(estimator.latest_checkpoint().value(), model_dir() + "/model.ckpt-300.h5");
}

// The event files in `dir`.
std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> files;
  if (!std::filesystem::exists(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) {
      files.push_back(entry.path().string());
    }
  }
  return files;
}

// A run refused at its start (an input_fn that cannot read its data, an input whose first
// batch fails) leaves no event file; the run that then starts writes one, and every later
// train() of the Estimator writes on in it (TensorFlow's FileWriterCache).
TEST_F(EstimatorTest, ARunRefusedAtItsStartLeavesNoEventFile) {
  Estimator estimator(classifier_fn, test_config(model_dir(), 10));
  auto unreadable = [](const InputContext&) -> Dataset {
    throw NotFoundError("no such data directory");
  };
  EXPECT_THROW(estimator.train(unreadable, {.max_steps = 10}), NotFoundError);
  auto failing_first_batch = [](const InputContext& context) {
    return train_input(context).map(
        [](io::Element) -> io::Element { throw ResourceExhaustedError("a batch too large"); });
  };
  EXPECT_THROW(estimator.train(failing_first_batch, {.max_steps = 10}), ResourceExhaustedError);
  EXPECT_EQ(event_files(model_dir()), std::vector<std::string>{});

  estimator.train(train_input, {.max_steps = 10});
  estimator.train(train_input, {.max_steps = 20});
  std::vector<std::string> files = event_files(model_dir());
  ASSERT_EQ(files.size(), 1u);
  std::vector<int64_t> steps;
  for (const io::Event& event : io::read_event_file(files[0])) {
    for (const io::SummaryValue& value : event.values) {
      if (value.tag == "loss") steps.push_back(event.step);
    }
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 11}));
}

TEST_F(EstimatorTest, AMissingMetricIsNotFoundNamingThoseThatExist) {
  EvalResult chief{{"global_step", 300}};  // what a chief returns while an evaluator evaluates
  EXPECT_EQ(chief["global_step"], 300);
  try {
    chief["loss"];
    FAIL() << "reading an absent metric must throw, not read 0";
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("no metric 'loss'; it has: global_step"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(chief.get("accuracy").has_value());
  EXPECT_THROW(EvalResult()["loss"], NotFoundError);
}

// Hooks a model_fn returns with its spec run in that spec's mode only.
TEST_F(EstimatorTest, HooksOfTheSpecRunInItsMode) {
  struct Counter : Hook {
    void after_run(cadre::Run& run, const StepResult& result, RunContext& context) override {
      ++(run.mode() == ModeKeys::kTrain ? train_steps : eval_steps);
    }
    int train_steps = 0, eval_steps = 0;
  };
  auto train_counter = std::make_shared<Counter>(), eval_counter = std::make_shared<Counter>();
  auto model_fn = [&](const Features& features, const Tensor& labels, ModeKeys mode,
                      const Params& params) {
    EstimatorSpec spec = classifier_fn(features, labels, mode, params);
    if (mode == ModeKeys::kTrain) spec.with_hooks({train_counter});
    if (mode == ModeKeys::kEval) spec.with_hooks({eval_counter});
    return spec;
  };
  Estimator estimator(model_fn, test_config(model_dir()));
  estimator.train(train_input, {.max_steps = 7});
  estimator.evaluate(eval_input, {.steps = 3});
  EXPECT_EQ(train_counter->train_steps, 7);
  EXPECT_EQ(train_counter->eval_steps, 0);
  EXPECT_EQ(eval_counter->eval_steps, 3);
  EXPECT_EQ(eval_counter->train_steps, 0);
}

TEST_F(EstimatorTest, ResumingContinuesExactlyWhereAnUninterruptedRunWouldBe) {
  Estimator straight(classifier_fn, test_config(model_dir("straight"), 40));
  auto all = std::make_shared<testing::LossRecorder>();
  straight.train(train_input, {.max_steps = 120, .hooks = {all}});

  Estimator split(classifier_fn, test_config(model_dir("split"), 40));
  auto first = std::make_shared<testing::LossRecorder>();
  auto second = std::make_shared<testing::LossRecorder>();
  split.train(train_input, {.max_steps = 50, .hooks = {first}});  // ends with a checkpoint at 50
  split.train(train_input, {.steps = 70, .hooks = {second}});     // resumes at 50, to 120
  ASSERT_EQ(first->losses.size(), 50u);
  ASSERT_EQ(second->losses.size(), 70u);
  EXPECT_EQ(second->steps.front(), 51);
  for (size_t i = 0; i < 70; ++i) {
    EXPECT_EQ(second->losses[i], all->losses[50 + i]) << "step " << 51 + i;
  }
  for (const std::string& name : straight.get_variable_names()) {
    EXPECT_EQ(straight.get_variable_value(name).to_vector<double>(),
              split.get_variable_value(name).to_vector<double>())
        << name;
  }
}

TEST_F(EstimatorTest, TrainAtMaxStepsReturnsAtOnce) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  estimator.train(train_input, {.max_steps = 20});
  auto recorder = std::make_shared<testing::LossRecorder>();
  estimator.train(train_input, {.max_steps = 20, .hooks = {recorder}});
  EXPECT_TRUE(recorder->losses.empty());
  EXPECT_EQ(checkpoint::CheckpointReader::open(*estimator.latest_checkpoint())->global_step(), 20);
}

TEST_F(EstimatorTest, EvaluateWritesItsResultsForTensorBoard) {
  Estimator estimator(classifier_fn, test_config(model_dir()));
  estimator.train(train_input, {.max_steps = 30});
  EvalResult result = estimator.evaluate(eval_input, {.steps = 2, .name = "holdout"});
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir() + "/eval_holdout")) {
    files.push_back(entry.path().string());
  }
  ASSERT_EQ(files.size(), 1u);
  std::map<std::string, double> seen;
  for (const io::Event& event : io::read_event_file(files[0])) {
    for (const io::SummaryValue& value : event.values) {
      if (value.scalar) {
        EXPECT_EQ(event.step, 30);
        seen[value.tag] = *value.scalar;
      }
    }
  }
  EXPECT_NEAR(seen.at("accuracy"), result.at("accuracy"), 1e-6);
  EXPECT_NEAR(seen.at("loss"), result.at("loss"), 1e-6);
}

TEST_F(EstimatorTest, EvaluationsOfOneProcessShareOneEventFileReadInStepOrder) {
  Estimator estimator(classifier_fn, test_config(model_dir(), 10));
  for (int64_t step : {10, 20, 30}) {
    estimator.train(train_input, {.max_steps = step});
    estimator.evaluate(eval_input, {.steps = 1});
  }
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir() + "/eval")) {
    files.push_back(entry.path().string());
  }
  ASSERT_EQ(files.size(), 1u) << "one event file per process, as TensorFlow's evaluator";
  std::vector<int64_t> steps;  // flushed after each evaluation: all three are there already
  for (const io::Event& event : io::read_event_file(files[0])) {
    for (const io::SummaryValue& value : event.values) {
      if (value.tag == "loss") steps.push_back(event.step);
    }
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{10, 20, 30}));
}

TEST_F(EstimatorTest, EveryFileTheEstimatorWritesGoesThroughItsEnv) {
  auto env = std::make_shared<cadre::testing::FaultEnv>();
  RunConfig config = test_config(model_dir(), 10);
  config.env = env;
  Estimator estimator(classifier_fn, config);
  train_and_evaluate(estimator, TrainSpec(train_input, 20), EvalSpec(eval_input, 1));
  auto [x, y] = testing::classification_data(2);
  estimator.export_model(path("export"), Features{{"x", x}});
  std::string log;
  for (const std::string& line : env->log()) log += line + "\n";
  for (const char* expected : {"rename checkpoint.tmp-",     // the state file
                               "open events.out.tfevents.",  // training and eval summaries
                               "rename training_finished.tmp-", "rename export.json.tmp-",
                               "rename .export.tmp-"}) {  // the export, published whole
    EXPECT_NE(log.find(expected), std::string::npos) << expected << " in\n" << log;
  }
}

// With checkpoint_durable_secs, the saves in between are published without an fsync, and
// train() returns with the last checkpoint durable.
TEST_F(EstimatorTest, TrainEndsWithItsLastCheckpointDurable) {
  auto env = std::make_shared<cadre::testing::FaultEnv>();
  RunConfig config = test_config(model_dir(), 10);
  config.env = env;
  config.checkpoint_durable_secs = 3600;
  Estimator estimator(classifier_fn, config);
  estimator.train(train_input, {.max_steps = 40});
  std::vector<std::string> synced;
  for (const std::string& line : env->log()) {
    if (line.starts_with("sync model.ckpt-")) synced.push_back(line.substr(5, 16));
  }
  // The first save (nothing durable yet) and the last (train() ending); not 20 or 30.
  EXPECT_EQ(synced, (std::vector<std::string>{"model.ckpt-10.h5", "model.ckpt-40.h5"}));
  EXPECT_EQ(checkpoint::CheckpointReader::open(path("model/model.ckpt-40.h5"))->global_step(), 40);
  RunConfig negative = test_config(model_dir());
  negative.checkpoint_durable_secs = -1;
  try {
    Estimator rejected(classifier_fn, negative);
    ADD_FAILURE() << "no error for checkpoint_durable_secs = -1";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint_durable_secs"), std::string::npos) << e.what();
  }
}

TEST_F(EstimatorTest, ASpecMissingWhatItsModeNeedsNamesTheField) {
  auto no_loss = [](const Features& f, const Tensor& labels, ModeKeys mode, const Params& p) {
    EstimatorSpec spec = EstimatorSpec::train(Tensor(), nn::optimizers::sgd(0.1));
    return spec;
  };
  Estimator estimator(no_loss, test_config(model_dir()));
  try {
    estimator.train(train_input, {.max_steps = 1});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("`loss`"), std::string::npos) << e.what();
  }
  EstimatorSpec wrong_mode = EstimatorSpec::eval(Tensor::scalar(1.0f));
  EXPECT_THROW(wrong_mode.validate(ModeKeys::kTrain), InvalidArgumentError);
  EstimatorSpec no_optimizer = EstimatorSpec::train(Tensor::scalar(1.0f), nullptr);
  EXPECT_THROW(no_optimizer.validate(ModeKeys::kTrain), InvalidArgumentError);
  EXPECT_THROW(EstimatorSpec::predict({}).validate(ModeKeys::kPredict), InvalidArgumentError);
  EXPECT_FALSE(std::filesystem::exists(model_dir() + "/model.ckpt-1.h5"));
}

TEST_F(EstimatorTest, ConfigAndArgumentErrorsNameTheField) {
  RunConfig both = test_config(model_dir());
  both.save_checkpoints_secs = 10;
  EXPECT_THROW(Estimator(classifier_fn, both), InvalidArgumentError);
  Estimator estimator(classifier_fn, test_config(model_dir()));
  EXPECT_THROW(estimator.train(train_input, {.steps = 1, .max_steps = 2}), InvalidArgumentError);
  RunConfig no_dir;
  Estimator without_dir(classifier_fn, no_dir);
  EXPECT_THROW(without_dir.train(train_input, {.max_steps = 1}), InvalidArgumentError);
  Params params{{"rate", 0.5}};
  EXPECT_EQ(params.number("rate"), 0.5);
  try {
    params.text("model");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("rate"), std::string::npos) << e.what();
  }
}

TEST_F(EstimatorTest, RunConfigFollowsTheClusterAsTensorFlowDoes) {
  const std::string cluster =
      R"("cluster": {"chief": ["c:1"], "worker": ["w:1", "w:2"], "ps": ["p:1"]})";
  auto config_for = [&](const std::string& task) {
    return RunConfig::for_cluster(parse_tf_config("{" + cluster + ", \"task\": " + task + "}"));
  };
  RunConfig chief = config_for(R"({"type": "chief", "index": 0})");
  EXPECT_TRUE(chief.is_chief);
  EXPECT_EQ(chief.num_worker_replicas, 3);
  EXPECT_EQ(chief.num_ps_replicas, 1);
  RunConfig worker = config_for(R"({"type": "worker", "index": 1})");
  EXPECT_FALSE(worker.is_chief);
  EXPECT_EQ(worker.task_type, "worker");
  EXPECT_EQ(worker.task_id, 1);
  RunConfig evaluator = config_for(R"({"type": "evaluator", "index": 0})");
  EXPECT_FALSE(evaluator.is_chief);
  EXPECT_EQ(evaluator.num_worker_replicas, 0);  // as TensorFlow: not part of training
  RunConfig local;
  EXPECT_TRUE(local.is_chief);
  EXPECT_FALSE(local.cluster.has_value());
}

// A program's first call under TF_CONFIG sets glog up, so that what it does next (join the
// other tasks, before any Estimator exists) logs without glog's "Logging before
// InitGoogleLogging()" (in a fresh process, where nothing has set glog up yet).
TEST(RunConfigDeathTest, FromEnvironmentSetsLoggingUp) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv(
            "TF_CONFIG",
            R"({"cluster": {"chief": ["127.0.0.1:1"]}, "task": {"type": "chief", "index": 0}})", 1);
        bool before = google::IsGoogleLoggingInitialized();
        RunConfig config = RunConfig::from_environment();
        std::exit(!before && config.is_chief && google::IsGoogleLoggingInitialized() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(EstimatorTest, TrainingSummariesAreWritten) {
  RunConfig config = test_config(model_dir());
  config.save_summary_steps = 10;
  config.log_step_count_steps = 10;
  Estimator estimator(classifier_fn, config);
  estimator.train(train_input, {.max_steps = 30});
  std::map<std::string, std::vector<int64_t>> steps_by_tag;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir())) {
    if (!entry.path().filename().string().starts_with("events.out.tfevents.")) continue;
    for (const io::Event& event : io::read_event_file(entry.path().string())) {
      for (const io::SummaryValue& value : event.values)
        steps_by_tag[value.tag].push_back(event.step);
    }
  }
  EXPECT_EQ(steps_by_tag["loss"], (std::vector<int64_t>{1, 11, 21}));
  EXPECT_EQ(steps_by_tag["learning_rate"].size(), 3u);
  EXPECT_EQ(steps_by_tag["global_step/sec"], (std::vector<int64_t>{11, 21}));
  EXPECT_EQ(steps_by_tag["examples/sec"].size(), 2u);
}

}  // namespace
}  // namespace cadre
