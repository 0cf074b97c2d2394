// fit, evaluate, predict, callbacks, strategies, save/load and model_to_estimator.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cadre/cadre.h"
#include "tests/keras/fresh_dir.h"
#include "tests/keras/keras_test_data.h"
#include "tests/support/log_capture.h"

namespace cadre::keras {
namespace {

Sequential small_model() {
  return Sequential({InputLayer({8}, {.name = "x"}), Dense(16, "relu"), Dense(4)});
}

CompileOptions small_compile(const std::string& dir,
                             std::shared_ptr<const Strategy> strategy = nullptr) {
  CompileOptions o;
  o.optimizer = nn::optimizers::adam(0.01);
  o.loss = SparseCategoricalCrossentropy({.from_logits = true});
  o.metrics = {"accuracy"};
  o.distribute = std::move(strategy);
  o.config.model_dir = dir;
  o.config.tf_random_seed = 7;
  return o;
}

TEST(FitTest, SequentialLearnsAndReportsPerEpochHistory) {
  Sequential model = small_model();
  model.compile(small_compile(testing::fresh_dir("history")));
  std::FILE* out = std::tmpfile();
  History h =
      model.fit(testing::blobs(),
                {.epochs = 3, .validation_data = testing::blobs(64), .verbose = 1, .output = out});
  ASSERT_EQ(h.epoch, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(h.history.at("loss").size(), 3u);
  EXPECT_LT(h.history.at("loss")[2], h.history.at("loss")[0]);
  EXPECT_GT(h.last("val_accuracy"), 0.8);
  EXPECT_NEAR(h.last("accuracy"), h.last("val_accuracy"), 0.15);
  std::rewind(out);
  char buffer[8192] = {};
  std::fread(buffer, 1, sizeof buffer - 1, out);
  std::string text = buffer;
  EXPECT_NE(text.find("Epoch 1/3\n16/16 [==============================] - "), std::string::npos)
      << text;
  EXPECT_NE(text.find("/step - loss: "), std::string::npos) << text;
  EXPECT_NE(text.find(" - accuracy: "), std::string::npos) << text;
  EXPECT_NE(text.find(" - val_loss: "), std::string::npos) << text;
  std::fclose(out);

  EvalResult eval = model.evaluate(testing::blobs(64));
  EXPECT_DOUBLE_EQ(eval["accuracy"], h.last("val_accuracy"));
  EXPECT_EQ(eval["global_step"], 48);
  Tensor p = model.predict(testing::blobs(64));
  EXPECT_EQ(p.shape().to_vector(), (std::vector<int64_t>{512, 4}));
}

TEST(FitTest, FunctionalModelWithSoftmaxAndKerasNames) {
  KerasTensor x = Input({8}, {.name = "x"});
  KerasTensor a = Dense(16, "relu")(x);
  KerasTensor b = Dense(16, "tanh")(x);
  KerasTensor y = Dense(4, "softmax")(Concatenate()({a, b}));
  Model model(x, y);
  CompileOptions o = small_compile(testing::fresh_dir("functional"));
  o.loss = "sparse_categorical_crossentropy";  // probabilities: the softmax's logits are used
  model.compile(o);
  History h = model.fit(testing::blobs(), {.epochs = 3, .verbose = 0});
  EXPECT_LT(h.history.at("loss")[2], h.history.at("loss")[0]);
  EXPECT_GT(h.last("accuracy"), 0.7);
  Tensor p = model.predict(testing::blobs(), {.steps = 1});
  EXPECT_EQ(p.shape().to_vector(), (std::vector<int64_t>{32, 4}));
  EXPECT_NEAR(sum(p, {1}).to_vector<float>()[0], 1.0, 1e-5);
}

// The same model, data and seed under each in-process strategy: the same metrics.
TEST(FitTest, StrategiesGiveTheSameMetrics) {
  std::map<std::string, std::shared_ptr<const Strategy>> strategies{
      {"one_device", OneDeviceStrategy::create()},
      {"mirrored", MirroredStrategy::create({Device::cpu(0), Device::cpu(1)})},
      {"central_storage", CentralStorageStrategy::create({Device::cpu(0), Device::cpu(1)})},
  };
  std::map<std::string, History> results;
  for (const auto& [name, strategy] : strategies) {
    StrategyScope scope(strategy);
    Sequential model = small_model();
    model.compile(small_compile(testing::fresh_dir("strategy_" + name)));
    results[name] = model.fit(testing::blobs(),
                              {.epochs = 2, .validation_data = testing::blobs(64), .verbose = 0});
  }
  for (const auto& [name, h] : results) {
    EXPECT_NEAR(h.last("val_loss"), results["one_device"].last("val_loss"), 1e-3) << name;
    EXPECT_NEAR(h.last("val_accuracy"), results["one_device"].last("val_accuracy"), 0.01) << name;
  }
}

class Recorder : public Callback {
 public:
  void on_train_begin(const Logs&) override { events.push_back("train_begin"); }
  void on_epoch_begin(int epoch, const Logs&) override { events.push_back("epoch_begin"); }
  void on_train_batch_end(int64_t batch, const Logs& logs) override {
    ++batches;
    last_batch = batch;
    EXPECT_TRUE(logs.count("loss"));
  }
  void on_epoch_end(int epoch, const Logs& logs) override { events.push_back("epoch_end"); }
  void on_train_end(const Logs&) override { events.push_back("train_end"); }
  std::vector<std::string> events;
  int batches = 0;
  int64_t last_batch = -1;
};

TEST(FitTest, CallbacksSeeBatchesAndEpochs) {
  Sequential model = small_model();
  std::string dir = testing::fresh_dir("callbacks");
  model.compile(small_compile(dir + "/model"));
  auto recorder = std::make_shared<Recorder>();
  auto checkpoint = std::make_shared<ModelCheckpoint>(
      dir + "/best-{epoch}",
      ModelCheckpointOptions{.monitor = "val_accuracy", .save_best_only = true});
  auto board = std::make_shared<TensorBoard>(dir + "/logs");
  model.fit(testing::blobs(), {.epochs = 2,
                               .steps_per_epoch = 5,
                               .validation_data = testing::blobs(64),
                               .callbacks = {recorder, checkpoint, board},
                               .verbose = 0});
  EXPECT_EQ(recorder->events, (std::vector<std::string>{"train_begin", "epoch_begin", "epoch_end",
                                                        "epoch_begin", "epoch_end", "train_end"}));
  EXPECT_EQ(recorder->batches, 10);
  EXPECT_EQ(recorder->last_batch, 4);
  ASSERT_FALSE(checkpoint->saved().empty());
  EXPECT_EQ(checkpoint->saved()[0], dir + "/best-1");
  EXPECT_TRUE(std::filesystem::exists(dir + "/best-1/model.pbtxt"));
  EXPECT_FALSE(std::filesystem::is_empty(dir + "/logs/train"));
  EXPECT_FALSE(std::filesystem::is_empty(dir + "/logs/validation"));
}

// A fresh model compiled with the model_dir of an earlier one resumes its checkpoint (as the
// Estimator does), and says so in a warning naming the checkpoint and its step; a model that
// goes on from its own checkpoints (a second fit) says nothing.
TEST(FitTest, AFreshModelResumingAModelDirSaysSoLoudly) {
  std::string dir = testing::fresh_dir("resumed");
  Sequential first = small_model();
  first.compile(small_compile(dir));
  cadre::testing::LogCapture log;
  first.fit(testing::blobs(), {.epochs = 1, .verbose = 0});
  first.fit(testing::blobs(), {.epochs = 1, .verbose = 0});
  EXPECT_TRUE(log.matching({"resumes from"}).empty()) << log.matching({"resumes from"})[0];

  Sequential fresh = small_model();
  fresh.compile(small_compile(dir));
  fresh.fit(testing::blobs(), {.epochs = 1, .verbose = 0});
  std::vector<std::string> said = log.matching({"resumes from " + dir + "/model.ckpt-32.h5"});
  ASSERT_EQ(said.size(), 1u) << "no warning naming the checkpoint";
  EXPECT_NE(said[0].find("(global step 32)"), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("new model_dir"), std::string::npos) << said[0];
  EXPECT_EQ(fresh.evaluate(testing::blobs(64))["global_step"], 48);
}

// The epochs of one fit (each an Estimator::train) write one event file in model_dir, which
// holds every epoch's loss.
TEST(FitTest, AFitWritesOneEventFile) {
  std::string dir = testing::fresh_dir("one_event_file");
  Sequential model = small_model();
  model.compile(small_compile(dir));
  model.fit(testing::blobs(), {.epochs = 3, .verbose = 0});
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) {
      files.push_back(entry.path().string());
    }
  }
  ASSERT_EQ(files.size(), 1u) << "one event file per fit, not per epoch";
  std::set<int64_t> epochs;  // 16 steps an epoch
  for (const io::Event& event : io::read_event_file(files[0])) {
    for (const io::SummaryValue& value : event.values) {
      if (value.tag == "loss") epochs.insert((event.step - 1) / 16);
    }
  }
  EXPECT_EQ(epochs, (std::set<int64_t>{0, 1, 2}));
}

// A Keras program that never sets glog up logs through it without glog's "Logging before
// InitGoogleLogging()": the model sets glog up (in a fresh process, where nothing has yet).
TEST(FitDeathTest, AKerasProgramLogsWithoutSettingGlogUp) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        bool before = google::IsGoogleLoggingInitialized();
        Sequential model = small_model();
        bool after = google::IsGoogleLoggingInitialized();
        CompileOptions options = small_compile("");
        options.config.tf_random_seed.reset();  // compile logs the seed it draws
        model.compile(options);
        std::exit(!before && after ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "^I[0-9]+ [^\n]*model 'sequential[^\n]*': tf_random_seed");
}

