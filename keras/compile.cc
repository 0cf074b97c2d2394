// Model::compile and what it resolves: the optimizer, loss and metrics, the strategy and the
// RunConfig; the model_fn the Estimator runs; model_to_estimator.
#include <glog/logging.h>
#include <stdlib.h>

#include <filesystem>
#include <random>
#include <set>

#include "cadre/base/errors.h"
#include "cadre/nn/optimizers.h"
#include "cadre/nn/variable_store.h"
#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"
#include "keras/model_state.h"
#include "strategies/strategy_extended.h"

namespace cadre::keras {

namespace {

thread_local std::shared_ptr<const Strategy> current_scope_strategy;

std::shared_ptr<nn::Optimizer> optimizer_by_name(const std::string& name) {
  if (name == "adam") return nn::optimizers::adam();
  if (name == "sgd") return nn::optimizers::sgd();
  if (name == "rmsprop") return nn::optimizers::rmsprop();
  if (name == "adagrad") return nn::optimizers::adagrad();
  throw InvalidArgumentError(
      str_cat("unknown optimizer '", name, "'; known optimizers: adam, sgd, rmsprop, adagrad"));
}

std::string new_temporary_model_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "cadre_keras_XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw UnavailableError(str_cat("cannot create a temporary model_dir from ", pattern));
  }
  return pattern;
}

void require_compiled(const Model::State& state, const char* what) {
  if (!state.compiled) {
    throw FailedPreconditionError(str_cat(what, ": model '", state.name,
                                          "' is not compiled; call compile({.optimizer, .loss, "
                                          ".metrics}) first"));
  }
}

}  // namespace

Model::State::~State() {
  for (const std::string& dir : temporary_model_dirs) {
    std::error_code error;
    std::filesystem::remove_all(dir, error);
    if (error) LOG(WARNING) << "could not remove " << dir << ": " << error.message();
  }
}

StrategyScope::StrategyScope(std::shared_ptr<const Strategy> strategy)
    : previous_(std::move(current_scope_strategy)) {
  if (!strategy) throw InvalidArgumentError("StrategyScope: the strategy is null");
  current_scope_strategy = std::move(strategy);
}
StrategyScope::~StrategyScope() { current_scope_strategy = std::move(previous_); }
std::shared_ptr<const Strategy> current_strategy() { return current_scope_strategy; }

OptimizerArg::OptimizerArg(const char* name) : optimizer_(optimizer_by_name(name)) {}
OptimizerArg::OptimizerArg(const std::string& name) : optimizer_(optimizer_by_name(name)) {}
OptimizerArg::OptimizerArg(std::shared_ptr<nn::Optimizer> optimizer)
    : optimizer_(std::move(optimizer)) {
  if (!optimizer_) throw InvalidArgumentError("compile: the optimizer is null");
}

void Model::compile(CompileOptions options) {
  State& s = *state_;
  if (!options.loss) {
    throw InvalidArgumentError(
        "compile: no loss; pass .loss by name (\"sparse_categorical_crossentropy\", ...) or as an "
        "object (SparseCategoricalCrossentropy({.from_logits = true}))");
  }
  std::set<std::string> names;
  for (const Metric& m : options.metrics) {
    if (!names.insert(m.name()).second) {
      throw InvalidArgumentError(str_cat("compile: metric '", m.name(), "' is listed twice"));
    }
  }
  RunConfig config = std::move(options.config);
  std::shared_ptr<const Strategy> strategy = options.distribute;
  if (!strategy) strategy = s.scope_strategy;
  if (!strategy) strategy = current_strategy();
  if (!strategy) strategy = config.train_distribute;
  if (strategy && strategy->num_workers() > 1 && !config.cluster) {
    throw InvalidArgumentError(str_cat(
        "compile: the strategy trains on ", strategy->num_workers(),
        " workers but the RunConfig has no cluster; pass .config = RunConfig::from_environment() "
        "(TF_CONFIG)"));
  }
  config.train_distribute = strategy;
  // Evaluation runs in this process (the chief's): under the training strategy when that
  // stays within it, else on one device.
  if (!config.eval_distribute && strategy && strategy->num_workers() == 1 &&
      strategy->extended().parameter_servers() == nullptr) {
    config.eval_distribute = strategy;
  }
  s.explicit_model_dir = !config.model_dir.empty();
  if (config.model_dir.empty()) {
    config.model_dir = new_temporary_model_dir();
    s.temporary_model_dirs.push_back(config.model_dir);
  }
  if (!config.tf_random_seed) {
    config.tf_random_seed = std::random_device{}();
    LOG(INFO) << "model '" << s.name << "': tf_random_seed " << *config.tf_random_seed;
  }
  config.progress_line = RunConfig::ProgressLine::kOff;  // fit draws Keras's own
  config.validate();
  s.loss = std::move(options.loss);
  s.metrics = std::move(options.metrics);
  s.set_optimizer(options.optimizer.get());
  s.config = std::move(config);
  s.compiled = true;
}

