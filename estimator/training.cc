// Estimator::train: the training loop and the Run its hooks see.
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <regex>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
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
#include "estimator/model_session.h"
#include "estimator/stop_notice.h"
#include "estimator/worker_states.h"
#include "strategies/strategy_extended.h"

namespace cadre {

namespace {

// The trainable variables the train op updates.
std::vector<nn::Variable*> variables_to_train(const nn::VariableStore& store, const TrainOp& op) {
  std::vector<nn::Variable*> all = store.trainable_variables();
  if (op.variables.empty()) return all;
  std::regex pattern;
  try {
    pattern = std::regex(op.variables, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw InvalidArgumentError(str_cat("TrainOp.variables '", op.variables,
                                       "' is not a valid regular expression: ", e.what()));
  }
  std::vector<nn::Variable*> chosen;
  for (nn::Variable* v : all) {
    if (std::regex_match(v->name(), pattern)) chosen.push_back(v);
  }
  if (chosen.empty()) {
    throw InvalidArgumentError(str_cat("TrainOp.variables '", op.variables,
                                       "' matches none of the ", all.size(),
                                       " trainable variables"));
  }
  return chosen;
}

// The generator's name in checkpoints for a replica of the job.
std::string generator_name(int global_replica) {
  return global_replica == 0 ? std::string(estimator_internal::kGlobalGenerator)
                             : str_cat("replica_", global_replica);
}

// The random generator of each replica: replica r draws from stream r of the seed, so that
// replica 0 of any strategy draws what a single device would.
std::vector<Generator> replica_generators(uint64_t seed, const Strategy& strategy,
                                          const checkpoint::CheckpointReader* resume) {
  std::map<std::string, Generator::State> saved;
  if (resume) saved = resume->rng_states(/*verify=*/false);
  std::vector<Generator> generators;
  for (int r = 0; r < strategy.num_local_replicas(); ++r) {
    int global = strategy.worker_index() * strategy.num_local_replicas() + r;
    auto it = saved.find(generator_name(global));
    generators.emplace_back(
        it != saved.end() ? it->second : Generator(seed, static_cast<uint64_t>(global)).state());
  }
  return generators;
}

class TrainRun : public Run {
 public:
  TrainRun(const Estimator& estimator, std::shared_ptr<const Strategy> strategy, int64_t start_step,
           std::shared_ptr<const checkpoint::CheckpointReader> resume,
           std::shared_ptr<const checkpoint::CheckpointReader> warm,
           checkpoint::CheckpointSourceFn warm_names, checkpoint::CheckpointManager* manager,
           std::optional<int64_t> max_steps, std::function<io::SummaryWriter*()> open_writer)
      : estimator_(estimator),
        strategy_(std::move(strategy)),
        manager_(manager),
        open_writer_(std::move(open_writer)),
        max_steps_(max_steps),
        global_step_(start_step),
        // Warm start takes variables only: the new run draws from its own seed.
        generators_(replica_generators(estimator.seed(), *strategy_, resume.get())) {
    nn::VariableCreator creator = nn::default_variable_creator;
    if (resume) {
      // A resumed checkpoint was verified whole when it was chosen.
      creator = checkpoint::restoring_creator(resume, checkpoint::same_names(), /*verify=*/false);
    } else if (warm) {
      creator = checkpoint::restoring_creator(warm, std::move(warm_names), /*verify=*/true);
    }
    variables_ = strategy_->create_variables(estimator.seed(), creator);
  }

  ModeKeys mode() const override { return ModeKeys::kTrain; }
  const RunConfig& config() const override { return estimator_.config(); }
  int64_t global_step() const override { return global_step_; }
  std::optional<int64_t> max_steps() const override { return max_steps_; }
  nn::VariableStore& store() override { return variables_->primary(); }
  // Opened when first asked for (the hooks ask after a step), so that a run refused at its
  // start (input that cannot be read, a batch too large) leaves no event file behind.
  io::SummaryWriter* summary_writer() override {
    if (!writer_ && open_writer_) writer_ = open_writer_();
    return writer_;
  }
  void flush_summaries() {
    if (writer_) writer_->flush();
  }
  Generator& generator() { return generators_[0]; }

  // This worker's input position and its replicas' generators.
  estimator_internal::WorkerState own_state() {
    estimator_internal::WorkerState state;
    if (iterator_) state.input = iterator_->save();
    for (size_t r = 0; r < generators_.size(); ++r) {
      int global =
          strategy_->worker_index() * strategy_->num_local_replicas() + static_cast<int>(r);
      state.generators[generator_name(global)] = generators_[r].state();
    }
    return state;
  }

  std::string save_checkpoint() override {
    if (!manager_) {
      throw FailedPreconditionError("only the chief saves checkpoints of a training run");
    }
    checkpoint::CheckpointData data;
    data.global_step = global_step_;
    std::shared_ptr<const nn::VariableStore> logical =
        strategy_->extended().variables_to_save(*variables_);
    checkpoint::add_variables(*logical, &data);
    estimator_internal::add_worker_state(0, own_state(), &data);
    if (strategy_->num_workers_in_sync() > 1) {
      if (gathered_step_ == global_step_) {
        for (size_t w = 0; w < gathered_.size(); ++w) {
          estimator_internal::add_worker_state(static_cast<int>(w) + 1, gathered_[w], &data);
        }
      } else {
        LOG(WARNING) << "the checkpoint of step " << global_step_
                     << " holds the chief's input position only (it was not announced)";
      }
    }
    if (attributes_.empty()) {  // the same for every save of the run (and not free to build)
      estimator_internal::set_input_pipelines(strategy_->num_workers(), &data);
      data.attributes["strategy"] = strategy_->name();
      data.attributes["topology"] =
          str_cat(strategy_->num_workers(), " worker(s), ", strategy_->topology(), " each");
      attributes_ = data.attributes;
    }
    data.attributes = attributes_;
    return manager_->save(std::move(data));
  }

  void wait_for_checkpoints() override {
    if (manager_) manager_->wait();
  }

  void set_iterator(DistributedIterator* iterator) { iterator_ = iterator; }

  void announce_checkpoint() override {
    strategy_->extended().raise_step_signal(StrategyExtended::kCheckpoint);
    // The input's position, taken after this step's batch, is the checkpoint's.
    if (iterator_) iterator_->prepare_save();
    if (manager_) manager_->prepare_save();
  }

  // After every step: the step signals any worker that steps with this one raised (this
  // worker's own, where none does). When the chief announced a checkpoint of this step, or
  // a worker a planned stop after it, every worker hands the chief its input position and
  // random streams.
  unsigned take_step_signals() {
    unsigned heard = strategy_->extended().take_step_signal();
    if (strategy_->num_workers_in_sync() <= 1 || heard == 0) return heard;
    std::vector<std::string> all = strategy_->extended().all_gather_bytes(
        estimator_internal::encode_worker_state(own_state()));
    if (!manager_) return heard;
    gathered_.clear();
    for (size_t w = 1; w < all.size(); ++w) {
      gathered_.push_back(
          estimator_internal::decode_worker_state(all[w], str_cat("the state of worker ", w)));
    }
    gathered_step_ = global_step_;
    return heard;
  }

  bool planned_stop() const override { return planned_stop_; }
  void begin_planned_stop() { planned_stop_ = true; }

  // variables_to_train, chosen again only when the store's trainable variables change (the
  // regular expression is not matched against every name at every step). Replicas call it
  // concurrently.
  std::vector<nn::Variable*> chosen_variables(const nn::VariableStore& store, const TrainOp& op) {
    if (op.variables.empty()) return store.trainable_variables();
    size_t trainable = store.trainable_variables().size();
    MutexLock lock(chosen_mutex_);
    Chosen& chosen = chosen_[{&store, op.variables}];
    if (chosen.trainable != trainable) {
      chosen.variables = variables_to_train(store, op);
      chosen.trainable = trainable;
    }
    return chosen.variables;
  }

  // One step on the replicas' inputs; returns its result (replica 0's spec stays alive in
  // *spec). The loss reported is the replicas' losses averaged by batch size, as the loss of
  // the global batch.
  StepResult step(const PerReplica<io::Element>& inputs, EstimatorSpec* spec) {
    using estimator_internal::ReplicaOutput;
    PerReplica<ReplicaOutput> steps = strategy_->run<ReplicaOutput>(
        *variables_,
        [&](ReplicaContext& ctx) {
          const io::Element& batch = inputs[ctx.replica_id()];
          ReplicaOutput out;
          out.batch_size = estimator_internal::batch_size_of(batch.features, batch.labels);
          GradientTape tape;
          profiler::Phases phase("forward");
          out.spec = estimator_.model_fn()(batch.features, batch.labels, ModeKeys::kTrain,
                                           estimator_.params());
          out.spec.validate(ModeKeys::kTrain);
          std::vector<nn::Variable*> variables = chosen_variables(ctx.store(), out.spec.train_op);
          phase.next("backward");
          // Across workers the loss and scalar summaries logged are the job's, averaged by
          // batch size in the gradients' reduction.
          std::vector<double> means;
          const bool job_wide = strategy_->num_workers_in_sync() > 1;
          if (job_wide) {
            means.push_back(out.spec.loss.item<double>());
            for (const auto& [tag, value] : out.spec.scalar_summaries) {
              means.push_back(value.item<double>());
            }
          }
          // The gradients reach the other workers while the backward pass runs, where the
          // strategy can; minimize's own phases are the update and the all-reduce.
          ctx.minimize(tape, out.spec.loss, *out.spec.train_op.optimizer,
                       static_cast<double>(out.batch_size), variables, job_wide ? &means : nullptr);
          out.loss = job_wide ? means[0] : out.spec.loss.item<double>();
          if (job_wide) {
            size_t i = 1;
            for (auto& [tag, value] : out.spec.scalar_summaries) value = Tensor::scalar(means[i++]);
          }
          return out;
        },
        &generators_);
    global_step_ = strategy_->extended().global_step_after(*variables_, global_step_);
    StepResult result = estimator_internal::combine_replicas(steps, global_step_);
    *spec = std::move(steps[0].spec);
    // Summaries describe the global batch: each scalar averaged over the replicas by their
    // batch sizes, not replica 0's value.
    if (steps.size() > 1) {
      for (auto& [tag, value] : spec->scalar_summaries) {
        double sum = 0;
        for (const ReplicaOutput& r : steps) {
          if (&r == &steps[0]) {
            sum += value.item<double>() * static_cast<double>(r.batch_size);
            continue;
          }
          auto it = r.spec.scalar_summaries.find(tag);
          if (it == r.spec.scalar_summaries.end()) {
            throw InvalidArgumentError(str_cat("scalar summary '", tag,
                                               "' is missing on a replica: "
                                               "model_fn must return the same summaries on each"));
          }
          const Tensor& v = it->second;
          sum += v.item<double>() * static_cast<double>(r.batch_size);
        }
        value = Tensor::scalar(sum / static_cast<double>(result.batch_size));
      }
    }
    result.spec = spec;
    result.batch_size *= strategy_->num_workers_in_sync();
    return result;
  }

 private:
  const Estimator& estimator_;
  std::shared_ptr<const Strategy> strategy_;
  checkpoint::CheckpointManager* manager_;
  std::optional<int64_t> max_steps_;
  int64_t global_step_;
  std::vector<Generator> generators_;
  std::unique_ptr<DistributedVariables> variables_;
  std::function<io::SummaryWriter*()> open_writer_;  // null: this run writes no summaries
  io::SummaryWriter* writer_ = nullptr;               // the Estimator's, once opened
  DistributedIterator* iterator_ = nullptr;
  std::vector<estimator_internal::WorkerState> gathered_;  // the other workers', on the chief
  int64_t gathered_step_ = -1;
  bool planned_stop_ = false;
  std::map<std::string, std::string> attributes_;  // of every checkpoint this run saves
  struct Chosen {
    size_t trainable = 0;
    std::vector<nn::Variable*> variables;
  };
  Mutex chosen_mutex_;
  std::map<std::pair<const nn::VariableStore*, std::string>, Chosen> chosen_
      CADRE_GUARDED_BY(chosen_mutex_);
};

// Restores this worker's input position unless the checkpoint has none for it or the
// pipeline changed since, in which case the input starts over (TensorFlow never restores it
// at all).
void restore_input(DistributedIterator& iterator, const checkpoint::CheckpointReader& reader,
                   const Strategy& strategy) {
  if (reader.iterator_state(/*verify=*/false).empty()) return;
  std::string why;
  std::optional<io::IteratorState> state = estimator_internal::input_state_of(
      reader, strategy.worker_index(), strategy.num_workers(), &why);
  if (!state) {
    LOG(WARNING) << "worker " << strategy.worker_index() << ": " << why;
    return;
  }
  try {
    iterator.restore(*state);
  } catch (const InvalidArgumentError& error) {
    LOG(WARNING) << "the input pipeline differs from the one checkpointed in " << reader.path()
                 << " (" << error.what() << "); reading the input from its start";
  }
}

std::shared_ptr<const checkpoint::CheckpointReader> open_warm_start(const WarmStartSettings& ws) {
  const std::string& from = ws.ckpt_to_initialize_from;
  if (from.empty()) {
    throw InvalidArgumentError("WarmStartSettings.ckpt_to_initialize_from is empty");
  }
  if (checkpoint::checkpoint_step(from.substr(from.find_last_of('/') + 1), "model.ckpt") ||
      from.ends_with(".h5")) {
    return checkpoint::CheckpointReader::open(from);
  }
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
std::string plan_line(const Strategy& strategy, const PerReplica<io::Element>& batch) {
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
                 " per step); gradients: ", strategy.extended().reduction());
}

}  // namespace

// A function-try-block: an error leaving train() leaves the workers this one steps with, so
// that they fail now instead of waiting for it, even if the caller catches it and keeps the
// strategy.
int64_t Estimator::train(const InputFn& input_fn, const TrainArgs& args) try {
  if (config_.model_dir.empty()) throw InvalidArgumentError("train: RunConfig.model_dir is empty");
  if (args.steps && args.max_steps) {
    throw InvalidArgumentError(str_cat("train: steps (", *args.steps, ") and max_steps (",
                                       *args.max_steps, ") are both set; set at most one"));
  }
  if ((args.steps && *args.steps <= 0) || (args.max_steps && *args.max_steps <= 0)) {
    throw InvalidArgumentError("train: steps and max_steps must be positive");
  }
  // Installed first: a notice that comes while the run starts ends it before its first step.
  estimator_internal::StopNotice notice(config_.planned_stop);
  std::unique_ptr<checkpoint::CheckpointManager> manager;
  if (config_.is_chief) {
    checkpoint::CheckpointManagerOptions options;
    options.keep_checkpoint_max = config_.keep_checkpoint_max;
    options.keep_checkpoint_every_n_hours = config_.keep_checkpoint_every_n_hours;
    options.async_save = config_.async_checkpoint;
    // Training writes variables only through optimizers and Variable::assign, which finish
    // a deferred copy first.
    options.copy_in_background = config_.async_checkpoint;
    options.durable_every_secs = config_.checkpoint_durable_secs;
    options.env = config_.file_system();
    manager = std::make_unique<checkpoint::CheckpointManager>(config_.model_dir, options);
  }
  std::shared_ptr<const checkpoint::CheckpointReader> resume =
      checkpoint::open_latest_intact(config_.model_dir);
  std::shared_ptr<const Strategy> strategy = config_.train_distribute;
  if (!strategy) strategy = OneDeviceStrategy::create();
  // Every training task starts at the chief's step (with the chief's variables, through
  // create_variables), also one that cannot see the chief's checkpoints; and all decide from
  // that step whether anything is left to train, so that none waits for a chief that is done.
  int64_t start_step = resume ? resume->global_step() : 0;
  if (int64_t chief_step = strategy->extended().broadcast_from_chief(start_step);
      chief_step != start_step) {
    LOG(WARNING) << "this worker's model_dir is at step " << start_step
                 << "; taking the chief's global step " << chief_step
                 << " (and the chief's variables)";
    start_step = chief_step;
  }
  std::optional<int64_t> max_steps = args.max_steps;
  if (args.steps) max_steps = start_step + *args.steps;
  if (max_steps && start_step >= *max_steps) {
    LOG(INFO) << "global step " << start_step << " has already reached max_steps " << *max_steps
              << "; not training";
    return start_step;
  }
  std::shared_ptr<const checkpoint::CheckpointReader> warm;
  checkpoint::CheckpointSourceFn warm_names;
  if (!resume && warm_start_) {
    warm = open_warm_start(*warm_start_);
    checkpoint::WarmStartOptions options;
    options.vars_to_warm_start = warm_start_->vars_to_warm_start;
    options.var_name_to_prev_var_name = warm_start_->var_name_to_prev_var_name;
    options.include_slots = warm_start_->include_slots;
    warm_names = checkpoint::warm_start_names(options);
    LOG(INFO) << "warm-starting from " << warm->path();
  }
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
  TrainRun run(*this, strategy, start_step, resume, warm, warm_names, manager.get(), max_steps,
               std::move(open_writer));
  DistributedIterator iterator =
      strategy->distribute_datasets_from_function(input_fn).make_iterator();
  if (resume) restore_input(iterator, *resume, *strategy);
  run.set_iterator(&iterator);
  // Hooks see the logical variables (replica 0's) and generator, as model_fn does.
  nn::VariableStoreScope store_scope(run.store());
  GeneratorScope generator_scope(run.generator());

  // NaN first, so that no later hook (the saver) sees a diverged state.
  Hooks hooks{std::make_shared<NanTensorHook>()};
  hooks.insert(hooks.end(), args.hooks.begin(), args.hooks.end());
  if (max_steps) hooks.push_back(StopAtStepHook::at_step(*max_steps));
  if (config_.is_chief) {
    hooks.push_back(std::make_shared<StepCounterHook>(config_.log_step_count_steps));
    if (config_.progress_line == RunConfig::ProgressLine::kOn ||
        (config_.progress_line == RunConfig::ProgressLine::kAuto && ::isatty(STDERR_FILENO))) {
      hooks.push_back(std::make_shared<ProgressLineHook>());
    }
    if (config_.save_summary_steps > 0) {
      hooks.push_back(std::make_shared<SummarySaverHook>(config_.save_summary_steps));
    }
    std::optional<int64_t> save_steps = config_.save_checkpoints_steps;
    std::optional<double> save_secs;
    if (!save_steps) save_secs = config_.checkpoint_secs();
    hooks.push_back(
        std::make_shared<CheckpointSaverHook>(save_steps, save_secs, args.saving_listeners));
  }
  if (config_.profile_every_n_steps > 0 || config_.profile_trace_steps) {
    hooks.push_back(std::make_shared<ProfilerHook>(ProfilerOptions{
        config_.profile_every_n_steps, config_.profile_trace_steps, "", config_.is_chief}));
  }
  for (const auto& hook : hooks) hook->begin(run);
  for (const auto& hook : hooks) hook->after_create(run);

  std::optional<ThreadTuner> tuner;
  std::chrono::steady_clock::time_point last_step_end;
  if (config_.intra_op_autotune && strategy->num_workers_in_sync() == 1) {
    tuner.emplace(intra_op_threads_budget());
  }
  EstimatorSpec spec;
  bool first = true;
  bool stop_raised = false;
  while (true) {
    RunContext context_;
    if (!stop_raised && notice.requested()) {
      stop_raised = true;
      LOG(WARNING) << notice.reason() << ": a planned stop after step " << run.global_step()
                   << (strategy->num_workers_in_sync() > 1
                           ? " and one more, which tells the workers stepping with this one"
                           : "")
                   << (config_.is_chief ? "; then a checkpoint of it" : "");
      if (strategy->num_workers_in_sync() <= 1) {
        strategy->extended().announce_planned_stop();
        run.begin_planned_stop();
        break;
      }
      strategy->extended().raise_step_signal(StrategyExtended::kStop);
    }
    for (const auto& hook : hooks) hook->before_run(run, context_);
    if (context_.stop_requested()) break;  // before the step (a coordinator-mode worker's gate)
    std::optional<PerReplica<io::Element>> batch = iterator.next();
    if (!batch || static_cast<int>(batch->size()) < strategy->num_local_replicas()) {
      LOG(INFO) << "the training input ended at step " << run.global_step();
      break;
    }
    if (first) LOG(INFO) << plan_line(*strategy, *batch);
    StepResult result = run.step(*batch, &spec);
    if (tuner) {
      // From one step's end to the next's: waiting for input counts (a compute thread more
      // can starve the input pipeline's threads).
      auto now = std::chrono::steady_clock::now();
      if (!first) tuner->step_finished(std::chrono::duration<double>(now - last_step_end).count());
      last_step_end = now;
    }
    // Every worker that steps with this one hears a planned stop after the same step.
    if (run.take_step_signals() & StrategyExtended::kStop) run.begin_planned_stop();
    if (first && !spec.training_hooks.empty()) {
      // A spec's hooks join when the first step has shown them.
      for (const auto& hook : spec.training_hooks) {
        hook->begin(run);
        hook->after_create(run);
      }
      hooks.insert(hooks.begin() + 1, spec.training_hooks.begin(), spec.training_hooks.end());
    }
    first = false;
    for (const auto& hook : hooks) hook->after_run(run, result, context_);
    if (context_.stop_requested() || run.planned_stop()) break;
  }
  for (const auto& hook : hooks) hook->end(run);
  if (manager) manager->close();  // the last checkpoint durable
  run.flush_summaries();
  if (manager && run.planned_stop() && notice.requested()) {
    LOG(INFO) << "a planned stop: the checkpoint of step " << run.global_step() << " is durable "
              << notice.seconds_since_notice() << " s after " << notice.reason();
  }
  if (run.planned_stop() && !(max_steps && run.global_step() >= *max_steps)) {
    std::string saved =
        manager ? str_cat("; its checkpoint is ", latest_checkpoint().value_or("none")) : "";
    std::string why = notice.requested()                    ? notice.reason()
                      : strategy->num_workers_in_sync() > 1 ? "of a worker stepping with this one"
                                                            : "of the job, told by a ps task";
    estimator_internal::throw_planned_stop(str_cat("a planned stop (", why, ") at step ",
                                   run.global_step(), saved,
                                   "; the same command resumes from it"),
                           run.global_step());
  }
  return run.global_step();
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
