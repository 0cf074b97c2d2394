// Fashion-MNIST with the Keras-style API: the MLP (784-256-256-10) or the CNN, fitted for a
// few epochs with validation, under any strategy (TF_CONFIG for multi-worker), ending with
// the test set's metrics as one JSON line.
#include <gflags/gflags.h>

#include <cstdio>

#include "cadre/cadre.h"
#include "examples/program_main.h"

DEFINE_string(model_dir, "", "checkpoints and summaries (required)");
DEFINE_string(model, "mlp", "mlp or cnn");
DEFINE_int32(epochs, 5, "epochs");
DEFINE_int32(batch_size, 128, "global batch size");
DEFINE_string(strategy, "one_device",
              "one_device, mirrored, central_storage, multi_worker_mirrored, parameter_server");
DEFINE_string(devices, "", "e.g. cpu:0,cpu:1 (default: all GPUs, else cpu:0)");
DEFINE_string(data_dir, "/usr/share/datasets/fashion-mnist", "IDX .gz files");

namespace {

using namespace cadre;
using namespace cadre::keras;

Model build(const std::string& name) {
  if (name == "mlp") {
    return Sequential(
        {InputLayer({784}, {.name = "image"}), Dense(256, "relu"), Dense(256, "relu"), Dense(10)},
        "mlp");
  }
  if (name != "cnn") throw InvalidArgumentError("--model=" + name + ": expected mlp or cnn");
  KerasTensor image = Input({784}, {.name = "image"});
  KerasTensor x = Reshape({28, 28, 1})(image);
  x = Conv2D(32, {3, 3}, "relu")(x);
  x = MaxPooling2D({2, 2})(x);
  x = Conv2D(64, {3, 3}, "relu")(x);
  x = MaxPooling2D({2, 2})(x);
  x = Dense(128, "relu")(Flatten()(x));
  return Model(image, Dense(10)(x), "cnn");
}

int run() {
  if (FLAGS_model_dir.empty()) throw InvalidArgumentError("--model_dir is required");
  RunConfig config = RunConfig::from_environment();
  config.model_dir = FLAGS_model_dir;
  config.tf_random_seed = 42;
  StrategyScope scope(strategy_from_flags(FLAGS_strategy, FLAGS_devices,
                                          config.cluster ? &*config.cluster : nullptr));
  Model model = build(FLAGS_model);
  model.summary();
  model.compile({.optimizer = "adam",
                 .loss = SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"},
                 .config = config});
  io::Dataset train = io::fashion_mnist(FLAGS_data_dir, io::Split::kTrain)
                          .shuffle(10'000, 42)
                          .batch(FLAGS_batch_size)
                          .prefetch(2);
  io::Dataset test = io::fashion_mnist(FLAGS_data_dir, io::Split::kTest).batch(500);
  History history = model.fit(train, {.epochs = FLAGS_epochs, .validation_data = test});
  if (model.is_chief()) {
    std::printf("{\"task\":\"%s\",\"model\":\"%s\",\"accuracy\":%.4f,\"loss\":%.4f}\n",
                config.task_type.c_str(), FLAGS_model.c_str(), history.last("val_accuracy"),
                history.last("val_loss"));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cadre::examples::program_main(argc, argv, "Fashion-MNIST with the Keras-style Model API",
                                       run);
}
