#include "estimator/evaluator_task.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/watcher.h"
#include "cadre/estimator/early_stopping.h"
#include "core/base/clock.h"
#include "core/base/strings.h"
#include "estimator/stop_notice.h"
#include "estimator/training_finished.h"

namespace cadre::estimator_internal {
namespace {

using Clock = std::chrono::steady_clock;

// Whether `step` is to be evaluated under the policy; the final step always is.
bool wanted(const EvalSpec& spec, Env& env, const std::string& model_dir, int64_t step,
            std::optional<int64_t> final_step) {
  if (final_step && step >= *final_step) return true;
  switch (spec.evaluator_policy) {
    case EvaluatorPolicy::kAll:
      return true;
    case EvaluatorPolicy::kEveryKSteps:
      return step % spec.every_k_steps == 0;
    case EvaluatorPolicy::kLatest: {
      auto files = checkpoint::list_checkpoint_files(env, model_dir);
      return files.empty() || files.back().first <= step;
    }
  }
  return true;
}

// Whether `error`, thrown while evaluating the checkpoint `reader` opened, is the
// checkpoint's fault: it is gone (retention removed it before evaluate() reopened it), or
// its data fails the checksums. An evaluator skips such a checkpoint, as a restore skips it
// for the one before, instead of ending; an error of anything else (the input) ends it.
bool checkpoint_at_fault(const Error& error, Env& env, const checkpoint::CheckpointReader& reader) {
  if (error.code() != ErrorCode::kDataLoss && error.code() != ErrorCode::kNotFound) return false;
  if (!env.file_exists(reader.path())) return true;
  try {
    return !reader.verify().empty();
  } catch (const Error&) {
    return true;
  }
}

}  // namespace

EvalArgs eval_args_of(const EvalSpec& eval_spec) {
  EvalArgs args;
  if (eval_spec.steps > 0) args.steps = eval_spec.steps;
  args.name = eval_spec.name;
  args.hooks = eval_spec.hooks;
  return args;
}

namespace {

// The evaluator's run: a lease on model_dir's checkpoints, each wanted one evaluated (paced
// by the throttle) and exported, until the final step is evaluated.
class EvaluatorRun {
 public:
  EvaluatorRun(Estimator& estimator, const TrainSpec& train_spec, const EvalSpec& eval_spec)
      : estimator_(estimator),
        train_spec_(train_spec),
        eval_spec_(eval_spec),
        env_(estimator.config().file_system()),
        model_dir_(estimator.model_dir()),
        eval_dir_(join_path(model_dir_, eval_dir_name(eval_spec.name))),
        args_(eval_args_of(eval_spec)),
        // The lease comes first: retention keeps what this evaluator will want from now on,
        // also while it waits out the start delay.
        watcher_(model_dir_, watcher_options(eval_spec, recorded_step(eval_dir_), env_)),
        // A planned stop ends the evaluator wherever it is; the watcher releases its lease
        // on the way out, and the durable cursor tells the restarted one where to go on.
        notice_(estimator.config().planned_stop) {}

  TrainAndEvaluateResult run() {
    sleep_until(Clock::now() + from_seconds(eval_spec_.start_delay_secs));
    Clock::time_point last_wait_log = Clock::now();
    while (true) {
      stop_if_asked();
      std::optional<int64_t> finished = final_step();
      if (finished && watcher_.last_step() >= *finished) break;
      std::unique_ptr<checkpoint::CheckpointReader> reader = watcher_.next(/*timeout_seconds=*/1);
      if (!reader) {
        if (Clock::now() - last_wait_log > std::chrono::seconds(30)) {
          LOG(INFO) << "evaluator: waiting for a checkpoint after step " << watcher_.last_step()
                    << " in " << model_dir_;
          last_wait_log = Clock::now();
        }
        continue;
      }
      if (!wanted(eval_spec_, *env_, model_dir_, reader->global_step(), final_step())) {
        LOG(INFO) << "evaluator: skipping step " << reader->global_step() << " per its policy";
        continue;
      }
      // The throttle paces evaluations while training runs; after it, the backlog is
      // evaluated at once.
      sleep_until(next_eval_);
      evaluate(*reader);
    }
    if (result_.final_eval.empty()) report_recorded();
    LOG(INFO) << "evaluator: training finished at step " << final_step().value_or(-1)
              << " and its last checkpoint is evaluated; exiting";
    return result_;
  }

