// Estimator::train: the phases of a training run (its loop is in estimator/train_loop.h, the
// Run its hooks see in estimator/train_run.h).
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/variables.h"
#include "cadre/estimator/basic_hooks.h"
#include "cadre/estimator/checkpoint_saver_hook.h"
#include "cadre/estimator/estimator.h"
#include "cadre/estimator/profiler_hook.h"
#include "cadre/io/summary_writer.h"
#include "cadre/runtime/threading.h"
#include "cadre/strategies/one_device_strategy.h"
#include "core/base/strings.h"
#include "core/runtime/thread_tuner.h"
#include "estimator/eval_writers.h"
#include "estimator/group_steps.h"
#include "estimator/model_session.h"
#include "estimator/stop_notice.h"
#include "estimator/train_loop.h"
#include "estimator/train_run.h"
#include "estimator/training_input.h"
#include "strategies/strategy_extended.h"

namespace cadre {
namespace {

using estimator_internal::GroupStep;
using estimator_internal::StopNotice;
using estimator_internal::throw_planned_stop;
using estimator_internal::TrainLoop;
using estimator_internal::TrainRun;

std::shared_ptr<const checkpoint::CheckpointReader> open_warm_start_checkpoint(
    const WarmStartSettings& ws) {
  const std::string& from = ws.ckpt_to_initialize_from;
  if (from.empty()) {
    throw InvalidArgumentError("WarmStartSettings.ckpt_to_initialize_from is empty");
  }
  // A file, or a TensorFlow checkpoint's prefix (model.ckpt-N beside model.ckpt-N.index);
  // a directory is a model_dir.
  std::error_code error;
  if (!std::filesystem::is_directory(from, error)) return checkpoint::CheckpointReader::open(from);
  std::shared_ptr<const checkpoint::CheckpointReader> reader = checkpoint::open_latest_intact(from);
  if (!reader) {
    throw NotFoundError(str_cat("warm start: no checkpoint in ", from));
  }
  return reader;
}

void check_train_args(const RunConfig& config, const TrainArgs& args) {
  if (config.model_dir.empty()) throw InvalidArgumentError("train: RunConfig.model_dir is empty");
  if (args.steps && args.max_steps) {
    throw InvalidArgumentError(str_cat("train: steps (", *args.steps, ") and max_steps (",
                                       *args.max_steps, ") are both set; set at most one"));
  }
  if ((args.steps && *args.steps <= 0) || (args.max_steps && *args.max_steps <= 0)) {
    throw InvalidArgumentError("train: steps and max_steps must be positive");
  }
}

// The chief's manager of model_dir; null on the other tasks.
std::unique_ptr<checkpoint::CheckpointManager> chief_checkpoint_manager(const RunConfig& config) {
  if (!config.is_chief) return nullptr;
  checkpoint::CheckpointManagerOptions options;
  options.keep_checkpoint_max = config.keep_checkpoint_max;
  options.keep_checkpoint_every_n_hours = config.keep_checkpoint_every_n_hours;
  options.async_save = config.async_checkpoint;
  // Training writes variables only through optimizers and Variable::assign, which finish a
  // deferred copy first.
  options.copy_in_background = config.async_checkpoint;
  options.durable_every_secs = config.checkpoint_durable_secs;
  options.env = config.file_system();
  return std::make_unique<checkpoint::CheckpointManager>(config.model_dir, options);
}

// Every training task starts at the chief's step (with the chief's variables, through
// create_variables), also one that cannot see the chief's checkpoints; and all decide from
// that step whether anything is left to train, so that none waits for a chief that is done.
int64_t chiefs_start_step(const Strategy& strategy, const checkpoint::CheckpointReader* resume) {
  int64_t start_step = resume ? resume->global_step() : 0;
  int64_t chief_step = strategy.extended().broadcast_from_chief(start_step);
  if (chief_step != start_step) {
    LOG(WARNING) << "this worker's model_dir is at step " << start_step
                 << "; taking the chief's global step " << chief_step
                 << " (and the chief's variables)";
  }
  return chief_step;
}

struct WarmStart {
  std::shared_ptr<const checkpoint::CheckpointReader> reader;  // null: none
  checkpoint::CheckpointSourceFn names;
};

WarmStart open_warm_start(const std::optional<WarmStartSettings>& settings) {
  if (!settings) return {};
  WarmStart warm;
  warm.reader = open_warm_start_checkpoint(*settings);
  checkpoint::WarmStartOptions options;
  options.vars_to_warm_start = settings->vars_to_warm_start;
  options.var_name_to_prev_var_name = settings->var_name_to_prev_var_name;
  options.include_slots = settings->include_slots;
  warm.names = checkpoint::warm_start_names(options);
  LOG(INFO) << "warm-starting from " << warm.reader->path();
  return warm;
}

// The hooks of a training run, in the order they run: NaN first, so that no later hook (the
// saver) sees a diverged state; the caller's; then the chief's logging, summaries and
// checkpoints; the profiler last.
Hooks training_hooks(const RunConfig& config, const TrainArgs& args,
                     std::optional<int64_t> max_steps) {
  Hooks hooks{std::make_shared<NanTensorHook>()};
  hooks.insert(hooks.end(), args.hooks.begin(), args.hooks.end());
  if (max_steps) hooks.push_back(StopAtStepHook::at_step(*max_steps));
  if (config.is_chief) {
    hooks.push_back(std::make_shared<StepCounterHook>(config.log_step_count_steps));
    if (config.progress_line == RunConfig::ProgressLine::kOn ||
        (config.progress_line == RunConfig::ProgressLine::kAuto && ::isatty(STDERR_FILENO))) {
      hooks.push_back(std::make_shared<ProgressLineHook>());
    }
    if (config.save_summary_steps > 0) {
      hooks.push_back(std::make_shared<SummarySaverHook>(config.save_summary_steps));
    }
    std::optional<int64_t> save_steps = config.save_checkpoints_steps;
    std::optional<double> save_secs;
    if (!save_steps) save_secs = config.checkpoint_secs();
    hooks.push_back(
        std::make_shared<CheckpointSaverHook>(save_steps, save_secs, args.saving_listeners));
  }
  if (config.profile_every_n_steps > 0 || config.profile_trace_steps) {
    hooks.push_back(std::make_shared<ProfilerHook>(ProfilerOptions{
        config.profile_every_n_steps, config.profile_trace_steps, "", config.is_chief}));
  }
  return hooks;
}

// After the loop: the hooks' end (the last checkpoint), that checkpoint made durable, and a
// planned stop that ended the run early said by PlannedStopError.
int64_t finish_training(const Estimator& estimator, TrainRun& run, Hooks& hooks,
                        checkpoint::CheckpointManager* manager, StopNotice& notice,
                        std::optional<int64_t> max_steps, const Strategy& strategy) {
  for (const auto& hook : hooks) hook->end(run);
  if (manager) manager->close();  // the last checkpoint durable
  run.flush_summaries();
  if (manager && run.planned_stop() && notice.requested()) {
    LOG(INFO) << "a planned stop: the checkpoint of step " << run.global_step() << " is durable "
              << notice.seconds_since_notice() << " s after " << notice.reason();
  }
  if (!run.planned_stop() || (max_steps && run.global_step() >= *max_steps)) {
    return run.global_step();
  }
  std::string saved =
      manager ? str_cat("; its checkpoint is ", estimator.latest_checkpoint().value_or("none"))
              : "";
  std::string why = notice.requested()                   ? notice.reason()
                    : strategy.num_workers_in_sync() > 1 ? "of a worker stepping with this one"
                                                         : "of the job, told by a ps task";
  throw_planned_stop(str_cat("a planned stop (", why, ") at step ", run.global_step(), saved,
                             "; the same command resumes from it"),
                     run.global_step());
}

}  // namespace

// A function-try-block: an error leaving train() leaves the workers this one steps with, so
// that they fail now instead of waiting for it, even if the caller catches it and keeps the
// strategy.
int64_t Estimator::train(const InputFn& input_fn, const TrainArgs& args) try {
  check_train_args(config_, args);
  // Installed first: a notice that comes while the run starts ends it before its first step.
  StopNotice notice(config_.planned_stop);
  std::unique_ptr<checkpoint::CheckpointManager> manager = chief_checkpoint_manager(config_);
  std::shared_ptr<const checkpoint::CheckpointReader> resume =
      checkpoint::open_latest_intact(config_.model_dir);
  std::shared_ptr<const Strategy> strategy = config_.train_distribute;
  if (!strategy) strategy = OneDeviceStrategy::create();
  const int64_t start_step = chiefs_start_step(*strategy, resume.get());
  std::optional<int64_t> max_steps = args.max_steps;
  if (args.steps) max_steps = start_step + *args.steps;
  if (max_steps && start_step >= *max_steps) {
    LOG(INFO) << "global step " << start_step << " has already reached max_steps " << *max_steps
              << "; not training";
    return start_step;
  }
  WarmStart warm = resume ? WarmStart{} : open_warm_start(warm_start_);
  if (resume) {
    LOG(INFO) << "resuming from " << resume->path() << " at step " << resume->global_step();
  }
  std::function<io::SummaryWriter*()> open_writer;
  if (manager) {
    // The Estimator's writer of model_dir, kept for its life as TensorFlow's FileWriterCache
    // keeps one per directory: train() called again (as each epoch of a Keras fit does)
    // writes on in the same event file.
    open_writer = [writers = eval_writers_, dir = config_.model_dir, env = config_.file_system()] {
      return &writers->writer(dir, env);
    };
  }
  TrainRun run(*this, strategy, start_step, resume, warm.reader, warm.names, manager.get(),
               max_steps, std::move(open_writer));
  DistributedIterator iterator =
      estimator_internal::training_input(config_, input_fn, *strategy, resume.get(), run);
  run.set_iterator(&iterator, [&] {
    std::shared_ptr<const checkpoint::CheckpointReader> latest =
        checkpoint::open_latest_intact(config_.model_dir);
    iterator = estimator_internal::training_input(config_, input_fn, *strategy, latest.get(), run);
  });
  // Hooks see the logical variables (replica 0's) and generator, as model_fn does.
  nn::VariableStoreScope store_scope(run.store());
  GeneratorScope generator_scope(run.generator());
  Hooks hooks = training_hooks(config_, args, max_steps);
  for (const auto& hook : hooks) hook->begin(run);
  for (const auto& hook : hooks) hook->after_create(run);
  TrainLoop loop(config_, run, iterator, hooks, *strategy, notice, [&] {
    return estimator_internal::no_rows_from_start(config_, input_fn, *strategy, run);
  });
  loop.run();
  // A parameter-server job's input ends when every worker's has (theirs may be behind).
  if (loop.input_ended() && run.positions_on_ps()) {
    run.end_input_on_ps(max_steps, [&notice] { return notice.requested(); });
  }
  return finish_training(*this, run, hooks, manager.get(), notice, max_steps, *strategy);
} catch (const PlannedStopError&) {
  throw;  // not a failure: the workers stepping with this one stopped after the same step
} catch (...) {
  std::string what = "an exception that is not a std::exception";
  try {
    throw;
  } catch (const std::exception& error) {
    what = error.what();
  } catch (...) {
  }
  if (config_.train_distribute) config_.train_distribute->extended().leave_after_error(what);
  throw;
}

}  // namespace cadre
