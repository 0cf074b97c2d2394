// Estimator::predict (a lazy stream of per-example predictions) and Estimator::export_model.
#include <glog/logging.h>

#include "cadre/autodiff/tape.h"
#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "cadre/checkpoint/variables.h"
#include "cadre/checkpoint/writer.h"
#include "cadre/estimator/estimator.h"
#include "core/base/strings.h"
#include "estimator/export_format.h"
#include "estimator/model_session.h"

namespace cadre {

using estimator_internal::ModelSession;

// Not in an anonymous namespace: Predictions::State, which has external linkage, holds one.
namespace estimator_internal {

class PredictRun : public Run {
 public:
  PredictRun(const RunConfig& config, ModelSession& session, int64_t global_step)
      : config_(config), session_(session), global_step_(global_step) {}
  ModeKeys mode() const override { return ModeKeys::kPredict; }
  const RunConfig& config() const override { return config_; }
  int64_t global_step() const override { return global_step_; }
  std::optional<int64_t> max_steps() const override { return std::nullopt; }
  nn::VariableStore& store() override { return session_.store(); }
  io::SummaryWriter* summary_writer() override { return nullptr; }
  std::string save_checkpoint() override {
    throw FailedPreconditionError("prediction does not save checkpoints");
  }

 private:
  const RunConfig& config_;
  ModelSession& session_;
  int64_t global_step_;
};

}  // namespace estimator_internal

using estimator_internal::PredictRun;

struct Predictions::State {
  ModelFn model_fn;
  Params params;
  std::vector<std::string> keys;
  std::unique_ptr<ModelSession> session;
  std::unique_ptr<PredictRun> run;
  std::optional<io::Iterator> iterator;
  Hooks hooks;
  bool begun = false, ended = false;
  std::map<std::string, Tensor> batch;  // the current batch's outputs
  int64_t batch_rows = 0, row = 0;

  bool load_batch() {
    nn::VariableStoreScope store_scope(session->store());
    GeneratorScope generator_scope(session->generator());
    if (!begun) {
      for (const auto& hook : hooks) hook->begin(*run);
      for (const auto& hook : hooks) hook->after_create(*run);
      begun = true;
    }
    RunContext context;
    for (const auto& hook : hooks) hook->before_run(*run, context);
    std::optional<io::Element> element = iterator->next();
    if (!element) return false;
    NoGradScope no_grad;
    EstimatorSpec spec =
        session->call(model_fn, element->features, element->labels, ModeKeys::kPredict, params);
    batch.clear();
    if (keys.empty()) {
      batch = spec.predictions;
    } else {
      for (const std::string& key : keys) {
        auto it = spec.predictions.find(key);
        if (it == spec.predictions.end()) {
          std::vector<std::string> valid;
          for (const auto& [name, value] : spec.predictions) valid.push_back(name);
          throw InvalidArgumentError(str_cat("predict: unknown predict key '", key,
                                             "'; the model predicts: ", join(valid)));
        }
        batch[key] = it->second;
      }
    }
    batch_rows = batch.begin()->second.dim(0);
    row = 0;
    StepResult result;
    result.global_step = run->global_step();
    result.batch_size = batch_rows;
    result.loss = std::numeric_limits<double>::quiet_NaN();
    result.spec = &spec;
    for (const auto& hook : hooks) hook->after_run(*run, result, context);
    if (context.stop_requested()) ended_after_batch = true;
    return true;
  }
  bool ended_after_batch = false;
};

Predictions::Predictions(std::unique_ptr<State> state) : state_(std::move(state)) {}
Predictions::Predictions(Predictions&&) noexcept = default;
Predictions& Predictions::operator=(Predictions&&) noexcept = default;
Predictions::~Predictions() = default;

std::optional<std::map<std::string, Tensor>> Predictions::next() {
  State& s = *state_;
  if (s.ended) return std::nullopt;
  while (s.row >= s.batch_rows) {
    if (s.ended_after_batch || !s.load_batch()) {
      s.ended = true;
      nn::VariableStoreScope store_scope(s.session->store());
      for (const auto& hook : s.hooks) hook->end(*s.run);
      return std::nullopt;
    }
  }
  std::map<std::string, Tensor> example;
  for (const auto& [name, value] : s.batch) {
    example[name] = value.slice(0, s.row, s.row + 1).squeeze(0);
  }
  ++s.row;
  return example;
}

Predictions Estimator::predict(const InputFn& input_fn, const PredictArgs& args) {
  auto [reader, verified] =
      estimator_internal::open_checkpoint_for(config_.model_dir, args.checkpoint_path, "predict");
  auto state = std::make_unique<Predictions::State>();
  state->model_fn = model_fn_;
  state->params = params_;
  state->keys = args.predict_keys;
  state->session =
      std::make_unique<ModelSession>(seed_, reader, checkpoint::same_names(), !verified);
  state->run = std::make_unique<PredictRun>(config_, *state->session, reader->global_step());
  state->iterator.emplace(input_fn(io::InputContext{}).make_iterator());
  state->hooks = args.hooks;
  return Predictions(std::move(state));
}

std::string Estimator::export_model(const std::string& export_dir_base,
                                    const io::Features& serving_features,
                                    const std::string& checkpoint_path) const {
  if (export_dir_base.empty()) {
    throw InvalidArgumentError("export_model: export_dir_base is empty");
  }
  std::shared_ptr<Env> env = config_.file_system();
  if (serving_features.empty()) {
    throw InvalidArgumentError("export_model: serving_features is empty; give a batch of inputs");
  }
  auto [reader, verified] =
      estimator_internal::open_checkpoint_for(config_.model_dir, checkpoint_path, "export");
  ModelSession session(seed_, reader, checkpoint::same_names(), !verified);
  EstimatorSpec spec;
  {
    NoGradScope no_grad;
    spec = session.call(model_fn_, serving_features, Tensor(), ModeKeys::kPredict, params_);
  }
  estimator_internal::ExportedModel model =
      estimator_internal::describe_export(spec, serving_features, *reader);

  checkpoint::CheckpointData data;
  data.global_step = reader->global_step();
  checkpoint::add_variables(session.store(), &data);
  data.attributes["exported_from"] = reader->path();

  // Everything is written into a temporary directory beside the export, which one rename
  // then publishes whole under its timestamp.
  env->create_dir(export_dir_base);
  std::string temporary = temporary_path_for(join_path(export_dir_base, ".export"));
  env->create_dir(temporary);
  std::string export_dir;
  bool renamed = false;
  try {
    std::string variables = join_path(temporary, estimator_internal::kExportVariablesFile);
    checkpoint::write_checkpoint_file(variables, data);
    env->sync_file(variables);
    write_file_atomically(*env, join_path(temporary, estimator_internal::kExportDescriptionFile),
                          estimator_internal::export_description_json(model));
    env->sync_dir(temporary);
    export_dir = estimator_internal::new_export_dir(*env, export_dir_base);
    env->rename_file(temporary, export_dir);
    renamed = true;
    env->sync_dir(export_dir_base);
  } catch (...) {
    // An export whose rename may not survive a crash is withdrawn too: the caller is told
    // it failed, so it must not stay.
    std::string partial = renamed ? export_dir : temporary;
    try {
      env->remove_dir_recursively(partial);
    } catch (const std::exception& error) {
      LOG(WARNING) << "could not remove " << partial << ": " << error.what();
    }
    throw;
  }
  LOG(INFO) << "exported step " << data.global_step << " of " << reader->path() << " to "
            << export_dir;
  return export_dir;
}

}  // namespace cadre