 private:
  // The durable cursor: the last step this evaluator (or an earlier run of it) recorded.
  static int64_t recorded_step(const std::string& eval_dir) {
    auto history = read_eval_history(eval_dir, "loss");
    int64_t cursor = history.empty() ? -1 : history.back().first;
    if (cursor >= 0) {
      LOG(INFO) << "evaluator: resuming after step " << cursor << " (" << eval_dir << ")";
    }
    return cursor;
  }

  static checkpoint::WatcherOptions watcher_options(const EvalSpec& eval_spec, int64_t cursor,
                                                    std::shared_ptr<Env> env) {
    checkpoint::WatcherOptions options;
    options.after_step = cursor;
    options.protect_unseen = eval_spec.evaluator_policy == EvaluatorPolicy::kAll;
    options.env = std::move(env);
    return options;
  }

  std::optional<int64_t> final_step() const {
    return final_step_of(read_finished_marker(*env_, model_dir_), train_spec_.max_steps);
  }

  void stop_if_asked() {
    if (!notice_.requested()) return;
    throw_planned_stop(str_cat("evaluator: a planned stop (", notice_.reason(), ") after step ",
                               watcher_.last_step(), "; a restarted evaluator goes on from there"),
                       -1);
  }

  // Sleeps until `until`, or until training has finished, heeding a planned stop.
  void sleep_until(Clock::time_point until) {
    while (Clock::now() < until && !final_step()) {
      stop_if_asked();
      std::this_thread::sleep_for(
          std::min(Clock::duration(std::chrono::seconds(1)), until - Clock::now()));
    }
  }

  // Evaluates and exports the checkpoint; one that is missing or damaged is skipped.
  void evaluate(const checkpoint::CheckpointReader& reader) {
    args_.checkpoint_path = reader.path();
    LOG(INFO) << "evaluator: evaluating " << reader.path();
    EvalResult eval;
    try {
      eval = estimator_.evaluate(eval_spec_.input_fn, args_);
    } catch (const Error& error) {
      if (!checkpoint_at_fault(error, *env_, reader)) throw;
      LOG(ERROR) << "evaluator: skipping " << reader.path()
                 << ", which is missing or damaged: " << error.what();
      return;
    }
    next_eval_ = Clock::now() + from_seconds(eval_spec_.throttle_secs);
    std::optional<int64_t> finished = final_step();
    bool is_final = finished && reader.global_step() >= *finished;
    for (const auto& exporter : eval_spec_.exporters) {
      std::string dir = exporter->export_model(estimator_, reader.path(), eval, is_final);
      if (!dir.empty()) result_.exports.push_back(dir);
    }
    result_.final_eval = std::move(eval);
  }

  // Restarted after the final evaluation: the recorded one is the result.
  void report_recorded() {
    for (const char* tag : {"loss", "accuracy"}) {
      auto recorded = read_eval_history(eval_dir_, tag);
      if (!recorded.empty()) {
        result_.final_eval.set(tag, recorded.back().second);
        result_.final_eval.set("global_step", static_cast<double>(recorded.back().first));
      }
    }
  }

  Estimator& estimator_;
  const TrainSpec& train_spec_;
  const EvalSpec& eval_spec_;
  const std::shared_ptr<Env> env_;
  const std::string model_dir_;
  const std::string eval_dir_;
  EvalArgs args_;
  checkpoint::CheckpointWatcher watcher_;
  StopNotice notice_;
  Clock::time_point next_eval_ = Clock::now();
  TrainAndEvaluateResult result_;
};

}  // namespace

TrainAndEvaluateResult run_evaluator(Estimator& estimator, const TrainSpec& train_spec,
                                     const EvalSpec& eval_spec) {
  if (estimator.model_dir().empty()) {
    throw InvalidArgumentError("evaluator: RunConfig.model_dir is empty");
  }
  return EvaluatorRun(estimator, train_spec, eval_spec).run();
}

}  // namespace cadre::estimator_internal
