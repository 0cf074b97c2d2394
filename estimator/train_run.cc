#include "estimator/train_run.h"

#include <glog/logging.h>

#include <regex>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/runtime/profiler.h"
#include "core/base/strings.h"
#include "estimator/task_parts.h"
#include "estimator/variable_sources.h"
#include "strategies/ps/parameter_servers.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
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
  return global_replica == 0 ? std::string(kGlobalGenerator) : str_cat("replica_", global_replica);
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

}  // namespace

TrainRun::TrainRun(const Estimator& estimator, std::shared_ptr<const Strategy> strategy,
                   int64_t start_step, std::shared_ptr<const checkpoint::CheckpointReader> resume,
                   std::shared_ptr<const checkpoint::CheckpointReader> warm,
                   checkpoint::CheckpointSourceFn warm_names,
                   checkpoint::CheckpointManager* manager, std::optional<int64_t> max_steps,
                   std::function<io::SummaryWriter*()> open_writer)
    : estimator_(estimator),
      strategy_(std::move(strategy)),
      manager_(manager),
      max_steps_(max_steps),
      global_step_(start_step),
      // Warm start takes variables only: the new run draws from its own seed.
      generators_(replica_generators(estimator.seed(), *strategy_, resume.get())),
      open_writer_(std::move(open_writer)),
      given_(start_step),
      resumed_step_(start_step) {
  nn::VariableCreator creator = nn::default_variable_creator;
  if (resume) {
    // A resumed checkpoint was verified whole when it was chosen.
    creator = checkpoint_creator(resume, checkpoint::same_names(), /*verify=*/false);
  } else if (warm) {
    creator = checkpoint::restoring_creator(warm, std::move(warm_names), /*verify=*/true);
  }
  variables_ = strategy_->extended().create_restored_variables(estimator.seed(), creator,
                                                               variable_sources_in(resume));
  if (manager_ && resume && strategy_->extended().elastic()) keep_positions_of(*resume);
  input_report_ = input_report_to_ps(*strategy_);
  if (manager_ && input_report_) resume_ = std::move(resume);
  // Read before this worker's input is restored (from ps 0, or the checkpoint that client
  // resumed from), so that it follows at least that client.
  const RunConfig& config = estimator.config();
  if (input_report_ && config.cluster && config.cluster->has_job("client")) {
    client_generation_ = client_generation_on_ps(*strategy_);
  }
}

void TrainRun::before_batch() {
  if (!input_report_ || !iterator_) return;
  if (client_generation_) follow_new_client();
  if (input_report_->wanted()) input_report_->send(encode_worker_state(own_state()));
}

bool TrainRun::refused_for_new_client() {
  return client_generation_ &&
         strategy_->extended().parameter_servers()->work_unit().take_replaced();
}

void TrainRun::follow_new_client() {
  std::optional<ps::WorkUnit> unit =
      strategy_->extended().parameter_servers()->work_unit().current();
  if (!unit || unit->generation == *client_generation_) return;
  if (*client_generation_ == 0) {
    // No client had begun: the input was restored from the checkpoint the first resumes
    // from, since nobody saves one without a client.
    client_generation_ = unit->generation;
    return;
  }
  LOG(INFO) << "worker " << strategy_->worker_index() << ": a new client (generation "
            << unit->generation << ", after " << *client_generation_
            << ") restored the variables of a checkpoint; reading the input again from there";
  client_generation_ = unit->generation;
  read_again_();
  input_report_->restart();
}

void TrainRun::keep_positions_of(const checkpoint::CheckpointReader& resume) {
  std::map<std::string, Generator::State> generators = resume.rng_states(/*verify=*/false);
  const int workers = strategy_->num_workers(), replicas = strategy_->num_local_replicas();
  for (int w = 1; w < workers; ++w) {
    std::optional<io::IteratorState> input = saved_worker_input(resume, w, workers);
    if (!input) continue;
    WorkerState& state = gathered_[w];
    state.input = std::move(*input);
    for (int r = 0; r < replicas; ++r) {
      if (auto it = generators.find(generator_name(w * replicas + r)); it != generators.end()) {
        state.generators.insert(*it);
      }
    }
  }
}

io::SummaryWriter* TrainRun::summary_writer() {
  if (!writer_ && open_writer_) writer_ = open_writer_();
  return writer_;
}

