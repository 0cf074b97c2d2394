// The program the multi-process Keras tests run once per task (TF_CONFIG from the
// environment): fits the small classifier for 3 epochs of 10 steps on a global batch of 32
// with BackupAndRestore (a checkpoint every 4 steps), under ParameterServerStrategy when the
// cluster has ps tasks (variables sliced small, so that even this model is partitioned; on
// a ps task fit serves them until the test stops it),
// MultiWorkerMirroredStrategy when it has several training tasks, else on one device; its
// last line is the History's final validation metrics, and MODEL_DIR/history_<task>.txt
// (task: chief, worker or local) holds the whole History. HELPER_STEP_SLEEP_MS paces every
// step, so that a test can kill the job mid-epoch.
//
// With `estimator`, runs the same compiled model as model_to_estimator's Estimator through
// train_and_evaluate to step 30 (a checkpoint every 10 steps; the evaluator evaluates each
// on the validation data) and prints the final evaluation, also to
// MODEL_DIR/final_eval_<task>.txt.
//
//   keras_fit_helper MODEL_DIR [estimator]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <thread>

#include "cadre/cadre.h"
#include "tests/keras/keras_test_data.h"

namespace {

class Pace : public cadre::keras::Callback {
 public:
  explicit Pace(int ms) : ms_(ms) {}
  void on_train_batch_begin(int64_t, const cadre::keras::Logs&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
  }

 private:
  int ms_;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace cadre;
  using namespace cadre::keras;
  bool estimator_mode = argc == 3 && std::string(argv[2]) == "estimator";
  if (argc != 2 && !estimator_mode) {
    std::cerr << "usage: keras_fit_helper MODEL_DIR [estimator]\n";
    return 2;
  }
  try {
    RunConfig config = RunConfig::from_environment();
    config.model_dir = argv[1];
    config.tf_random_seed = 7;
    std::shared_ptr<const Strategy> strategy;
    if (config.num_ps_replicas > 0) {
      ParameterServerOptions options;
      options.placement.min_slice_bytes = 64;
      options.connect_timeout_seconds = 60;
      options.init_timeout_seconds = 60;
      strategy = ParameterServerStrategy::create(*config.cluster, {Device::cpu(0)}, options);
    } else if (config.num_worker_replicas > 1) {
      MultiWorkerOptions options;
      options.registration_timeout_seconds = 60;
      options.collective_timeout_seconds = 60;
      options.coordination.heartbeat_timeout_seconds = 5;
      strategy = MultiWorkerMirroredStrategy::create(*config.cluster, {Device::cpu(0)}, options);
    }
    if (estimator_mode) config.save_checkpoints_steps = 10;
    Sequential model({InputLayer({8}, {.name = "x"}), Dense(16, "relu"), Dense(4)});
    model.compile({.optimizer = nn::optimizers::adam(0.01),
                   .loss = SparseCategoricalCrossentropy({.from_logits = true}),
                   .metrics = {"accuracy"},
                   .distribute = strategy,
                   .config = config});
    if (estimator_mode) {
      Estimator estimator = model_to_estimator(model);
      EvalSpec eval_spec([](const InputContext&) { return testing::blobs(64); }, 0);
      eval_spec.start_delay_secs = 0;
      eval_spec.throttle_secs = 0;
      TrainAndEvaluateResult result = train_and_evaluate(
          estimator, TrainSpec([](const InputContext&) { return testing::blobs().repeat(); }, 30),
          eval_spec);
      // The chief leaves evaluation to the evaluator: its result has the global step only.
      char line[200];
      std::snprintf(line, sizeof line, "{\"task\":\"%s\",\"global_step\":%.0f,\"loss\":%.9g}\n",
                    config.task_type.c_str(), result.final_eval.at("global_step"),
                    result.final_eval.get("loss").value_or(-1));
      std::fputs(line, stdout);
      std::ofstream(std::string(argv[1]) + "/final_eval_" + config.task_type + ".txt") << line;
      return 0;
    }
    Callbacks callbacks{std::make_shared<BackupAndRestore>(
        std::string(argv[1]) + "/backup", BackupAndRestoreOptions{.save_freq_steps = 4})};
    if (const char* pace = std::getenv("HELPER_STEP_SLEEP_MS"); pace && *pace) {
      callbacks.push_back(std::make_shared<Pace>(std::atoi(pace)));
    }
    History h = model.fit(testing::blobs().repeat(), {.epochs = 3,
                                                      .steps_per_epoch = 10,
                                                      .validation_data = testing::blobs(64),
                                                      .callbacks = callbacks,
                                                      .verbose = 2});
    std::printf("{\"task\":\"%s\",\"val_loss\":%.9g,\"val_accuracy\":%.9g}\n",
                config.task_type.c_str(), h.last("val_loss"), h.last("val_accuracy"));
    // The whole History, for the tests to compare: "EPOCH NAME VALUE" per line.
    std::string task = config.cluster ? config.task_type : "local";
    std::ofstream history(std::string(argv[1]) + "/history_" + task + ".txt");
    for (const auto& [name, values] : h.history) {
      for (size_t i = 0; i < values.size(); ++i) {
        history << h.epoch[i] << " " << name << " " << std::setprecision(17) << values[i] << "\n";
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "keras_fit_helper: " << e.what() << "\n";
    return 1;
  }
}
