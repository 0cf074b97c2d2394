// The client of coordinator mode (coordinated_tasks.h): the variables on the ps tasks, the
// schedule of units, checkpoints and progress in model_dir, the end of training.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/checkpoint/variables.h"
#include "cadre/estimator/estimator.h"
#include "cadre/random/generator.h"
#include "core/base/strings.h"
#include "estimator/client_evaluation.h"
#include "estimator/client_progress.h"
#include "estimator/coordinated_tasks.h"
#include "estimator/model_session.h"
#include "estimator/ps_input_positions.h"
#include "estimator/stop_notice.h"
#include "estimator/task_parts.h"
#include "estimator/training_finished.h"
#include "estimator/variable_sources.h"
#include "strategies/cluster/unit_dispatcher.h"
#include "strategies/ps/parameter_servers.h"
#include "strategies/ps/ps_client.h"
#include "strategies/ps/ps_variables.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<nn::Variable*> trained_by(const nn::VariableStore& store, const TrainOp& op) {
  std::vector<nn::Variable*> all = store.trainable_variables();
  if (op.variables.empty()) return all;
  std::regex pattern(op.variables, std::regex::ECMAScript);
  std::vector<nn::Variable*> chosen;
  for (nn::Variable* v : all) {
    if (std::regex_match(v->name(), pattern)) chosen.push_back(v);
  }
  return chosen;
}

// Creates the model's variables on the ps tasks (the values of `variables`' creator) and
// their optimizer state, by calling model_fn once on a batch of the training input, as a
// chief's first step would, without applying anything.
void create_on_ps(const Estimator& estimator, const TrainSpec& train_spec, const Strategy& strategy,
                  DistributedVariables& variables) {
  io::InputContext context;
  context.num_input_pipelines = strategy.num_workers();
  context.num_replicas_in_sync = strategy.num_replicas_in_sync();
  io::Iterator input = train_spec.input_fn(context).make_iterator();
  std::optional<io::Element> batch = input.next();
  if (!batch) {
    throw InvalidArgumentError(
        "the training input is empty: the client builds the model "
        "from its first batch");
  }
  nn::VariableStoreScope store_scope(variables.primary());
  Generator generator(estimator.seed(), 0);
  GeneratorScope generator_scope(generator);
  EstimatorSpec spec =
      estimator.model_fn()(batch->features, batch->labels, ModeKeys::kTrain, estimator.params());
  spec.validate(ModeKeys::kTrain);
  static_cast<ps::PsVariables&>(variables).send_optimizer_state(
      *spec.train_op.optimizer, trained_by(variables.primary(), spec.train_op));
}

int64_t global_step_of(ps::PsClient& ps0) { return ps0.units(ps::UnitsRequest()).global_step(); }

// The part of a planned stop's grace period the units running get to finish in; the rest is
// the checkpoint's.
double drain_seconds(const RunConfig& config, const StopNotice& notice) {
  return std::max(0.5, config.planned_stop.grace_secs / 2 - notice.seconds_since_notice());
}

// The client's run: what it saves, and when.
class ClientRun {
 public:
  ClientRun(const Estimator& estimator, std::shared_ptr<const Strategy> strategy,
            DistributedVariables& variables, checkpoint::CheckpointManager& manager,
            ClientProgress& progress, ClientEvaluation& evaluation, int64_t start_step,
            std::shared_ptr<const checkpoint::CheckpointReader> resume)
      : estimator_(estimator),
        config_(estimator.config()),
        strategy_(std::move(strategy)),
        resume_(std::move(resume)),
        variables_(variables),
        manager_(manager),
        progress_(progress),
        evaluation_(evaluation),
        saved_step_(start_step),
        logged_step_(start_step),
        last_log_(Clock::now()),
        last_save_(Clock::now()) {}

  // Saves a checkpoint when one is due at `step`, and logs the progress.
  void tick(int64_t step) {
    bool due =
        config_.save_checkpoints_steps
            ? step / *config_.save_checkpoints_steps > saved_step_ / *config_.save_checkpoints_steps
            : std::chrono::duration<double>(Clock::now() - last_save_).count() >=
                  config_.checkpoint_secs();
    if (due && step > saved_step_) save(step);
    if (step / config_.log_step_count_steps > logged_step_ / config_.log_step_count_steps) {
      double seconds = std::chrono::duration<double>(Clock::now() - last_log_).count();
      LOG(INFO) << "step " << step << "/" << progress_.max_steps << "  "
                << static_cast<int64_t>(static_cast<double>(step - logged_step_) /
                                        std::max(seconds, 1e-3))
                << " steps/s (the workers' steps, dispatched by this client)";
      logged_step_ = step;
      last_log_ = Clock::now();
    }
  }

