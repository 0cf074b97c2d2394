// Model::evaluate and predict over the Estimator, from the latest checkpoint or, for a model
// never fitted, its initial weights.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/writer.h"
#include "cadre/nn/variable_store.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"
#include "keras/model_state.h"
#include "keras/progbar.h"

namespace cadre::keras {

namespace {

// The checkpoint evaluate and predict read: "" (the latest of model_dir) when there is one,
// else (a model never fitted) the initial weights, which Keras evaluates on a model it has just
// built. They are the weights fit starts from: the layers' initializers seeded with the compiled
// tf_random_seed (the VariableStore seeds each variable by its name, as every Estimator call
// does), made by calling the model on the first batch of `x`. They go to
// model_dir/initial/model.ckpt-0.h5 (rewritten by each such call, published by a rename) and
// not into the state file, so that a later fit still starts from scratch.
std::string weights_checkpoint(const Model::State& s, const io::Dataset& x, const char* what) {
  if (checkpoint::latest_checkpoint(s.config.model_dir)) return "";
  io::Iterator it = x.make_iterator();
  std::optional<io::Element> first = it.next();
  if (!first) throw InvalidArgumentError(str_cat(what, ": the Dataset is empty"));
  nn::VariableStore store(*s.config.tf_random_seed);
  {
    nn::VariableStoreScope scope(store);
    internal::forward(s, first->features, /*training=*/false, nullptr);
  }
  checkpoint::CheckpointData data;
  for (const nn::Variable* v : store.variables()) data.variables[v->name()] = v->tensor();
  data.attributes["origin"] = "keras initial weights";
  std::filesystem::path dir = std::filesystem::path(s.config.model_dir) / "initial";
  std::filesystem::path path = dir / "model.ckpt-0.h5";
  std::filesystem::path temporary = dir / str_cat("model.ckpt-0.h5.tmp", ::getpid());
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    throw UnavailableError(str_cat(what, ": cannot create ", dir.string(), ": ", error.message()));
  }
  checkpoint::write_checkpoint_file(temporary.string(), data);
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary);
    throw UnavailableError(
        str_cat(what, ": cannot publish ", path.string(), ": ", error.message()));
  }
  return path.string();
}

}  // namespace

EvalResult Model::evaluate(const io::Dataset& x, EvaluateOptions options) {
  if (!state_->compiled) {
    throw FailedPreconditionError(
        str_cat("evaluate: model '", state_->name, "' is not compiled; call compile first"));
  }
  internal::ensure_built(*state_, &x);
  Estimator estimator(model_fn(), state_->config);
  EvalArgs args;
  args.steps = options.steps;
  args.name = "evaluate";
  args.checkpoint_path = weights_checkpoint(*state_, x, "evaluate");
  EvalResult result = estimator.evaluate(internal::per_replica_input(x), args);
  if (options.verbose > 0 && options.output) {
    Logs logs;
    for (const auto& [name, value] : result) {
      if (name != "global_step") logs[name] = value;
    }
    std::fprintf(options.output, "evaluate%s\n", internal::format_logs(logs).c_str());
  }
  return result;
}

Tensor Model::predict(const io::Dataset& x, PredictOptions options) {
  if (!state_->compiled) {
    throw FailedPreconditionError(
        str_cat("predict: model '", state_->name, "' is not compiled; call compile first"));
  }
  internal::ensure_built(*state_, &x);
  Estimator estimator(model_fn(), state_->config);
  PredictArgs args;
  args.checkpoint_path = weights_checkpoint(*state_, x, "predict");
  io::Dataset input = options.steps ? x.take(*options.steps) : x;
  Predictions predictions = estimator.predict([input](const InputContext&) { return input; }, args);
  const std::string key = state_->output->layer->name();
  std::vector<Tensor> rows;
  while (auto p = predictions.next()) rows.push_back(p->at(key));
  if (rows.empty()) throw InvalidArgumentError("predict: the Dataset is empty");
  return stack(rows, 0);
}

}  // namespace cadre::keras
