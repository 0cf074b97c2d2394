// Estimator::evaluate, and the queries of the latest checkpoint.
#include <glog/logging.h>

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

}  // namespace

EvalResult Estimator::evaluate(const InputFn& input_fn, const EvalArgs& args) {
  if (args.steps && *args.steps < 0) {
    throw InvalidArgumentError(str_cat("evaluate: steps must be >= 0, got ", *args.steps));
  }
  auto [reader, verified] =
      estimator_internal::open_checkpoint_for(config_.model_dir, args.checkpoint_path, "evaluate");
  std::shared_ptr<const Strategy> strategy = config_.eval_distribute;
  if (!strategy) strategy = OneDeviceStrategy::create();
  // Evaluation restores the checkpoint into this process: under a strategy whose variables
  // live on ps tasks (a client's, or a lone worker's), it runs on that strategy's devices.
  if (strategy->extended().parameter_servers() != nullptr) {
    const std::vector<Device>& devices = strategy->devices();
    if (devices.size() == 1) {
      strategy = OneDeviceStrategy::create(devices[0]);
    } else {
      strategy = MirroredStrategy::create(devices);
    }
  }
  const int replicas = strategy->num_local_replicas();
  // Every replica evaluates its own restored copy, also under a strategy that shares one
  // copy in training: metrics live in the store, and each replica updates its own.
  std::vector<std::unique_ptr<nn::VariableStore>> stores;
  for (int r = 0; r < replicas; ++r) {
    nn::VariableCreator restore =
        checkpoint::restoring_creator(reader, checkpoint::same_names(), /*verify=*/!verified);
    Device device = strategy->devices()[r];
    stores.push_back(std::make_unique<nn::VariableStore>(
        seed_, [restore, device](const nn::VariableSpec& spec, uint64_t seed) {
          DeviceScope scope(device);
          return restore(spec, seed);
        }));
  }
  DistributedVariables variables(std::move(stores));
  std::vector<Generator> generators;
  for (int r = 0; r < replicas; ++r) generators.emplace_back(seed_, static_cast<uint64_t>(r));
  int64_t global_step = reader->global_step();
  EvalRun run(config_, variables.primary(), global_step);
  DistributedIterator iterator =
      strategy->distribute_datasets_from_function(input_fn).make_iterator();

  nn::VariableStoreScope store_scope(variables.primary());
  Hooks hooks = args.hooks;
  for (const auto& hook : hooks) hook->begin(run);
  for (const auto& hook : hooks) hook->after_create(run);
  double loss_sum = 0;
  int64_t steps = 0;
  EstimatorSpec spec;
  int64_t limit = args.steps.value_or(0);
  using estimator_internal::ReplicaOutput;
  // A planned stop abandons the evaluation: nothing of it is written.
  estimator_internal::StopNotice notice(config_.planned_stop);
  while (limit == 0 || steps < limit) {
    if (notice.requested()) {
      estimator_internal::throw_planned_stop(
          str_cat("the evaluation of ", reader->path(), " was abandoned: a planned stop (",
                  notice.reason(), ")"),
          -1);
    }
    RunContext context;
    for (const auto& hook : hooks) hook->before_run(run, context);
    std::optional<PerReplica<io::Element>> inputs = iterator.next();
    if (!inputs) break;
    PerReplica<ReplicaOutput> results = strategy->run<ReplicaOutput>(
        variables,
        [&](ReplicaContext& ctx) {
          ReplicaOutput out;
          if (ctx.replica_id() >= static_cast<int>(inputs->size())) return out;  // input ended
          const io::Element& batch = (*inputs)[ctx.replica_id()];
          NoGradScope no_grad;
          out.spec = model_fn_(batch.features, batch.labels, ModeKeys::kEval, params_);
          out.spec.validate(ModeKeys::kEval);
          out.loss = out.spec.loss.item<double>();
          out.batch_size = estimator_internal::batch_size_of(batch.features, batch.labels);
          return out;
        },
        &generators);
    spec = std::move(results[0].spec);
    if (steps == 0) {
      for (const auto& hook : spec.evaluation_hooks) {
        hook->begin(run);
        hook->after_create(run);
      }
      hooks.insert(hooks.end(), spec.evaluation_hooks.begin(), spec.evaluation_hooks.end());
    }
    StepResult result = estimator_internal::combine_replicas(results, global_step);
    result.spec = &spec;
    // TensorFlow's eval loss: the mean over steps of each (global) batch's loss.
    loss_sum += result.loss;
    ++steps;
    for (const auto& hook : hooks) hook->after_run(run, result, context);
    if (context.stop_requested()) break;
  }
  if (steps == 0) {
    throw OutOfRangeError(
        str_cat("evaluate: the input of ", eval_dir_name(args.name), " yielded no batch"));
  }
  for (const auto& hook : hooks) hook->end(run);

  EvalResult results;
  for (const auto& [name, metric] : spec.eval_metric_ops) {
    // The other replicas' metrics of the same name, merged into replica 0's.
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
  results.set("loss", loss_sum / static_cast<double>(steps));
  results.set("global_step", static_cast<double>(global_step));
  if (!config_.model_dir.empty()) {
    std::string eval_dir = join_path(config_.model_dir, eval_dir_name(args.name));
    try {
      io::SummaryWriter& writer = eval_writers_->writer(eval_dir, config_.file_system());
      for (const auto& [name, value] : results) {
        if (name != "global_step") writer.scalar(name, value, global_step);
      }
      writer.flush();
    } catch (const PermissionDeniedError& error) {
      // A read-only model_dir is evaluated all the same; only TensorBoard misses the result.
      LOG(WARNING) << "cannot record the evaluation of step " << global_step << " in " << eval_dir
                   << " (" << error.what() << "); returning it unrecorded";
    }
  }
  std::string line = str_cat("evaluation of ", reader->path(), " (", steps, " steps on ",
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
