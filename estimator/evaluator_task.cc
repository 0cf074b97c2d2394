#include "estimator/evaluator_task.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/watcher.h"
#include "cadre/estimator/early_stopping.h"
#include "core/base/strings.h"
#include "estimator/stop_notice.h"
#include "estimator/training_finished.h"

namespace cadre::estimator_internal {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

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

TrainAndEvaluateResult run_evaluator(Estimator& estimator, const TrainSpec& train_spec,
                                     const EvalSpec& eval_spec) {
  const std::string& model_dir = estimator.model_dir();
  if (model_dir.empty()) throw InvalidArgumentError("evaluator: RunConfig.model_dir is empty");
  std::shared_ptr<Env> env = estimator.config().file_system();
  TrainAndEvaluateResult result;
  EvalArgs args = eval_args_of(eval_spec);
  std::string eval_dir = join_path(model_dir, eval_dir_name(eval_spec.name));
  // The durable cursor: the steps this evaluator (or an earlier run of it) recorded.
  auto history = read_eval_history(eval_dir, "loss");
  int64_t cursor = history.empty() ? -1 : history.back().first;
  if (cursor >= 0)
    LOG(INFO) << "evaluator: resuming after step " << cursor << " (" << eval_dir << ")";
  auto final_step = [&] {
    return final_step_of(read_finished_marker(*env, model_dir), train_spec.max_steps);
  };
  // The lease comes first: retention keeps what this evaluator will want from now on, also
  // while it waits out the start delay.
  checkpoint::WatcherOptions options;
  options.after_step = cursor;
  options.protect_unseen = eval_spec.evaluator_policy == EvaluatorPolicy::kAll;
  options.env = env;
  checkpoint::CheckpointWatcher watcher(model_dir, options);
  // A planned stop ends the evaluator wherever it is; the watcher releases its lease on the
  // way out, and the durable cursor tells the restarted one where to go on.
  StopNotice notice(estimator.config().planned_stop);
  auto stop_if_asked = [&] {
    if (!notice.requested()) return;
    throw_planned_stop(str_cat("evaluator: a planned stop (", notice.reason(), ") after step ",
                               watcher.last_step(), "; a restarted evaluator goes on from there"),
                       -1);
  };
  Clock::time_point start = Clock::now() + seconds(eval_spec.start_delay_secs);
  while (Clock::now() < start && !final_step()) {
    stop_if_asked();
    std::this_thread::sleep_for(std::min(Clock::duration(std::chrono::seconds(1)),
                                         start - Clock::now()));
  }
  Clock::time_point next_eval = Clock::now();
  Clock::time_point last_wait_log = Clock::now();
  while (true) {
    stop_if_asked();
    std::optional<int64_t> finished = final_step();
    if (finished && watcher.last_step() >= *finished) break;
    std::unique_ptr<checkpoint::CheckpointReader> reader = watcher.next(/*timeout_seconds=*/1);
    if (!reader) {
      if (Clock::now() - last_wait_log > std::chrono::seconds(30)) {
        LOG(INFO) << "evaluator: waiting for a checkpoint after step " << watcher.last_step()
                  << " in " << model_dir;
        last_wait_log = Clock::now();
      }
      continue;
    }
    int64_t step = reader->global_step();
    finished = final_step();
    if (!wanted(eval_spec, *env, model_dir, step, finished)) {
      LOG(INFO) << "evaluator: skipping step " << step << " per its policy";
      continue;
    }
    // The throttle paces evaluations while training runs; after it, the backlog is
    // evaluated at once.
    while (Clock::now() < next_eval && !(finished = final_step())) {
      stop_if_asked();
      std::this_thread::sleep_for(std::min(Clock::duration(std::chrono::seconds(1)),
                                           next_eval - Clock::now()));
    }
    args.checkpoint_path = reader->path();
    LOG(INFO) << "evaluator: evaluating " << reader->path();
    EvalResult eval;
    try {
      eval = estimator.evaluate(eval_spec.input_fn, args);
    } catch (const Error& error) {
      if (!checkpoint_at_fault(error, *env, *reader)) throw;
      LOG(ERROR) << "evaluator: skipping " << reader->path()
                 << ", which is missing or damaged: " << error.what();
      continue;
    }
    next_eval = Clock::now() + seconds(eval_spec.throttle_secs);
    bool is_final = finished && step >= *finished;
    for (const auto& exporter : eval_spec.exporters) {
      std::string dir = exporter->export_model(estimator, reader->path(), eval, is_final);
      if (!dir.empty()) result.exports.push_back(dir);
    }
    result.final_eval = std::move(eval);
  }
  if (result.final_eval.empty()) {
    // Restarted after the final evaluation: report the recorded one.
    for (const char* tag : {"loss", "accuracy"}) {
      auto recorded = read_eval_history(eval_dir, tag);
      if (!recorded.empty()) {
        result.final_eval.set(tag, recorded.back().second);
        result.final_eval.set("global_step", static_cast<double>(recorded.back().first));
      }
    }
  }
  LOG(INFO) << "evaluator: training finished at step " << final_step().value_or(-1)
            << " and its last checkpoint is evaluated; exiting";
  return result;
}


}  // namespace cadre::estimator_internal
