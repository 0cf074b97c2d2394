// Estimator::evaluate, and the queries of the latest checkpoint.
#include <glog/logging.h>

#include <functional>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/estimator.h"
#include "cadre/io/summary_writer.h"
#include "cadre/strategies/mirrored_strategy.h"
#include "cadre/strategies/one_device_strategy.h"
#include "core/base/strings.h"
#include "estimator/eval_writers.h"
#include "estimator/model_session.h"
#include "estimator/stop_notice.h"
#include "strategies/strategy_extended.h"

namespace cadre {

namespace {

class EvalRun : public Run {
 public:
  EvalRun(const RunConfig& config, nn::VariableStore& store, int64_t global_step)
      : config_(config), store_(store), global_step_(global_step) {}
  ModeKeys mode() const override { return ModeKeys::kEval; }
  const RunConfig& config() const override { return config_; }
  int64_t global_step() const override { return global_step_; }
  std::optional<int64_t> max_steps() const override { return std::nullopt; }
  nn::VariableStore& store() override { return store_; }
  io::SummaryWriter* summary_writer() override { return nullptr; }
  std::string save_checkpoint() override {
    throw FailedPreconditionError("evaluation does not save checkpoints");
  }

 private:
  const RunConfig& config_;
  nn::VariableStore& store_;
  int64_t global_step_;
};

// The strategy an evaluation runs under. Evaluation restores the checkpoint into this
// process: under a strategy whose variables live on ps tasks (a client's, or a lone
// worker's), it runs on that strategy's devices.
std::shared_ptr<const Strategy> evaluation_strategy(const RunConfig& config) {
  std::shared_ptr<const Strategy> strategy = config.eval_distribute;
  if (!strategy) return OneDeviceStrategy::create();
  if (strategy->extended().parameter_servers() == nullptr) return strategy;
  const std::vector<Device>& devices = strategy->devices();
  if (devices.size() == 1) return OneDeviceStrategy::create(devices[0]);
  return MirroredStrategy::create(devices);
}

// Every replica evaluates its own restored copy, also under a strategy that shares one copy
// in training: metrics live in the store, and each replica updates its own.
DistributedVariables restored_copies(std::shared_ptr<const checkpoint::CheckpointReader> reader,
                                     bool verified, const Strategy& strategy, uint64_t seed) {
  std::vector<std::unique_ptr<nn::VariableStore>> stores;
  for (int r = 0; r < strategy.num_local_replicas(); ++r) {
    nn::VariableCreator restore =
        checkpoint::restoring_creator(reader, checkpoint::same_names(), /*verify=*/!verified);
    Device device = strategy.devices()[r];
    stores.push_back(std::make_unique<nn::VariableStore>(
        seed, [restore, device](const nn::VariableSpec& spec, uint64_t seed) {
          DeviceScope scope(device);
          return restore(spec, seed);
        }));
  }
  return DistributedVariables(std::move(stores));
}

// The metrics of replica 0's spec, each merged with the other replicas' metric of the same
// name.
EvalResult merged_metrics(const EstimatorSpec& spec, DistributedVariables& variables,
                          int replicas) {
  EvalResult results;
  for (const auto& [name, metric] : spec.eval_metric_ops) {
    for (int r = 1; r < replicas; ++r) {
      for (const auto& [key, other] : variables.store(r).metrics()) {
        if (key == metric->name() || key == name) {
          metric->merge(*other);
          break;
        }
      }
    }
    results.set(name, metric->result());
  }
  return results;
}

// The evaluation loop: model_fn on every replica's batch until the input ends, `steps`
// batches, or a hook stops it.
class EvalSteps {
 public:
  EvalSteps(const Estimator& estimator, const Strategy& strategy, DistributedVariables& variables,
            EvalRun& run, Hooks hooks)
      : estimator_(estimator),
        strategy_(strategy),
        variables_(variables),
        run_(run),
        hooks_(std::move(hooks)) {}

  // Runs up to `limit` steps (0: until the input ends). A planned stop abandons the
  // evaluation: nothing of it is written.
  void run(DistributedIterator& iterator, int64_t limit, const std::string& checkpoint) {
    for (int r = 0; r < strategy_.num_local_replicas(); ++r) {
      generators_.emplace_back(estimator_.seed(), static_cast<uint64_t>(r));
    }
    estimator_internal::StopNotice notice(estimator_.config().planned_stop);
    while (limit == 0 || steps_ < limit) {
      if (notice.requested()) {
        estimator_internal::throw_planned_stop(
            str_cat("the evaluation of ", checkpoint, " was abandoned: a planned stop (",
                    notice.reason(), ")"),
            -1);
      }
      RunContext context;
      for (const auto& hook : hooks_) hook->before_run(run_, context);
      std::optional<PerReplica<io::Element>> inputs = iterator.next();
      if (!inputs) break;
      StepResult result = step(*inputs);
      // TensorFlow's eval loss: the mean over steps of each (global) batch's loss.
      loss_sum_ += result.loss;
      ++steps_;
      for (const auto& hook : hooks_) hook->after_run(run_, result, context);
      if (context.stop_requested()) break;
    }
  }

  Hooks& hooks() { return hooks_; }
  const EstimatorSpec& spec() const { return spec_; }
  int64_t steps() const { return steps_; }
  double mean_loss() const { return loss_sum_ / static_cast<double>(steps_); }

 private:
  using ReplicaOutput = estimator_internal::ReplicaOutput;