WorkerState TrainRun::own_state() {
  WorkerState state;
  if (iterator_) state.input = iterator_->save();
  for (size_t r = 0; r < generators_.size(); ++r) {
    int global = strategy_->worker_index() * strategy_->num_local_replicas() + static_cast<int>(r);
    state.generators[generator_name(global)] = generators_[r].state();
  }
  return state;
}

std::string TrainRun::save_checkpoint() {
  if (!manager_) {
    throw FailedPreconditionError("only the chief saves checkpoints of a training run");
  }
  checkpoint::CheckpointData data;
  data.global_step = global_step_;
  const StrategyExtended& extended = strategy_->extended();
  // The ps tasks write their parts (training waits only for their snapshots), or the
  // workers theirs; else the chief saves every variable.
  std::shared_ptr<const nn::VariableStore> logical =
      save_parts_of_tasks(extended, *variables_, *manager_, global_step_, &data);
  if (!logical && worker_parts_ && worker_parts_->take(global_step_, &data.parts)) {
    logical = std::make_shared<nn::VariableStore>();  // every variable is in a worker's part
  }
  if (!logical) logical = extended.variables_to_save(*variables_);
  checkpoint::add_variables(*logical, &data);
  add_worker_state(0, own_state(), &data);
  if (input_report_) add_positions_on_ps(*strategy_, global_step_, resume_.get(), &data);
  if (strategy_->num_workers_in_sync() > 1) {
    // An elastic group's chief knows how far each position gathered before is behind.
    if (gathered_step_ == global_step_ || extended.elastic()) {
      for (const auto& [worker, state] : gathered_) {
        add_worker_state(worker, state, &data, given_.behind(worker));
      }
    } else {
      LOG(WARNING) << "the checkpoint of step " << global_step_
                   << " holds the chief's input position only (it was not announced)";
    }
  }
  given_.saved(global_step_);
  if (attributes_.empty()) {  // the same for every save of the run (and not free to build)
    set_input_pipelines(strategy_->num_workers(), &data);
    data.attributes["strategy"] = strategy_->name();
    data.attributes["topology"] =
        str_cat(strategy_->num_workers(), " worker(s), ", strategy_->topology(), " each");
    attributes_ = data.attributes;
  }
  data.attributes = attributes_;
  return manager_->save(std::move(data));
}

void TrainRun::announce_checkpoint() {
  strategy_->extended().raise_step_signal(StrategyExtended::kCheckpoint);
  // The input's position, taken after this step's batch, is the checkpoint's.
  if (iterator_) iterator_->prepare_save();
  if (manager_) manager_->prepare_save();
}

unsigned TrainRun::take_step_signals() {
  // After the first step, once the optimizer's slots exist: the part writer then faults in
  // the first snapshot's memory well before the first save, not while its updates wait.
  if (!worker_parts_decided_ && strategy_->num_workers_in_sync() > 1) decide_worker_parts();
  unsigned heard = strategy_->extended().take_step_signal();
  // The last checkpoint, after every worker's input ended, holds every worker's end.
  if (strategy_->num_workers_in_sync() <= 1 || (heard == 0 && !every_input_ended_)) return heard;
  std::vector<std::string> all =
      strategy_->extended().all_gather_bytes(encode_worker_state(own_state()));
  if (heard & StrategyExtended::kCheckpoint) start_worker_parts();
  if (!manager_) return heard;
  // A worker an elastic group went on without keeps its last state: where it resumes.
  std::vector<int> workers = strategy_->extended().workers_by_rank();
  for (size_t r = 1; r < all.size(); ++r) {
    gathered_[workers[r]] =
        decode_worker_state(all[r], str_cat("the state of worker ", workers[r]));
    given_.gathered(workers[r]);
  }
  gathered_step_ = global_step_;
  return heard;
}

bool TrainRun::counts_batches_given() const { return manager_ && strategy_->extended().elastic(); }

void TrainRun::decide_worker_parts() {
  const StrategyExtended& extended = strategy_->extended();
  const RunConfig& config = estimator_.config();
  worker_parts_ =
      WorkerParts::create(extended, *extended.variables_to_save(*variables_), config.model_dir,
                          str_cat(config.task_type, ":", config.task_id));
  worker_parts_decided_ = true;
}