TEST(FitTest, EarlyStoppingAndReduceLrOnPlateau) {
  Sequential model = small_model();
  model.compile(small_compile(testing::fresh_dir("plateau")));
  // Monitoring a value that cannot improve by min_delta: every epoch is a plateau.
  auto stop = std::make_shared<EarlyStopping>(
      EarlyStoppingOptions{.monitor = "loss", .min_delta = 100, .patience = 1});
  auto reduce = std::make_shared<ReduceLROnPlateau>(
      ReduceLROnPlateauOptions{.monitor = "loss", .factor = 0.5, .patience = 1, .min_delta = 100});
  History h =
      model.fit(testing::blobs(),
                {.epochs = 10, .steps_per_epoch = 2, .callbacks = {stop, reduce}, .verbose = 0});
  EXPECT_EQ(h.epoch.size(), 3u);
  EXPECT_EQ(stop->stopped_epoch(), 2);
  EXPECT_DOUBLE_EQ(model.learning_rate(), 0.01 * 0.5 * 0.5);
}

TEST(FitTest, SaveAndLoadRoundTrip) {
  Sequential model = small_model();
  std::string dir = testing::fresh_dir("save");
  model.compile(small_compile(dir + "/model"));
  model.fit(testing::blobs(), {.epochs = 1, .verbose = 0});
  model.save(dir + "/saved");
  Model loaded = load_model(dir + "/saved", {.model_dir = dir + "/loaded"});
  EXPECT_TRUE(loaded.compiled());
  EXPECT_EQ(loaded.summary_string(), model.summary_string());
  Tensor a = model.predict(testing::blobs(64)), b = loaded.predict(testing::blobs(64));
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_DOUBLE_EQ(loaded.evaluate(testing::blobs(64))["loss"],
                   model.evaluate(testing::blobs(64))["loss"]);
  // Training goes on from the saved step.
  History h = loaded.fit(testing::blobs(), {.epochs = 1, .verbose = 0});
  EXPECT_EQ(loaded.evaluate(testing::blobs(64))["global_step"], 32);
  EXPECT_THROW(load_model(dir + "/nothing"), NotFoundError);
}

