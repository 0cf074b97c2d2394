// Estimator::train: the phases of a training run and its loop (the Run its hooks see is in
// estimator/train_run.h).
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
#include "estimator/train_run.h"
#include "estimator/training_input.h"
#include "strategies/strategy_extended.h"

namespace cadre {
namespace {

using estimator_internal::GroupStep;
using estimator_internal::StopNotice;
using estimator_internal::throw_planned_stop;
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

// Examples in a replica's batch: the labels' first dimension, else a feature's.
int64_t batch_rows(const io::Element& element) {
  if (element.labels.defined() && element.labels.rank() > 0) return element.labels.shape()[0];
  for (const auto& [name, feature] : element.features) {
    if (feature.rank() > 0) return feature.shape()[0];
  }
  return 1;
}

// The line a training run starts with: the strategy, its replicas and devices, the batch
// per replica and how gradients are combined.
std::string plan_line(const Strategy& strategy, const PerReplica<io::Element>& batch,
                      bool deterministic) {
  int64_t smallest = batch_rows(batch[0]), largest = smallest, local = 0;
  for (size_t r = 0; r < batch.size(); ++r) {
    int64_t rows = batch_rows(batch[r]);
    smallest = std::min(smallest, rows);
    largest = std::max(largest, rows);
    local += rows;
  }
  std::string per_replica =
      smallest == largest ? std::to_string(smallest) : str_cat(smallest, "-", largest);
  std::string workers =
      strategy.num_workers() > 1 ? str_cat(" on each of ", strategy.num_workers(), " workers") : "";
  return str_cat("strategy ", strategy.name(), ": ", strategy.topology(), workers, "; batch ",
                 per_replica, " per replica (", local * strategy.num_workers_in_sync(),
                 " per step); gradients: ",
                 deterministic ? "summed per input shard, in shard order (deterministic)"
                               : strategy.extended().reduction());
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

// The steps of a training run, until a hook, the input, or a planned stop ends them.
class TrainLoop {
 public:
  TrainLoop(const RunConfig& config, TrainRun& run, DistributedIterator& iterator, Hooks& hooks,
            const Strategy& strategy, StopNotice& notice)
      : config_(config),
        run_(run),
        iterator_(iterator),
        hooks_(hooks),
        strategy_(strategy),
        notice_(notice) {
    if (config.intra_op_autotune && !config.deterministic && strategy.num_workers_in_sync() == 1) {
      tuner_.emplace(intra_op_threads_budget());
    }
  }

  // Whether the loop ended at the end of this worker's input.
  bool input_ended() const { return input_ended_; }

  void run() {
    EstimatorSpec spec;
    std::optional<PerReplica<io::Element>> held;  // a late joiner's first batch
    bool finished = false;                        // by the others, before this one joined
    if (strategy_.extended().joining_late()) {
      held = step_alone_then_join(run_, iterator_, spec, finished);
    }
    while (!finished) {
      RunContext context;
      if (heed_notice()) break;
      for (const auto& hook : hooks_) hook->before_run(run_, context);
      if (context.stop_requested()) break;  // before the step (a coordinator-mode worker's gate)
      if (!held) run_.before_batch();
      std::optional<PerReplica<io::Element>> batch = held ? std::move(held) : iterator_.next();
      held.reset();
      if (!batch || static_cast<int>(batch->size()) < strategy_.num_local_replicas()) {
        LOG(INFO) << "the training input ended at step " << run_.global_step();
        input_ended_ = true;
        break;
      }
      if (first_) LOG(INFO) << plan_line(strategy_, *batch, config_.deterministic);
      GroupStep stepped = step_in_group(run_, *batch, spec);
      if (stepped.finished) break;
      if (!stepped.result) continue;  // another member finished it: its hooks ran there
      StepResult& result = *stepped.result;
      time_step();
      // Every worker that steps with this one hears a planned stop after the same step.
      if (stepped.signals & StrategyExtended::kStop) run_.begin_planned_stop();
      if (first_) add_spec_hooks(spec);
      first_ = false;
      for (const auto& hook : hooks_) hook->after_run(run_, result, context);
      if (context.stop_requested() || run_.planned_stop()) break;
    }
  }

 private:
  // A planned stop the notice asks for: the end of the loop now when no other worker steps
  // with this one, else a signal that ends every worker's loop after the next step. True to
  // end the loop now.
  bool heed_notice() {
    if (stop_raised_ || !notice_.requested()) return false;
    stop_raised_ = true;
    const bool in_sync = strategy_.num_workers_in_sync() > 1;
    LOG(WARNING) << notice_.reason() << ": a planned stop after step " << run_.global_step()
                 << (in_sync ? " and one more, which tells the workers stepping with this one" : "")
                 << (config_.is_chief ? "; then a checkpoint of it" : "");
    if (in_sync) {
      strategy_.extended().raise_step_signal(StrategyExtended::kStop);
      return false;
    }
    strategy_.extended().announce_planned_stop();
    run_.begin_planned_stop();
    return true;
  }

  // From one step's end to the next's: waiting for input counts (a compute thread more can
  // starve the input pipeline's threads).
  void time_step() {
    if (!tuner_) return;
    auto now = std::chrono::steady_clock::now();
    if (!first_) tuner_->step_finished(std::chrono::duration<double>(now - last_step_end_).count());
    last_step_end_ = now;
  }

  // A spec's hooks join when the first step has shown them.
  void add_spec_hooks(const EstimatorSpec& spec) {
    if (spec.training_hooks.empty()) return;
    for (const auto& hook : spec.training_hooks) {
      hook->begin(run_);
      hook->after_create(run_);
    }
    hooks_.insert(hooks_.begin() + 1, spec.training_hooks.begin(), spec.training_hooks.end());
  }

  const RunConfig& config_;
  TrainRun& run_;
  DistributedIterator& iterator_;
  Hooks& hooks_;
  const Strategy& strategy_;
  StopNotice& notice_;
  std::optional<ThreadTuner> tuner_;
  std::chrono::steady_clock::time_point last_step_end_;
  bool first_ = true;
  bool stop_raised_ = false;
  bool input_ended_ = false;
};

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
  TrainLoop loop(config_, run, iterator, hooks, *strategy, notice);
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
