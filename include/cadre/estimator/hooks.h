// Hooks: code that runs around every step of a train, evaluate or predict call, as
// TensorFlow's SessionRunHook. The Estimator calls, in order:
//
//   begin(run)                     before anything of the run exists but its config
//   after_create(run)              the checkpoint is chosen and the global step known;
//                                  variables are created (and restored) by the first step
//   before_run(run, ctx)           before each step
//   after_run(run, result, ctx)    after each step, with what it produced
//   end(run)                       after the last step of a run that ended normally (not
//                                  after an error)
//
// Any of them may call ctx.request_stop(); the run stops after the current step (in TRAIN,
// a stop requested in before_run ends the run before its step). An
// exception thrown by a hook ends the run and reaches the caller of train/evaluate/predict.
// Hooks run on the thread of the run; a hook object may serve several runs one after another.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cadre/estimator/model_fn.h"
#include "cadre/estimator/run_config.h"

namespace cadre {

namespace nn {
class VariableStore;
}
namespace io {
class SummaryWriter;
}

// The run a hook is attached to.
class Run {
 public:
  virtual ~Run() = default;
  virtual ModeKeys mode() const = 0;
  virtual const RunConfig& config() const = 0;
  // The global step now (in EVAL and PREDICT, the checkpoint's).
  virtual int64_t global_step() const = 0;
  // The step train() stops at, when it has one.
  virtual std::optional<int64_t> max_steps() const = 0;
  virtual nn::VariableStore& store() = 0;
  // Training summaries (model_dir); null where this task writes none.
  virtual io::SummaryWriter* summary_writer() = 0;
  // TRAIN on the chief: writes a checkpoint of the current state (or, asynchronously, takes
  // a copy to write) and returns its path. Throws FailedPreconditionError elsewhere.
  virtual std::string save_checkpoint() = 0;
  // Blocks until the checkpoints save_checkpoint() returned are published (they are written
  // in the background under RunConfig::async_checkpoint); throws the error of a failed save.
  virtual void wait_for_checkpoints() {}
  // TRAIN, in before_run: a checkpoint of the coming step will be saved, so the workers that
  // step together gather with it what only they know (their input positions and random
  // streams). A checkpoint saved without it holds the chief's alone.
  virtual void announce_checkpoint() {}
  // TRAIN: training ends in a planned stop (cadre/estimator/planned_stop.h) after this step:
  // hooks save what they must (the checkpoint) and leave what can wait for the restarted
  // run (evaluations by saving listeners), as the platform kills the process soon.
  virtual bool planned_stop() const { return false; }
};

class RunContext {
 public:
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }

 private:
  bool stop_requested_ = false;
};

// What one step produced.
struct StepResult {
  int64_t global_step = 0;  // after the step
  // Examples in the step: the global batch of the workers that step together (with
  // parameter servers, this worker's batch).
  int64_t batch_size = 0;
  // The step's loss (TRAIN, EVAL); NaN in PREDICT.
  double loss = 0;
  const EstimatorSpec* spec = nullptr;
  // The named value a hook asks for: "loss", "global_step", or a key of the spec's tensors
  // or predictions. Throws InvalidArgumentError listing the available names.
  Tensor value(const std::string& name) const;
};

class Hook {
 public:
  virtual ~Hook() = default;
  virtual void begin(Run& run) {}
  virtual void after_create(Run& run) {}
  virtual void before_run(Run& run, RunContext& context) {}
  virtual void after_run(Run& run, const StepResult& result, RunContext& context) {}
  virtual void end(Run& run) {}
};

}  // namespace cadre
