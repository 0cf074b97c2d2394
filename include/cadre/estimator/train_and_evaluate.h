// train_and_evaluate: TensorFlow's tf.estimator.train_and_evaluate. In local mode (no
// cluster) one process trains; right after a checkpoint is saved (once start_delay_secs have
// passed since the start and throttle_secs since the previous evaluation) it evaluates that
// checkpoint and runs the exporters, then goes on training from its state in memory. The
// last checkpoint is always evaluated, also when a hook (early stopping) or the end of the
// input stopped training before max_steps.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/estimator/estimator.h"

namespace cadre {

struct TrainSpec {
  InputFn input_fn;
  // The global step to train to; unset: until the input ends or a hook stops training.
  std::optional<int64_t> max_steps;
  Hooks hooks;

  TrainSpec(InputFn input_fn, std::optional<int64_t> max_steps = std::nullopt, Hooks hooks = {})
      : input_fn(std::move(input_fn)), max_steps(max_steps), hooks(std::move(hooks)) {}
};

// Runs after an evaluation, e.g. to export the model (tf.estimator.Exporter).
class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual const std::string& name() const = 0;
  // Returns the export directory written, or "" when it exported nothing this time.
  virtual std::string export_model(const Estimator& estimator, const std::string& checkpoint_path,
                                   const EvalResult& eval_result, bool is_the_final_export) = 0;
};
using Exporters = std::vector<std::shared_ptr<Exporter>>;

// Which checkpoints an evaluator task evaluates: every one (default; retention keeps each
// until it has been seen), only the newest when it falls behind, or those whose step is a
// multiple of every_k_steps. The final checkpoint is always evaluated.
enum class EvaluatorPolicy { kAll, kLatest, kEveryKSteps };

struct EvalSpec {
  InputFn input_fn;
  // Batches per evaluation; 0: the whole input (TensorFlow's default is 100).
  int64_t steps = 100;
  std::string name;
  Hooks hooks;
  Exporters exporters;
  // Local mode: the first evaluation comes no sooner than this after the start (the
  // evaluator task waits this long before its first look), and evaluations are at least
  // throttle_secs apart (TensorFlow's defaults).
  double start_delay_secs = 120;
  double throttle_secs = 600;
  // The evaluator task (TF_CONFIG type "evaluator").
  EvaluatorPolicy evaluator_policy = EvaluatorPolicy::kAll;
  int64_t every_k_steps = 0;

  EvalSpec(InputFn input_fn, int64_t steps = 100, std::string name = "")
      : input_fn(std::move(input_fn)), steps(steps), name(std::move(name)) {}
};

// What train_and_evaluate did: the last evaluation's results and the exports it wrote.
struct TrainAndEvaluateResult {
  EvalResult final_eval;
  std::vector<std::string> exports;
};

// Trains and evaluates per the estimator's RunConfig role:
// - local (no cluster) or a chief training alone: trains, evaluating as above, and marks the
//   end of training in model_dir (see read_training_finished);
// - evaluator: follows model_dir's checkpoints with a CheckpointWatcher per
//   evaluator_policy, catching up on those already there, resuming after the last step its
//   eval directory records (a restarted evaluator redoes nothing), holding a lease on each
//   so retention keeps it, and returns after evaluating the final checkpoint;
// - several training tasks: they train together under RunConfig.train_distribute, which
//   must be a MultiWorkerMirroredStrategy or ParameterServerStrategy of the cluster
//   (InvalidArgumentError otherwise);
// - a ps task: serves its variables until the process is stopped (it does not return);
//   a cluster with ps tasks needs ParameterServerStrategy (InvalidArgumentError otherwise).
// Throws what train() and evaluate() throw.
TrainAndEvaluateResult train_and_evaluate(Estimator& estimator, const TrainSpec& train_spec,
                                          const EvalSpec& eval_spec);

// What a ps task of a ParameterServerStrategy job runs (train_and_evaluate and
// keras::Model::fit call it there): serves variables at the task's TF_CONFIG address, with
// the cluster's security, until the process is stopped. Does not return; throws
// AbortedError if the server stops, InvalidArgumentError when `config` is not a ps task.
[[noreturn]] void serve_parameters(const RunConfig& config);

// The step at which the chief marked training finished in model_dir (the file
// "training_finished", "training finished at step N"), or nullopt while training runs.
std::optional<int64_t> read_training_finished(const std::string& model_dir,
                                              const std::shared_ptr<Env>& env = nullptr);

}  // namespace cadre