  // A checkpoint of the variables on the ps tasks at `step` (read while the workers train:
  // with asynchronous updates, as a training chief's), and the progress that goes with it;
  // evaluated (inline evaluation) unless `evaluate` is false.
  std::string save(int64_t step, bool evaluate = true) {
    checkpoint::CheckpointData data;
    data.global_step = step;
    // The ps tasks write their parts, as a chief's checkpoint has them; the client holds
    // none of the variables they hold.
    const StrategyExtended& extended = strategy_->extended();
    std::shared_ptr<const nn::VariableStore> own =
        save_parts_of_tasks(extended, variables_, manager_, step, &data);
    checkpoint::add_variables(own ? *own : *extended.variables_to_save(variables_), &data);
    // The workers' input positions as of `step`, which ps 0 keeps (ps_input_positions.h).
    add_positions_on_ps(*strategy_, step, resume_.get(), &data);
    set_input_pipelines(strategy_->num_workers(), &data);
    data.attributes["strategy"] = strategy_->name();
    data.attributes["topology"] =
        str_cat("a client driving ", strategy_->num_workers(), " worker(s)");
    std::string path = manager_.save(data);
    manager_.wait();
    LOG(INFO) << "saved checkpoint for step " << step << ": " << path;
    saved_step_ = step;
    last_save_ = Clock::now();
    progress_.checkpoint_step = step;
    write_client_progress(*config_.file_system(), estimator_.model_dir(), progress_);
    if (!evaluate) return path;
    try {
      evaluation_.checkpoint_saved(path);
    } catch (const PlannedStopError& stop) {
      // A notice during the evaluation: the dispatch stops at the next tick.
      LOG(INFO) << stop.what();
    }
    return path;
  }

  int64_t saved_step() const { return saved_step_; }

  // Dispatches the steps from `start_step` to `max_steps` in units, saving on the way, and
  // returns the global step reached (max_steps, or less where every worker's input ended
  // first). A planned stop ends it with
  // PlannedStopError once the units running are done and the checkpoint is durable.
  int64_t train(UnitDispatcher& dispatcher, ps::PsClient& ps0, StopNotice& notice,
                int64_t start_step, int64_t max_steps) {
    if (notice.requested()) planned_stop(ps0, notice);
    LOG(INFO) << "client: dispatching steps " << start_step << " to " << max_steps
              << " in units of " << config_.steps_per_unit << " to " << strategy_->num_workers()
              << " worker(s)";
    DispatchReport report = dispatcher.run(1, max_steps - start_step, config_.steps_per_unit,
                                           [&](const DispatchReport& so_far) {
                                             progress_.units_complete = so_far.units;
                                             progress_.lost = so_far.lost;
                                             if (notice.requested()) {
                                               stop_dispatching(dispatcher, ps0, notice);
                                               return;
                                             }
                                             tick(global_step_of(ps0));
                                           });
    progress_.units_complete = report.units;
    progress_.lost = report.lost;
    if (report.stopped) planned_stop(ps0, notice);
    // Every step a worker took has landed: each worker's input ended after its last push.
    int64_t step = report.input_ended ? global_step_of(ps0) : landed_global_step(ps0, max_steps);
    if (report.input_ended) {
      LOG(INFO) << "client: every worker's input has ended, at global step " << step
                << " of max_steps " << max_steps
                << ": training ends there, as Estimator.train does when input_fn runs out";
    }
    progress_.finished = true;
    log_report(report, step);
    if (saved_step_ != step) {
      save(step);
    } else {
      write_client_progress(*config_.file_system(), estimator_.model_dir(), progress_);
    }
    return step;
  }

