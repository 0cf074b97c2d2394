#include "cadre/estimator/predictor.h"

#include <filesystem>

#include "cadre/autodiff/tape.h"
#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "estimator/export_format.h"
#include "estimator/model_session.h"

namespace cadre {

using estimator_internal::ExportedModel;
using estimator_internal::ModelSession;

// The exported model's description and the session holding its variables.
struct Predictor::Impl {
  ModelFn model_fn;
  Params params;
  std::unique_ptr<ExportedModel> model;
  std::unique_ptr<ModelSession> session;
  std::string export_dir;
};

Predictor::Predictor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Predictor::~Predictor() = default;

std::unique_ptr<Predictor> Predictor::load(const std::string& export_dir, ModelFn model_fn,
                                           Params params) {
  if (!model_fn) throw InvalidArgumentError("Predictor::load: model_fn is empty");
  if (!std::filesystem::is_directory(export_dir)) {
    throw NotFoundError(str_cat("Predictor::load: no exported model at ", export_dir));
  }
  std::string description_path = join_path(export_dir, estimator_internal::kExportDescriptionFile);
  std::string json = posix_env()->read_file(description_path);
  auto model = std::make_unique<ExportedModel>(
      estimator_internal::parse_export_description(json, description_path));
  std::shared_ptr<const checkpoint::CheckpointReader> reader = checkpoint::CheckpointReader::open(
      join_path(export_dir, estimator_internal::kExportVariablesFile));
  auto session = std::make_unique<ModelSession>(0, reader, checkpoint::same_names(), true);
  return std::unique_ptr<Predictor>(new Predictor(std::make_unique<Impl>(Impl{
      std::move(model_fn), std::move(params), std::move(model), std::move(session), export_dir})));
}

namespace {

const ExportOutput& find_signature(const ExportedModel& model, const std::string& signature,
                                   const std::string& export_dir) {
  auto found = model.signatures.find(signature);
  if (found == model.signatures.end()) {
    std::vector<std::string> names;
    for (const auto& [name, keys] : model.signatures) names.push_back(name);
    throw InvalidArgumentError(str_cat("Predictor: no signature '", signature, "' in ", export_dir,
                                       "; it has: ", join(names)));
  }
  return found->second;
}

Predictor::TensorSpec public_spec(const estimator_internal::TensorSpec& spec) {
  return Predictor::TensorSpec{spec.dtype, spec.shape};
}

}  // namespace

std::map<std::string, Tensor> Predictor::predict(const io::Features& inputs,
                                                 const std::string& signature) {
  const std::vector<std::string> keys =
      find_signature(*impl_->model, signature, impl_->export_dir).keys();
  for (const auto& [name, spec] : impl_->model->inputs) {
    const Tensor* value = inputs.find(name);
    if (!value) {
      throw InvalidArgumentError(str_cat("Predictor: input '", name,
                                         "' is missing; the model takes: ", join(input_names())));
    }
    std::vector<int64_t> per_example;
    for (int axis = 1; axis < value->rank(); ++axis) per_example.push_back(value->dim(axis));
    if (value->rank() == 0 || value->dtype() != spec.dtype || per_example != spec.shape) {
      throw InvalidArgumentError(str_cat(
          "Predictor: input '", name, "' is ", dtype_name(value->dtype()), " ", value->shape(),
          "; the model takes ", dtype_name(spec.dtype), " [batch, ", join(spec.shape), "]"));
    }
  }
  EstimatorSpec spec;
  {
    NoGradScope no_grad;
    spec =
        impl_->session->call(impl_->model_fn, inputs, Tensor(), ModeKeys::kPredict, impl_->params);
  }
  std::map<std::string, Tensor> outputs;
  for (const std::string& key : keys) {
    auto it = spec.predictions.find(key);
    if (it == spec.predictions.end()) {
      throw InvalidArgumentError(str_cat("Predictor: model_fn no longer predicts '", key,
                                         "', which signature '", signature, "' exports"));
    }
    outputs[key] = it->second;
  }
  return outputs;
}

std::map<std::string, Predictor::TensorSpec> Predictor::input_specs() const {
  std::map<std::string, TensorSpec> specs;
  for (const auto& [name, spec] : impl_->model->inputs) specs[name] = public_spec(spec);
  return specs;
}

std::map<std::string, Predictor::TensorSpec> Predictor::output_specs(
    const std::string& signature) const {
  std::map<std::string, TensorSpec> specs;
  for (const std::string& key :
       find_signature(*impl_->model, signature, impl_->export_dir).keys()) {
    auto found = impl_->model->outputs.find(key);
    if (found != impl_->model->outputs.end()) specs[key] = public_spec(found->second);
  }
  return specs;
}

const ExportOutput& Predictor::export_output(const std::string& signature) const {
  return find_signature(*impl_->model, signature, impl_->export_dir);
}

std::vector<std::string> Predictor::signatures() const {
  std::vector<std::string> names;
  for (const auto& [name, keys] : impl_->model->signatures) names.push_back(name);
  return names;
}

std::vector<std::string> Predictor::input_names() const {
  std::vector<std::string> names;
  for (const auto& [name, spec] : impl_->model->inputs) names.push_back(name);
  return names;
}

int64_t Predictor::global_step() const { return impl_->model->global_step; }

}  // namespace cadre