bool Model::compiled() const { return state_->compiled; }
const RunConfig& Model::config() const {
  require_compiled(*state_, "config");
  return state_->config;
}
const std::string& Model::model_dir() const { return config().model_dir; }
bool Model::is_chief() const { return !state_->compiled || state_->config.is_chief; }

ModelFn Model::model_fn() const {
  require_compiled(*state_, "model_fn");
  if (!state_->built()) internal::ensure_built(*state_, nullptr);
  std::shared_ptr<const State> state = state_;
  return [state](const io::Features& features, const Tensor& labels, ModeKeys mode, const Params&) {
    Tensor logits;
    Tensor outputs = internal::forward(*state, features, mode == ModeKeys::kTrain, &logits);
    if (mode == ModeKeys::kPredict) {
      return EstimatorSpec::predict({{state->output->layer->name(), outputs}});
    }
    Tensor loss = (*state->loss)(labels, outputs, logits);
    if (mode == ModeKeys::kEval) {
      MetricOps ops;
      for (const Metric& m : state->metrics) {
        std::shared_ptr<nn::Metric> metric =
            nn::current_store().metric(m.name(), [&m] { return m.make(); });
        m.update(*metric, labels, outputs);
        ops[m.name()] = metric;
      }
      return EstimatorSpec::eval(loss, std::move(ops));
    }
    // Training reports each metric per batch; fit averages them over the epoch, and the
    // summaries show them beside the loss.
    std::map<std::string, Tensor> batch_metrics;
    for (const Metric& m : state->metrics) {
      std::shared_ptr<nn::Metric> metric = m.make();
      m.update(*metric, labels, outputs);
      batch_metrics[m.name()] = Tensor::scalar<double>(metric->result());
    }
    EstimatorSpec spec = EstimatorSpec::train(loss, state->optimizer());
    spec.with_scalar_summaries(std::move(batch_metrics));
    return spec;
  };
}

double Model::learning_rate() const {
  require_compiled(*state_, "learning_rate");
  return state_->optimizer()->learning_rate().at(0);
}

void Model::set_learning_rate(double learning_rate) {
  require_compiled(*state_, "set_learning_rate");
  if (!(learning_rate > 0)) {
    throw InvalidArgumentError(str_cat("set_learning_rate: ", learning_rate, " is not positive"));
  }
  std::shared_ptr<nn::Optimizer> optimizer = state_->optimizer();
  if (optimizer->learning_rate().is_schedule()) {
    throw InvalidArgumentError(
        "set_learning_rate: the optimizer's learning rate is a schedule; setting it needs a "
        "constant rate");
  }
  nn::OptimizerConfig config = optimizer->config();
  config.numbers["learning_rate"] = learning_rate;
  state_->set_optimizer(nn::optimizer_from_config(config));
}

std::vector<std::string> Model::weight_names() const {
  require_compiled(*state_, "weight_names");
  std::vector<std::string> names;
  std::vector<const internal::LayerImpl*> seen;
  for (const auto& node : state_->order) {
    if (std::find(seen.begin(), seen.end(), node->layer.get()) != seen.end()) continue;
    seen.push_back(node->layer.get());
    std::vector<internal::Dims> shapes;
    for (const auto& in : node->inbound) shapes.push_back(in->shape);
    for (const auto& w : node->layer->weights(shapes)) {
      names.push_back(str_cat(node->layer->name(), "/", w.name));
    }
  }
  return names;
}

Tensor Model::get_weight(const std::string& name) const {
  Estimator estimator(model_fn(), config());
  return estimator.get_variable_value(name);
}

Estimator model_to_estimator(const Model& model, std::optional<RunConfig> config) {
  return Estimator(model.model_fn(), config ? std::move(*config) : model.config());
}

}  // namespace cadre::keras