  // A planned stop, once the dispatch has stopped and no unit is running: ps 0 refuses this
  // generation's units from here on (a unit abandoned while running cannot land a step
  // after the checkpoint), then the checkpoint of the step reached, durable, and the
  // progress. Throws PlannedStopError.
  [[noreturn]] void planned_stop(ps::PsClient& ps0, const StopNotice& notice) {
    ps::UnitsRequest fence;
    fence.set_begin(true);
    fence.set_generation(progress_.generation + 1);
    ps0.units(fence);
    int64_t step = global_step_of(ps0);
    if (step != saved_step_) {
      save(step, /*evaluate=*/false);
    } else {
      write_client_progress(*config_.file_system(), estimator_.model_dir(), progress_);
    }
    manager_.close();
    std::string path = estimator_.latest_checkpoint().value_or("none");
    LOG(INFO) << "a planned stop: the checkpoint of step " << step << " is durable "
              << notice.seconds_since_notice() << " s after " << notice.reason();
    throw_planned_stop(str_cat("a planned stop (", notice.reason(), ") at step ", step,
                               "; its checkpoint is ", path, "; the same command resumes from it"),
                       step);
  }

 private:
  // A planned stop: no unit is dispatched from now on, and those running finish (their
  // steps counted once on ps 0's ledger) or are abandoned; then the checkpoint of the step
  // reached.
  void stop_dispatching(UnitDispatcher& dispatcher, ps::PsClient& ps0, StopNotice& notice) {
    double drain = drain_seconds(config_, notice);
    LOG(WARNING) << notice.reason() << ": a planned stop at global step " << global_step_of(ps0)
                 << ": no more units; the units running finish (within " << drain
                 << " s), then a checkpoint of the step reached";
    dispatcher.stop(drain);
  }

  // Every unit is complete on ps 0's ledger; its last step may still be landing on the
  // global step (a unit run twice, by a worker that was thought lost).
  static int64_t landed_global_step(ps::PsClient& ps0, int64_t max_steps) {
    int64_t step = 0;
    auto deadline = Clock::now() + std::chrono::seconds(60);
    while ((step = global_step_of(ps0)) < max_steps && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (step != max_steps) {
      throw InternalError(str_cat("every unit is complete but the global step is ", step,
                                  ", not max_steps ", max_steps));
    }
    return step;
  }

  static void log_report(const DispatchReport& report, int64_t step) {
    std::string by_worker;
    for (const auto& [task, steps] : report.steps_by_worker) {
      by_worker += str_cat(by_worker.empty() ? "" : ", ", task, " ", steps);
    }
    LOG(INFO) << "client: " << report.units << " units complete at global step " << step << "; "
              << report.dispatches << " dispatches, " << report.lost
              << " lost to workers that failed; steps applied in the units each completed: "
              << by_worker;
  }

  const Estimator& estimator_;
  const RunConfig& config_;
  std::shared_ptr<const Strategy> strategy_;
  // Where the workers that have pushed nothing since this client started resume.
  std::shared_ptr<const checkpoint::CheckpointReader> resume_;
  DistributedVariables& variables_;
  checkpoint::CheckpointManager& manager_;
  ClientProgress& progress_;
  ClientEvaluation& evaluation_;
  int64_t saved_step_, logged_step_;
  Clock::time_point last_log_, last_save_;
};

// The parameter servers of the client's strategy; throws when it cannot drive the job.
const ps::ParameterServers& client_servers(const RunConfig& config, const TrainSpec& train_spec) {
  if (!train_spec.max_steps) {
    throw InvalidArgumentError(
        "a client needs TrainSpec.max_steps: its schedule is the steps up to it");
  }
  const Strategy* strategy = config.train_distribute.get();
  const ps::ParameterServers* servers =
      strategy ? strategy->extended().parameter_servers() : nullptr;
  if (!servers) {
    throw InvalidArgumentError(
        "a client with ps tasks drives ParameterServerStrategy: set train_distribute = "
        "ParameterServerStrategy::create(*config.cluster)");
  }
  return *servers;
}

// A generation above every earlier client's: from here on ps 0 refuses the steps of units
// they dispatched, so none lands after the client restores the checkpoint.
int64_t begin_generation(const ps::ParameterServers& servers,
                         const std::optional<ClientProgress>& previous) {
  servers.wait_until_ready();
  ps::PsClient& ps0 = *servers.clients()[0];
  ps::UnitsRequest begin;
  begin.set_begin(true);
  begin.set_generation(
      std::max(previous ? previous->generation : 0, ps0.units(ps::UnitsRequest()).generation()) +
      1);
  ps0.units(begin);
  return begin.generation();
}

// The variables on the ps tasks, at `resume`'s values (or initialised), with their optimizer
// state.
std::unique_ptr<DistributedVariables> client_variables(
    const Estimator& estimator, const TrainSpec& train_spec, const Strategy& strategy,
    std::shared_ptr<const checkpoint::CheckpointReader> resume) {
  nn::VariableCreator creator =
      resume ? checkpoint_creator(resume, checkpoint::same_names(), /*verify=*/false)
             : nn::default_variable_creator;
  // Each ps task reads its own rows of the tables from the checkpoint, as under a chief.
  std::unique_ptr<DistributedVariables> variables = strategy.extended().create_restored_variables(
      estimator.seed(), creator, variable_sources_in(resume));
  create_on_ps(estimator, train_spec, strategy, *variables);
  return variables;
}

checkpoint::CheckpointManagerOptions client_manager_options(const RunConfig& config) {
  checkpoint::CheckpointManagerOptions options;
  options.keep_checkpoint_max = config.keep_checkpoint_max;
  options.keep_checkpoint_every_n_hours = config.keep_checkpoint_every_n_hours;
  options.durable_every_secs = config.checkpoint_durable_secs;
  options.env = config.file_system();
  return options;
}

}  // namespace

