// An Estimator on a model_dir that a crash, a full disk or a read-only mount left behind:
// a state file at fault or a damaged newest checkpoint resumes training from the newest
// intact checkpoint, with a warning, overwriting nothing; an evaluator skips a damaged
// checkpoint; a read-only model_dir is evaluated and predicted from without a write.
//
// Read-only: the tests run as root, for whom chmod -w changes nothing, and a read-only bind
// mount needs privileges a test should not have; the model_dir goes through a FaultEnv
// (RunConfig::env, which every file the Estimator writes goes through) set read-only, which
// refuses each write as EROFS does and records the attempt.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "tests/estimator/test_model.h"
#include "tests/support/fault_env.h"
#include "tests/support/log_capture.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::classifier_fn;
using testing::eval_input;
using testing::LogCapture;
using testing::predict_input;
using testing::test_config;
using testing::train_input;

// Every file under `dir` (recursively) by relative path, with its bytes.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      files[std::filesystem::relative(entry.path(), dir).string()] =
          testing::read_file(entry.path().string());
    }
  }
  return files;
}

// Flips a byte in the stored values of `variable` in the checkpoint at `path`.
void corrupt(const std::string& path, const std::string& variable) {
  Tensor value = checkpoint::CheckpointReader::open(path)->read(variable);
  std::string contents = testing::read_file(path);
  size_t at =
      contents.find(std::string(static_cast<const char*>(value.raw_data()), value.nbytes()));
  ASSERT_NE(at, std::string::npos);
  contents[at + 3] ^= 0x10;
  testing::write_file(path, contents);
}

enum class Damage { kEmpty, kGarbage, kMissing, kNamesAMissingFile };

std::string name_of(Damage damage) {
  const char* names[] = {"Empty", "Garbage", "Missing", "NamesAMissingFile"};
  return names[static_cast<int>(damage)];
}

class ModelDirHealingTest : public testing::TempDirTest {
 protected:
  std::string model_dir() const { return path("model"); }
  std::string file(const std::string& name) const { return model_dir() + "/" + name; }

  // Checkpoints at steps 10 and 20.
  void train_to_20() {
    Estimator estimator(classifier_fn, test_config(model_dir(), 10));
    estimator.train(train_input, {.max_steps = 20});
    ASSERT_TRUE(std::filesystem::exists(file("model.ckpt-10.h5")));
    ASSERT_TRUE(std::filesystem::exists(file("model.ckpt-20.h5")));
  }

  void damage_state(Damage damage) {
    switch (damage) {
      case Damage::kEmpty:
        testing::write_file(file("checkpoint"), "");
        break;
      case Damage::kGarbage:
        testing::write_file(file("checkpoint"), "\x01\x02 not a state file {\n");
        break;
      case Damage::kMissing:
        std::filesystem::remove(file("checkpoint"));
        break;
      case Damage::kNamesAMissingFile:
        testing::write_file(file("checkpoint"), "model_checkpoint_path: \"model.ckpt-25.h5\"\n");
        break;
    }
  }

  // The losses of steps 21 to 30 of a run that was never interrupted.
  std::vector<double> straight_losses_21_to_30() {
    Estimator straight(classifier_fn, test_config(path("straight"), 10));
    auto recorder = std::make_shared<testing::LossRecorder>();
    straight.train(train_input, {.max_steps = 30, .hooks = {recorder}});
    return std::vector<double>(recorder->losses.begin() + 20, recorder->losses.end());
  }
};

class DamagedStateFileTest : public ModelDirHealingTest,
                             public ::testing::WithParamInterface<Damage> {};

TEST_P(DamagedStateFileTest, TrainingResumesFromTheNewestCheckpointWithAWarningOverwritingNothing) {
  train_to_20();
  std::string first = testing::read_file(file("model.ckpt-10.h5"));
  std::string second = testing::read_file(file("model.ckpt-20.h5"));
  damage_state(GetParam());

  LogCapture log;
  Estimator estimator(classifier_fn, test_config(model_dir(), 10));
  auto recorder = std::make_shared<testing::LossRecorder>();
  estimator.train(train_input, {.max_steps = 30, .hooks = {recorder}});
  const char* problem[] = {"is empty", "line 1", "no state file",
                           "model.ckpt-25.h5, which does not exist"};
  EXPECT_FALSE(log.matching({file("checkpoint"), problem[static_cast<int>(GetParam())]}).empty())
      << log.all();
  ASSERT_FALSE(recorder->steps.empty());
  EXPECT_EQ(recorder->steps.front(), 21) << "the step continues";
  EXPECT_EQ(recorder->losses, straight_losses_21_to_30()) << "exactly as if never interrupted";
  EXPECT_EQ(testing::read_file(file("model.ckpt-10.h5")), first);
  EXPECT_EQ(testing::read_file(file("model.ckpt-20.h5")), second);
  EXPECT_EQ(estimator.latest_checkpoint(), file("model.ckpt-30.h5"));
  checkpoint::CheckpointState state = checkpoint::read_state(*posix_env(), model_dir()).value();
  EXPECT_EQ(state.model_checkpoint_path, "model.ckpt-30.h5");
  EXPECT_EQ(state.all_model_checkpoint_paths,
            (std::vector<std::string>{"model.ckpt-10.h5", "model.ckpt-20.h5", "model.ckpt-30.h5"}));
}

