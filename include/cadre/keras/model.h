// Model: a Keras-style model over the Estimator. Build it from layers, compile it with an
// optimizer, a loss and metrics (and a strategy), then fit, evaluate, predict and save:
//
//   keras::Sequential model({Dense(256, "relu"), Dense(256, "relu"), Dense(10)});
//   model.compile({.optimizer = "adam",
//                  .loss = SparseCategoricalCrossentropy({.from_logits = true}),
//                  .metrics = {"accuracy"}});
//   keras::History history = model.fit(train, {.epochs = 5, .validation_data = test});
//
// It is a thin layer: fit() runs Estimator::train once per epoch with a model_fn that calls
// the layers in order under the names they own, and takes each epoch's validation metrics
// from Estimator::evaluate. So the model's weights live in the checkpoints of its model_dir
// (RunConfig, CompileOptions::config), which any Estimator running the same layers reads
// and writes (model_to_estimator), and every strategy, the multi-worker story under
// TF_CONFIG, resuming and the evaluator are the Estimator's.
//
// A Model is used from one thread at a time. Copies share the same model (layers, compiled
// state, model_dir).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cadre/estimator/estimator.h"
#include "cadre/estimator/run_config.h"
#include "cadre/io/dataset.h"
#include "cadre/io/input_fn.h"
#include "cadre/keras/callbacks.h"
#include "cadre/keras/layers.h"
#include "cadre/keras/losses.h"
#include "cadre/keras/metrics.h"
#include "cadre/nn/optimizer.h"
#include "cadre/strategies/strategy.h"

namespace cadre::keras {

// `with strategy.scope():` — models constructed on this thread while a scope is alive are
// compiled under its strategy (unless CompileOptions::distribute names another).
class StrategyScope {
 public:
  explicit StrategyScope(std::shared_ptr<const Strategy> strategy);
  ~StrategyScope();
  StrategyScope(const StrategyScope&) = delete;
  StrategyScope& operator=(const StrategyScope&) = delete;

 private:
  std::shared_ptr<const Strategy> previous_;
};
// The strategy of the innermost scope on this thread, or null.
std::shared_ptr<const Strategy> current_strategy();

// An optimizer by object, or by Keras name with its defaults ("adam", "sgd", "rmsprop",
// "adagrad"; an unknown one is an InvalidArgumentError listing them).
class OptimizerArg {
 public:
  OptimizerArg(const char* name);                          // NOLINT: implicit, as Keras
  OptimizerArg(const std::string& name);                   // NOLINT
  OptimizerArg(std::shared_ptr<nn::Optimizer> optimizer);  // NOLINT
  const std::shared_ptr<nn::Optimizer>& get() const { return optimizer_; }

 private:
  std::shared_ptr<nn::Optimizer> optimizer_;
};

struct CompileOptions {
  OptimizerArg optimizer = "rmsprop";  // Keras's default
  // Required: compile without a loss is an InvalidArgumentError.
  std::optional<Loss> loss{};
  std::vector<Metric> metrics{};
  // The strategy to train and evaluate under; null: the StrategyScope's the model was
  // constructed in, else one device.
  std::shared_ptr<const Strategy> distribute{};
  // Where and how the Estimator runs: model_dir (empty: a new temporary directory, kept
  // after the program ends), tf_random_seed, checkpoint retention, and the cluster
  // (RunConfig::from_environment() under TF_CONFIG). train_distribute is set from the
  // strategy above.
  RunConfig config{};
};

struct FitOptions {
  int epochs = 1;
  // Steps (global batches) per epoch; unset with a Dataset: one pass over it, counted once
  // before the first epoch (the Dataset must be finite); required with an input_fn.
  std::optional<int64_t> steps_per_epoch{};
  // Evaluated at the end of every epoch ("val_" logs).
  std::optional<io::Dataset> validation_data{};
  // Batches per validation; unset: the whole validation input.
  std::optional<int64_t> validation_steps{};
  Callbacks callbacks{};
  int initial_epoch = 0;
  // 0 silent, 1 a progress bar (redrawn in place on a terminal, else one line per epoch),
  // 2 one line per epoch. On the chief only.
  int verbose = 1;
  std::FILE* output = stdout;
};

struct EvaluateOptions {
  std::optional<int64_t> steps{};  // unset: the whole input
  int verbose = 0;
  std::FILE* output = stdout;
};

struct PredictOptions {
  std::optional<int64_t> steps{};  // batches; unset: the whole input
};

class Model {
 public:
  // A functional model from its inputs to one output. Throws InvalidArgumentError when the
  // output does not depend on the inputs alone (naming the missing input).
  Model(KerasTensor input, KerasTensor output, std::string name = "model");
  Model(std::vector<KerasTensor> inputs, KerasTensor output, std::string name = "model");
  virtual ~Model();
  Model(const Model&) = default;
  Model& operator=(const Model&) = default;

