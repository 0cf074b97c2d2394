// Estimator: trains, evaluates, predicts with and exports a model given by its model_fn,
// with checkpoints in model_dir at the centre, as tf.estimator.Estimator.
//
//   Estimator estimator(model_fn, config, params);
//   estimator.train(train_input_fn, {.max_steps = 2000});
//   EvalResult metrics = estimator.evaluate(eval_input_fn);
//   auto predictions = estimator.predict(predict_input_fn);
//   while (auto p = predictions.next()) use(p->at("class"));
//
// train() resumes from the newest intact checkpoint of model_dir: variables, optimizer
// slots, global step, random generator and input position, so that a run stopped (or
// killed) and started again with the same command carries on exactly. Variables are
// created by model_fn on the first step and restored as they are created.
//
// An Estimator is used from one thread at a time; each call runs model_fn on the calling
// thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/estimator/checkpoint_saver_hook.h"
#include "cadre/estimator/eval_result.h"
#include "cadre/estimator/hooks.h"
#include "cadre/estimator/model_fn.h"
#include "cadre/estimator/run_config.h"
#include "cadre/io/dataset.h"
#include "cadre/io/input_context.h"
#include "cadre/io/input_fn.h"

namespace cadre {

// Initialise a new model from another model's checkpoint (tf.estimator.WarmStartSettings).
// Used only when model_dir has no checkpoint of its own.
struct WarmStartSettings {
  // A checkpoint file, or a model_dir (its latest checkpoint).
  std::string ckpt_to_initialize_from;
  // ECMAScript regular expression over whole variable names.
  std::string vars_to_warm_start = ".*";
  // New name -> name in the checkpoint.
  std::map<std::string, std::string> var_name_to_prev_var_name;
  // Also take the optimizer slots of the warm-started variables.
  bool include_slots = false;
};

struct TrainArgs {
  // Train this many steps beyond the restored global step, or up to this global step;
  // at most one of the two. Neither: until the input ends or a hook stops.
  std::optional<int64_t> steps{};
  std::optional<int64_t> max_steps{};
  Hooks hooks{};
  CheckpointSaverListeners saving_listeners{};
};

struct EvalArgs {
  // Batches to evaluate; unset or 0: until the input ends.
  std::optional<int64_t> steps{};
  // A checkpoint file; empty: the latest in model_dir.
  std::string checkpoint_path{};
  // Results go to model_dir/eval (empty name) or model_dir/eval_<name>.
  std::string name{};
  Hooks hooks{};
};

// The directory under model_dir that evaluate(name) writes to: "eval" or "eval_<name>".
std::string eval_dir_name(const std::string& name);

struct PredictArgs {
  // Prediction keys to return; empty: all.
  std::vector<std::string> predict_keys{};
  std::string checkpoint_path{};
  Hooks hooks{};
};

// A lazy stream of per-example predictions: batches are read and model_fn run only as
// next() needs them.
class Predictions {
 public:
  struct State;
  explicit Predictions(std::unique_ptr<State> state);
  Predictions(Predictions&&) noexcept;
  Predictions& operator=(Predictions&&) noexcept;
  ~Predictions();
  // The next example's predictions (each a tensor without the batch dimension), or
  // nullopt when the input ends.
  std::optional<std::map<std::string, Tensor>> next();

 private:
  std::unique_ptr<State> state_;
};

class Estimator {
 public:
  // Throws InvalidArgumentError for an invalid config or a missing model_fn.
  Estimator(ModelFn model_fn, RunConfig config, Params params = {},
            std::optional<WarmStartSettings> warm_start_from = std::nullopt);
  ~Estimator();

  // Trains per TrainArgs and ends by saving a checkpoint (the chief). Returns the global step
  // training ended at; returns at once, saying so, when max_steps is already reached. Throws
  // InvalidArgumentError for a bad spec or a checkpoint of another model,
  // NanLossDuringTrainingError on divergence (nothing saved after it).
  int64_t train(const InputFn& input_fn, const TrainArgs& args = {});
  // Evaluates a checkpoint (NotFoundError when there is none) and writes the results as
  // summaries to the eval directory at the checkpoint's step.
  EvalResult evaluate(const InputFn& input_fn, const EvalArgs& args = {});
  // NotFoundError when there is no checkpoint; an unknown predict key is an
  // InvalidArgumentError listing the valid ones (raised by the first next()).
  Predictions predict(const InputFn& input_fn, const PredictArgs& args = {});
  // Writes a self-contained directory that Predictor loads: the model's variables (HDF5)
  // and the prediction signatures, found by running model_fn in PREDICT mode on
  // `serving_features` (a batch of example inputs), from the latest checkpoint or
  // `checkpoint_path`. As TensorFlow's export_saved_model, the export is a new directory
  // under export_dir_base (made when missing) named by the time in seconds
  // (export_dir_base/1700000000), so that exporting again adds an export and never
  // overwrites one. It appears complete or not at all. Returns its path.
  std::string export_model(const std::string& export_dir_base, const io::Features& serving_features,
                           const std::string& checkpoint_path = "") const;

  std::optional<std::string> latest_checkpoint() const;
  // The variables and slots of the latest checkpoint (NotFoundError when none).
  std::vector<std::string> get_variable_names() const;
  Tensor get_variable_value(const std::string& name) const;

  const RunConfig& config() const { return config_; }
  const Params& params() const { return params_; }
  const std::string& model_dir() const { return config_.model_dir; }
  const ModelFn& model_fn() const { return model_fn_; }
  const std::optional<WarmStartSettings>& warm_start_from() const { return warm_start_; }
  // The seed in use (config's tf_random_seed, or the one drawn when it was unset).
  uint64_t seed() const { return seed_; }

 private:
  ModelFn model_fn_;
  RunConfig config_;
  Params params_;
  std::optional<WarmStartSettings> warm_start_;
  uint64_t seed_;
  struct EvalWriters;  // its event files, training's too; copies of an Estimator share them
  std::shared_ptr<EvalWriters> eval_writers_;
};

}  // namespace cadre