INSTANTIATE_TEST_SUITE_P(EachDamage, DamagedStateFileTest,
                         ::testing::Values(Damage::kEmpty, Damage::kGarbage, Damage::kMissing,
                                           Damage::kNamesAMissingFile),
                         [](const auto& info) { return name_of(info.param); });

// The newest checkpoint damaged (a machine crash lost its unsynced pages), with the state
// file intact or empty: training resumes from the one before and says so, and says so
// again when it replaces the damaged one.
TEST_F(ModelDirHealingTest, ADamagedNewestCheckpointResumesFromTheOneBefore) {
  for (bool empty_state : {false, true}) {
    std::filesystem::remove_all(model_dir());
    train_to_20();
    std::string first = testing::read_file(file("model.ckpt-10.h5"));
    corrupt(file("model.ckpt-20.h5"), "hidden/kernel");
    if (empty_state) damage_state(Damage::kEmpty);

    LogCapture log;
    Estimator estimator(classifier_fn, test_config(model_dir(), 10));
    auto recorder = std::make_shared<testing::LossRecorder>();
    estimator.train(train_input, {.max_steps = 30, .hooks = {recorder}});
    ASSERT_FALSE(recorder->steps.empty());
    EXPECT_EQ(recorder->steps.front(), 11) << empty_state;
    EXPECT_FALSE(log.matching({"model.ckpt-20.h5", "checksum mismatch"}).empty()) << log.all();
    EXPECT_FALSE(log.matching({"step 20", "replacing the existing", "model.ckpt-20.h5"}).empty())
        << log.all();
    EXPECT_EQ(testing::read_file(file("model.ckpt-10.h5")), first) << empty_state;
    EXPECT_TRUE(checkpoint::CheckpointReader::open(file("model.ckpt-20.h5"))->verify().empty());
    EXPECT_EQ(estimator.latest_checkpoint(), file("model.ckpt-30.h5"));
  }
}

// An evaluate-only run (max_steps already reached) on a read-only model_dir: the local
// train_and_evaluate evaluates and returns, predict works, and nothing but the evaluation's
// event file (the evaluation's record, where writing is the point) is even tried.
TEST_F(ModelDirHealingTest, AReadOnlyModelDirIsEvaluatedAndPredictedFrom) {
  {
    Estimator writable(classifier_fn, test_config(model_dir(), 10));
    train_and_evaluate(writable, TrainSpec(train_input, 20), EvalSpec(eval_input, 1));
  }
  auto before = snapshot(model_dir());
  ASSERT_TRUE(before.count("training_finished"));

  auto env = std::make_shared<testing::FaultEnv>();
  env->set_read_only(true);
  RunConfig config = test_config(model_dir(), 10);
  config.env = env;
  Estimator estimator(classifier_fn, config);
  TrainAndEvaluateResult result =
      train_and_evaluate(estimator, TrainSpec(train_input, 20), EvalSpec(eval_input, 1));
  EXPECT_EQ(result.final_eval.at("global_step"), 20);
  EXPECT_TRUE(result.final_eval.count("accuracy"));
  EvalResult eval = estimator.evaluate(eval_input, {.steps = 1});
  EXPECT_EQ(eval.at("global_step"), 20);
  Predictions predictions = estimator.predict(predict_input, {.predict_keys = {"class"}});
  int count = 0;
  while (predictions.next()) ++count;
  EXPECT_EQ(count, 20);

  EXPECT_EQ(snapshot(model_dir()), before);
  for (const std::string& attempt : env->refused()) {
    EXPECT_TRUE(attempt.starts_with("open events.out.tfevents.")) << attempt;
  }
}

// The evaluator role on a read-only model_dir whose state file is empty and whose middle
// checkpoint is damaged: it evaluates the others, skipping that one with an error logged
// (before, the damaged one ended the evaluator), and ends at the final step.
TEST_F(ModelDirHealingTest, TheEvaluatorSkipsADamagedCheckpointOfAReadOnlyModelDir) {
  {
    Estimator writable(classifier_fn, test_config(model_dir(), 10));
    writable.train(train_input, {.max_steps = 30});
  }
  corrupt(file("model.ckpt-20.h5"), "hidden/kernel");
  testing::write_file(file("training_finished"), "training finished at step 30 (max_steps 30)\n");
  testing::write_file(file("checkpoint"), "");
  auto before = snapshot(model_dir());

  auto env = std::make_shared<testing::FaultEnv>();
  env->set_read_only(true);
  RunConfig config = test_config(model_dir(), 10);
  config.env = env;
  config.task_type = "evaluator";
  config.is_chief = false;
  Estimator estimator(classifier_fn, config);
  EvalSpec eval_spec(eval_input, 1);
  eval_spec.start_delay_secs = 0;
  eval_spec.throttle_secs = 0;
  LogCapture log;
  TrainAndEvaluateResult result =
      train_and_evaluate(estimator, TrainSpec(train_input, 30), eval_spec);
  EXPECT_EQ(result.final_eval.at("global_step"), 30);
  EXPECT_FALSE(log.matching({"skipping", "model.ckpt-20.h5"}, google::GLOG_ERROR).empty())
      << log.all();
  EXPECT_FALSE(log.matching({"evaluation of", "model.ckpt-10.h5"}, google::GLOG_INFO).empty())
      << log.all();
  EXPECT_EQ(snapshot(model_dir()), before);
}

}  // namespace
}  // namespace cadre