// A model compiled without a model_dir trains in a temporary one, which goes with the
// model (and with the last copy of it); what Model::save wrote stays.
TEST(FitTest, ATemporaryModelDirGoesWithTheModel) {
  std::string saved = testing::fresh_dir("kept") + "/saved";
  std::string temporary;
  {
    Sequential model = small_model();
    model.compile(small_compile(""));
    temporary = model.model_dir();
    model.fit(testing::blobs(), {.epochs = 1, .verbose = 0});
    EXPECT_FALSE(std::filesystem::is_empty(temporary));
    Model copy = model;
    model.save(saved);
    { Sequential gone = std::move(model); }
    EXPECT_TRUE(std::filesystem::exists(temporary)) << "a copy of the model still uses it";
    EXPECT_EQ(copy.evaluate(testing::blobs(64))["global_step"], 16);
  }
  EXPECT_FALSE(std::filesystem::exists(temporary));
  Model loaded = load_model(saved);
  EXPECT_EQ(loaded.evaluate(testing::blobs(64))["global_step"], 16);
}

TEST(FitTest, ModelToEstimatorCheckpointsWorkBothWays) {
  Sequential model = small_model();
  model.compile(small_compile(testing::fresh_dir("to_estimator")));
  model.fit(testing::blobs(), {.epochs = 1, .verbose = 0});  // 16 steps
  Estimator estimator = model_to_estimator(model);
  InputFn input = [](const InputContext&) { return testing::blobs().repeat(); };
  EXPECT_EQ(estimator.train(input, {.steps = 10}), 26);
  EvalResult from_estimator =
      estimator.evaluate([](const InputContext&) { return testing::blobs(64); });
  EvalResult from_model = model.evaluate(testing::blobs(64));
  EXPECT_DOUBLE_EQ(from_estimator["loss"], from_model["loss"]);
  EXPECT_EQ(from_model["global_step"], 26);
  model.fit(testing::blobs(), {.epochs = 1, .verbose = 0});
  EXPECT_EQ(
      estimator.evaluate([](const InputContext&) { return testing::blobs(64); })["global_step"],
      42);
}