TrainAndEvaluateResult run_client(Estimator& estimator, const TrainSpec& train_spec,
                                  const EvalSpec& eval_spec) {
  const RunConfig& config = estimator.config();
  if (config.deterministic) {
    LOG(WARNING) << "RunConfig.deterministic applies to workers that step together; the "
                    "workers of a client with ps tasks step on their own";
  }
  const ps::ParameterServers& servers = client_servers(config, train_spec);
  std::shared_ptr<const Strategy> strategy = config.train_distribute;
  const int64_t max_steps = *train_spec.max_steps;
  // Installed first: a notice while the client starts stops it before it dispatches.
  StopNotice notice(config.planned_stop);
  std::shared_ptr<Env> file_system = config.file_system();
  Env& env = *file_system;
  const std::string& model_dir = estimator.model_dir();
  checkpoint::CheckpointManager manager(model_dir, client_manager_options(config));
  remove_finished_marker(env, model_dir);
  std::optional<ClientProgress> previous = read_client_progress(env, model_dir);
  const int64_t generation = begin_generation(servers, previous);
  ps::PsClient& ps0 = *servers.clients()[0];

  std::shared_ptr<const checkpoint::CheckpointReader> resume =
      checkpoint::open_latest_intact(model_dir, &env);
  const int64_t start_step = resume ? resume->global_step() : 0;
  if (resume) {
    LOG(INFO) << "client (generation " << generation << "): resuming from " << resume->path()
              << " at step " << start_step
              << (previous ? str_cat(" (the previous client's progress: ", previous->units_complete,
                                     " units complete, checkpoint at step ",
                                     previous->checkpoint_step, ")")
                           : std::string());
  }
  strategy->extended().broadcast_from_chief(start_step);  // ps 0's global step
  std::unique_ptr<DistributedVariables> variables =
      client_variables(estimator, train_spec, *strategy, resume);

  ClientProgress progress;
  progress.generation = generation;
  progress.max_steps = max_steps;
  progress.steps_per_unit = config.steps_per_unit;
  progress.checkpoint_step = start_step;
  write_client_progress(env, model_dir, progress);
  ClientEvaluation evaluation(estimator, eval_spec);
  ClientRun run(estimator, strategy, *variables, manager, progress, evaluation, start_step, resume);
  DispatchOptions dispatch;
  dispatch.all_lost_timeout_seconds = config.client_all_workers_lost_secs;
  UnitDispatcher dispatcher(*config.cluster, ps0, generation, dispatch);
  int64_t step = start_step;
  std::string final_path = resume ? resume->path() : std::string();
  if (start_step < max_steps) {
    step = run.train(dispatcher, ps0, notice, start_step, max_steps);
    final_path = *estimator.latest_checkpoint();
  } else {
    LOG(INFO) << "global step " << start_step << " has already reached max_steps " << max_steps;
  }
  manager.close();
  write_finished_marker(env, model_dir, {step, max_steps});
  dispatcher.finish_workers();
  return evaluation.finish(step, final_path);
}

}  // namespace cadre::estimator_internal
