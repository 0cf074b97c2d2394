// Estimator::evaluate, and the queries of the latest checkpoint.
#include <glog/logging.h>

#include "checkpoint/state_file.h"
#include "core/autodiff/tape.h"
#include "core/base/strings.h"
#include "estimator/estimator.h"
#include "estimator/model_session.h"
#include "io/summary_writer.h"

namespace cadre {

using estimator_internal::ModelSession;

namespace {

class EvalRun : public Run {
 public:
  EvalRun(const RunConfig& config, ModelSession& session, int64_t global_step)
      : config_(config), session_(session), global_step_(global_step) {}
  ModeKeys mode() const override { return ModeKeys::kEval; }
  const RunConfig& config() const override { return config_; }
  int64_t global_step() const override { return global_step_; }
  std::optional<int64_t> max_steps() const override { return std::nullopt; }
  nn::VariableStore& store() override { return session_.store(); }
  io::SummaryWriter* summary_writer() override { return nullptr; }
  std::string save_checkpoint() override {
    throw FailedPreconditionError("evaluation does not save checkpoints");
  }

 private:
  const RunConfig& config_;
  ModelSession& session_;
  int64_t global_step_;
};

}  // namespace

EvalResult Estimator::evaluate(const InputFn& input_fn, const EvalArgs& args) {
  if (args.steps && *args.steps < 0) {
    throw InvalidArgumentError(str_cat("evaluate: steps must be >= 0, got ", *args.steps));
  }
  std::shared_ptr<const checkpoint::CheckpointReader> reader =
      estimator_internal::open_checkpoint_for(config_.model_dir, args.checkpoint_path, "evaluate");
  ModelSession session(seed_, reader, checkpoint::same_names(), /*verify_reads=*/true);
  int64_t global_step = reader->global_step();
  EvalRun run(config_, session, global_step);
  io::Dataset dataset = input_fn(io::InputContext{});
  io::Iterator iterator = dataset.make_iterator();

  nn::VariableStoreScope store_scope(session.store());
  GeneratorScope generator_scope(session.generator());
  Hooks hooks = args.hooks;
  for (const auto& hook : hooks) hook->begin(run);
  for (const auto& hook : hooks) hook->after_create(run);
  NoGradScope no_grad;
  double loss_sum = 0;
  int64_t batches = 0;
  EstimatorSpec spec;
  int64_t limit = args.steps.value_or(0);
  while (limit == 0 || batches < limit) {
    RunContext context;
    for (const auto& hook : hooks) hook->before_run(run, context);
    std::optional<io::Element> batch = iterator.next();
    if (!batch) break;
    spec = session.call(model_fn_, batch->features, batch->labels, ModeKeys::kEval, params_);
    if (batches == 0) {
      for (const auto& hook : spec.evaluation_hooks) {
        hook->begin(run);
        hook->after_create(run);
      }
      hooks.insert(hooks.end(), spec.evaluation_hooks.begin(), spec.evaluation_hooks.end());
    }
    StepResult result;
    result.global_step = global_step;
    result.batch_size = estimator_internal::batch_size_of(batch->features, batch->labels);
    result.loss = spec.loss.item<double>();
    result.spec = &spec;
    // TensorFlow's eval loss: the mean over batches of each batch's loss.
    loss_sum += result.loss;
    ++batches;
    for (const auto& hook : hooks) hook->after_run(run, result, context);
    if (context.stop_requested()) break;
  }
  if (batches == 0) {
    throw OutOfRangeError(str_cat("evaluate: the input of ", eval_dir_name(args.name),
                                  " yielded no batch"));
  }
  for (const auto& hook : hooks) hook->end(run);

  EvalResult results;
  for (const auto& [name, metric] : spec.eval_metric_ops) results[name] = metric->result();
  results["loss"] = loss_sum / batches;
  results["global_step"] = static_cast<double>(global_step);
  if (!config_.model_dir.empty()) {
    io::SummaryWriter writer(config_.model_dir + "/" + eval_dir_name(args.name));
    for (const auto& [name, value] : results) {
      if (name != "global_step") writer.scalar(name, value, global_step);
    }
    writer.close();
  }
  std::string line = str_cat("evaluation of ", reader->path(), " (", batches, " batches):");
  for (const auto& [name, value] : results) line += str_cat(" ", name, " = ", value);
  LOG(INFO) << line;
  return results;
}

std::optional<std::string> Estimator::latest_checkpoint() const {
  return checkpoint::latest_checkpoint(config_.model_dir);
}

std::vector<std::string> Estimator::get_variable_names() const {
  auto reader = estimator_internal::open_checkpoint_for(config_.model_dir, "", "list variables");
  std::vector<std::string> names;
  for (const auto& [name, info] : reader->variables()) names.push_back(name);
  return names;
}

Tensor Estimator::get_variable_value(const std::string& name) const {
  auto reader = estimator_internal::open_checkpoint_for(config_.model_dir, "", "read a variable");
  return reader->read(name);
}

}  // namespace cadre