  StepResult step(const PerReplica<io::Element>& inputs) {
    PerReplica<ReplicaOutput> results = strategy_.run<ReplicaOutput>(
        variables_,
        [&](ReplicaContext& ctx) {
          ReplicaOutput out;
          if (ctx.replica_id() >= static_cast<int>(inputs.size())) return out;  // input ended
          const io::Element& batch = inputs[ctx.replica_id()];
          NoGradScope no_grad;
          out.spec = estimator_.model_fn()(batch.features, batch.labels, ModeKeys::kEval,
                                           estimator_.params());
          out.spec.validate(ModeKeys::kEval);
          out.loss = out.spec.loss.item<double>();
          out.batch_size = estimator_internal::batch_size_of(batch.features, batch.labels);
          return out;
        },
        &generators_);
    spec_ = std::move(results[0].spec);
    if (steps_ == 0) {
      for (const auto& hook : spec_.evaluation_hooks) {
        hook->begin(run_);
        hook->after_create(run_);
      }
      hooks_.insert(hooks_.end(), spec_.evaluation_hooks.begin(), spec_.evaluation_hooks.end());
    }
    StepResult result = estimator_internal::combine_replicas(results, run_.global_step());
    result.spec = &spec_;
    return result;
  }

  const Estimator& estimator_;
  const Strategy& strategy_;
  DistributedVariables& variables_;
  EvalRun& run_;
  Hooks hooks_;
  std::vector<Generator> generators_;
  EstimatorSpec spec_;
  double loss_sum_ = 0;
  int64_t steps_ = 0;
};

// The evaluation's scalars in model_dir/eval_<name>, for TensorBoard.
// `writer_of` opens (once) the writer of an event directory.
void record_evaluation(const RunConfig& config,
                       const std::function<io::SummaryWriter&(const std::string&)>& writer_of,
                       const EvalResult& results, const std::string& name, int64_t global_step) {
  if (config.model_dir.empty()) return;
  std::string eval_dir = join_path(config.model_dir, eval_dir_name(name));
  try {
    io::SummaryWriter& writer = writer_of(eval_dir);
    for (const auto& [metric, value] : results) {
      if (metric != "global_step") writer.scalar(metric, value, global_step);
    }
    writer.flush();
  } catch (const PermissionDeniedError& error) {
    // A read-only model_dir is evaluated all the same; only TensorBoard misses the result.
    LOG(WARNING) << "cannot record the evaluation of step " << global_step << " in " << eval_dir
                 << " (" << error.what() << "); returning it unrecorded";
  }
}

}  // namespace

EvalResult Estimator::evaluate(const InputFn& input_fn, const EvalArgs& args) {
  if (args.steps && *args.steps < 0) {
    throw InvalidArgumentError(str_cat("evaluate: steps must be >= 0, got ", *args.steps));
  }
  auto [reader, verified] =
      estimator_internal::open_checkpoint_for(config_.model_dir, args.checkpoint_path, "evaluate");
  std::shared_ptr<const Strategy> strategy = evaluation_strategy(config_);
  DistributedVariables variables = restored_copies(reader, verified, *strategy, seed_);
  const int64_t global_step = reader->global_step();
  EvalRun run(config_, variables.primary(), global_step);
  DistributedIterator iterator =
      strategy->distribute_datasets_from_function(input_fn).make_iterator();

  nn::VariableStoreScope store_scope(variables.primary());
  for (const auto& hook : args.hooks) hook->begin(run);
  for (const auto& hook : args.hooks) hook->after_create(run);
  EvalSteps steps(*this, *strategy, variables, run, args.hooks);
  steps.run(iterator, args.steps.value_or(0), reader->path());
  if (steps.steps() == 0) {
    throw OutOfRangeError(
        str_cat("evaluate: the input of ", eval_dir_name(args.name), " yielded no batch"));
  }
  for (const auto& hook : steps.hooks()) hook->end(run);

  EvalResult results = merged_metrics(steps.spec(), variables, strategy->num_local_replicas());
  results.set("loss", steps.mean_loss());
  results.set("global_step", static_cast<double>(global_step));
  auto writer_of = [this](const std::string& dir) -> io::SummaryWriter& {
    return eval_writers_->writer(dir, config_.file_system());
  };
  record_evaluation(config_, writer_of, results, args.name, global_step);
  std::string line = str_cat("evaluation of ", reader->path(), " (", steps.steps(), " steps on ",
                             strategy->topology(), "):");
  for (const auto& [name, value] : results) line += str_cat(" ", name, " = ", value);
  LOG(INFO) << line;
  return results;
}

std::optional<std::string> Estimator::latest_checkpoint() const {
  return checkpoint::latest_checkpoint(config_.model_dir, config_.file_system().get());
}

namespace {

// The latest checkpoint (by the state file, or the newest file when that is at fault),
// opened without reading its data: listing names needs only the index, and read() checks
// the one dataset it reads.
std::unique_ptr<checkpoint::CheckpointReader> open_latest(const RunConfig& config,
                                                          std::string_view purpose) {
  const std::string& model_dir = config.model_dir;
  std::optional<std::string> latest =
      checkpoint::latest_checkpoint(model_dir, config.file_system().get());
  if (!latest) {
    throw NotFoundError(str_cat("cannot ", purpose, ": no checkpoint in model_dir ", model_dir));
  }
  return checkpoint::CheckpointReader::open(*latest);
}

}  // namespace

std::vector<std::string> Estimator::get_variable_names() const {
  auto reader = open_latest(config_, "list variables");
  std::vector<std::string> names;
  for (const auto& [name, info] : reader->variables()) names.push_back(name);
  return names;
}

Tensor Estimator::get_variable_value(const std::string& name) const {
  auto reader = open_latest(config_, "read a variable");
  return reader->read(name);
}

}  // namespace cadre