  const std::string& name() const;
  // Layers in call order (shared layers once), input layers excluded.
  std::vector<Layer> layers() const;
  // NotFoundError listing the layers' names.
  Layer get_layer(const std::string& name) const;
  bool built() const;
  // Weights of every layer (trainable and not); FailedPreconditionError before built.
  int64_t count_params() const;
  // Keras's table of layers, output shapes and parameter counts.
  std::string summary_string(int line_length = 65) const;
  void summary(std::FILE* out = stdout) const;

  void compile(CompileOptions options);
  bool compiled() const;

  // Trains on global batches (split per replica under a strategy). On a ps task of a
  // ParameterServerStrategy cluster it serves variables instead and does not return (as
  // train_and_evaluate; see serve_parameters). Throws FailedPreconditionError before
  // compile, InvalidArgumentError for bad options and what Estimator::train and evaluate
  // throw.
  History fit(const io::Dataset& x, FitOptions options = {});
  // Trains on the per-replica batches input_fn makes (Keras's
  // distribute_datasets_from_function); steps_per_epoch is required.
  History fit(const InputFn& input_fn, FitOptions options = {});
  // Loss and metrics over the input, from the latest checkpoint; a model never fitted is
  // evaluated on its initial weights, the seeded ones fit would start from (written to
  // model_dir/initial/, outside the checkpoint state, so fit still starts from scratch).
  EvalResult evaluate(const io::Dataset& x, EvaluateOptions options = {});
  // The model's output for every example, stacked along the batch dimension (on the initial
  // weights for a model never fitted, as evaluate).
  Tensor predict(const io::Dataset& x, PredictOptions options = {});

  // Writes `dir`: the architecture and compile settings (model.pbtxt, protobuf text) and
  // the latest checkpoint with its state file, so that load_model(dir) rebuilds it and an
  // Estimator or cadre_ckpt reads it as a model_dir. Replaces what an earlier save wrote
  // there. FailedPreconditionError before the model has weights.
  void save(const std::string& dir) const;

  // The model as the Estimator runs it (model_to_estimator uses it). Predictions are keyed
  // by the output layer's name. FailedPreconditionError before compile.
  ModelFn model_fn() const;
  // The RunConfig compile resolved (model_dir, strategy, seed).
  const RunConfig& config() const;
  const std::string& model_dir() const;
  // Whether this process writes checkpoints and logs (the chief, or a local run).
  bool is_chief() const;

  // The optimizer's learning rate now, and a new one (a constant; fit applies it from the
  // next epoch). FailedPreconditionError before compile.
  double learning_rate() const;
  void set_learning_rate(double learning_rate);

  // Weights by variable name ("dense/kernel"), from the latest checkpoint.
  std::vector<std::string> weight_names() const;
  Tensor get_weight(const std::string& name) const;

  // Set by callbacks to end fit after the current epoch.
  bool stop_training = false;

  struct State;
  const std::shared_ptr<State>& state() const { return state_; }

 protected:
  explicit Model(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// Layers in a stack. Without an InputLayer first, the model is built from the first batch
// of the first Dataset it sees (or by build()).
class Sequential : public Model {
 public:
  explicit Sequential(std::vector<Layer> layers = {}, std::string name = "sequential");
  // Appends a layer; a built model checks its shape at once.
  void add(Layer layer);
  // Builds for examples of this shape (the batch excluded), checking every layer's shape.
  void build(std::vector<int64_t> input_shape, InputOptions options = {});
};

struct LoadOptions {
  // Where the loaded model trains from (a copy of the saved checkpoint goes there); empty:
  // a new temporary directory.
  std::string model_dir{};
};
// The model `dir` holds (Model::save), compiled as it was saved when its loss and metrics
// are built-in ones, under the current StrategyScope. NotFoundError when dir has no model,
// DataLossError when its description cannot be read.
Model load_model(const std::string& dir, LoadOptions options = {});

// An Estimator running `model` (compiled), with the model's RunConfig unless `config` is
// given: checkpoints are interchangeable, so fit can continue what the Estimator trained
// and back. FailedPreconditionError for a model not compiled.
Estimator model_to_estimator(const Model& model, std::optional<RunConfig> config = std::nullopt);

}  // namespace cadre::keras