void TrainRun::start_worker_parts() {
  if (!worker_parts_decided_) decide_worker_parts();
  if (worker_parts_) {
    worker_parts_->start(*strategy_->extended().variables_to_save(*variables_), global_step_);
  }
}

std::vector<nn::Variable*> TrainRun::chosen_variables(const nn::VariableStore& store,
                                                      const TrainOp& op) {
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

ReplicaOutput TrainRun::replica_step(ReplicaContext& ctx, const io::Element& batch) {
  if (ordered_first_shard_) return shard_ordered_step(ctx, batch);
  ReplicaOutput out;
  out.batch_size = batch_size_of(batch.features, batch.labels);
  GradientTape tape;
  profiler::Phases phase("forward");
  out.spec =
      estimator_.model_fn()(batch.features, batch.labels, ModeKeys::kTrain, estimator_.params());
  out.spec.validate(ModeKeys::kTrain);
  std::vector<nn::Variable*> variables = chosen_variables(ctx.store(), out.spec.train_op);
  // An elastic group's members compare their variables when they change, maybe within the
  // first step: each makes its slots before that step's first collective (once: later
  // steps find them made).
  if (strategy_->extended().elastic()) {
    std::call_once(slots_made_, [&] { out.spec.train_op.optimizer->build(variables); });
  }
  phase.next("backward");
  // Across workers the loss and scalar summaries logged are the job's, averaged by batch
  // size in the gradients' reduction.
  std::vector<double> means;
  const bool job_wide = strategy_->num_workers_in_sync() > 1;
  if (job_wide) {
    means.push_back(out.spec.loss.item<double>());
    for (const auto& [tag, value] : out.spec.scalar_summaries) {
      means.push_back(value.item<double>());
    }
  }
  // The gradients reach the other workers while the backward pass runs, where the strategy
  // can; minimize's own phases are the update and the all-reduce.
  out.applied =
      ctx.minimize(tape, out.spec.loss, *out.spec.train_op.optimizer,
                   static_cast<double>(out.batch_size), variables, job_wide ? &means : nullptr);
  out.loss = job_wide ? means[0] : out.spec.loss.item<double>();
  if (job_wide) {
    size_t i = 1;
    for (auto& [tag, value] : out.spec.scalar_summaries) value = Tensor::scalar(means[i++]);
  }
  return out;
}

// Summaries describe the global batch: each scalar averaged over the replicas by their
// batch sizes, not replica 0's value.
void TrainRun::average_summaries(PerReplica<ReplicaOutput>& steps, int64_t global_batch,
                                 EstimatorSpec* spec) {
  for (auto& [tag, value] : spec->scalar_summaries) {
    double sum = value.item<double>() * static_cast<double>(steps[0].batch_size);
    for (size_t r = 1; r < steps.size(); ++r) {
      auto it = steps[r].spec.scalar_summaries.find(tag);
      if (it == steps[r].spec.scalar_summaries.end()) {
        throw InvalidArgumentError(str_cat("scalar summary '", tag,
                                           "' is missing on a replica: "
                                           "model_fn must return the same summaries on each"));
      }
      sum += it->second.item<double>() * static_cast<double>(steps[r].batch_size);
    }
    value = Tensor::scalar(sum / static_cast<double>(global_batch));
  }
}

StepResult TrainRun::step(const PerReplica<io::Element>& inputs, EstimatorSpec* spec) {
  PerReplica<ReplicaOutput> steps = strategy_->run<ReplicaOutput>(
      *variables_, [&](ReplicaContext& ctx) { return replica_step(ctx, inputs[ctx.replica_id()]); },
      &generators_);
  // Every worker stepping with this one had no examples left: nothing was applied, and
  // the step does not count.
  every_input_ended_ = !steps[0].applied;
  if (!every_input_ended_) {
    global_step_ = strategy_->extended().global_step_after(*variables_, global_step_);
  }
  StepResult result = combine_replicas(steps, global_step_);
  *spec = std::move(steps[0].spec);
  if (steps.size() > 1) average_summaries(steps, result.batch_size, spec);
  result.spec = spec;
  result.batch_size *= strategy_->num_workers_in_sync();
  return result;
}

}  // namespace cadre::estimator_internal