// As Keras, a model never fitted evaluates and predicts with its initial weights: those fit
// starts from (the same seeded initializers), without changing where fit starts.
TEST(FitTest, EvaluateAndPredictBeforeFitUseTheSeededInitialWeights) {
  std::string dir = testing::fresh_dir("initial");
  Sequential model = small_model();
  model.compile(small_compile(dir));
  EvalResult before = model.evaluate(testing::blobs(64));
  Tensor predicted = model.predict(testing::blobs(64));
  EXPECT_EQ(predicted.shape(), Shape({512, 4}));
  EXPECT_EQ(before["global_step"], 0);
  EXPECT_GT(before["loss"], 0.5);  // untrained
  EXPECT_FALSE(checkpoint::latest_checkpoint(dir).has_value());
  // One step with a learning rate too small to move the weights gives the same outputs.
  Sequential twin = small_model();
  CompileOptions o = small_compile(testing::fresh_dir("initial_twin"));
  o.optimizer = nn::optimizers::sgd(1e-30);
  twin.compile(o);
  twin.fit(testing::blobs(), {.epochs = 1, .steps_per_epoch = 1, .verbose = 0});
  std::vector<float> a = predicted.to_vector<float>(),
                     b = twin.predict(testing::blobs(64)).to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6) << i;
  EXPECT_NEAR(twin.evaluate(testing::blobs(64))["loss"], before["loss"], 1e-6);
  // Fit after them is the fit of a model never evaluated.
  History h = model.fit(testing::blobs(), {.epochs = 1, .verbose = 0});
  Sequential fresh = small_model();
  fresh.compile(small_compile(testing::fresh_dir("initial_fresh")));
  EXPECT_EQ(h.last("loss"), fresh.fit(testing::blobs(), {.epochs = 1, .verbose = 0}).last("loss"));
  EXPECT_EQ(model.evaluate(testing::blobs(64))["global_step"], 16);
}

// A crash mid-epoch (here an exception from a callback), then the same fit again with
// BackupAndRestore: it ends with the variables of a fit that never stopped.
class CrashAt : public Callback {
 public:
  explicit CrashAt(int64_t batches) : left_(batches) {}
  void on_train_batch_end(int64_t, const Logs&) override {
    if (--left_ == 0) throw AbortedError("simulated crash");
  }

 private:
  int64_t left_;
};

TEST(FitTest, BackupAndRestoreResumesMidEpochExactly) {
  auto run = [](const std::string& backup, std::shared_ptr<Callback> crash) {
    Sequential model = small_model();
    CompileOptions o = small_compile("");
    model.compile(o);
    Callbacks callbacks{
        std::make_shared<BackupAndRestore>(backup, BackupAndRestoreOptions{.save_freq_steps = 4})};
    if (crash) callbacks.push_back(crash);
    model.fit(testing::blobs().repeat(),
              {.epochs = 3, .steps_per_epoch = 10, .callbacks = callbacks, .verbose = 0});
    return model;
  };
  std::string straight = testing::fresh_dir("backup_straight");
  std::string crashed = testing::fresh_dir("backup_crashed");
  Model reference = run(straight, nullptr);
  EXPECT_THROW(run(crashed, std::make_shared<CrashAt>(17)), AbortedError);  // epoch 2, batch 7
  Model resumed = run(crashed, nullptr);
  EXPECT_FALSE(std::filesystem::exists(crashed + "/fit_state"));
  for (const std::string& name : reference.weight_names()) {
    EXPECT_EQ(reference.get_weight(name).to_vector<float>(),
              resumed.get_weight(name).to_vector<float>())
        << name;
  }
}

TEST(FitTest, FashionMnistMlpReachesTheEstimatorsAccuracy) {
  if (!testing::have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  io::Dataset train = io::fashion_mnist(testing::kFashionMnist, io::Split::kTrain)
                          .shuffle(10'000, 42)
                          .batch(128)
                          .prefetch(2);
  io::Dataset test = io::fashion_mnist(testing::kFashionMnist, io::Split::kTest).batch(500);
  Sequential model({Dense(256, "relu"), Dense(256, "relu"), Dense(10)});
  RunConfig config;
  config.model_dir = testing::fresh_dir("fashion_mlp");
  config.tf_random_seed = 42;
  model.compile({.optimizer = "adam",
                 .loss = SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"},
                 .config = config});
  History h = model.fit(train, {.epochs = 10, .validation_data = test, .verbose = 2});
  EXPECT_GE(h.last("val_accuracy"), 0.88);
}

}  // namespace
}  // namespace cadre::keras
