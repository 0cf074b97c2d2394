#include "serving/inference.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "serving/tensor_proto.h"

namespace cadre::serving_internal {

namespace {

void add_tensor_info(const std::string& name, const Predictor::TensorSpec& spec,
                     const std::string& signature,
                     google::protobuf::Map<std::string, tensorflow::TensorInfo>* infos) {
  tensorflow::TensorInfo& info = (*infos)[name];
  // TensorFlow names a signature's tensors after the graph; Cadre has none, so the name
  // only tells the signature and the key apart.
  info.set_name(str_cat(signature, "_", name, ":0"));
  info.set_dtype(to_proto_dtype(spec.dtype));
  info.mutable_tensor_shape()->add_dim()->set_size(-1);
  for (int64_t dim : spec.shape) info.mutable_tensor_shape()->add_dim()->set_size(dim);
}

void add_examples_info(tensorflow::SignatureDef* def) {
  tensorflow::TensorInfo& info = (*def->mutable_inputs())["inputs"];
  info.set_name("input_example_tensor:0");
  info.set_dtype(tensorflow::DT_STRING);
  info.mutable_tensor_shape()->add_dim()->set_size(-1);
}

void add_output_info(const std::string& key, tensorflow::DataType dtype, int64_t columns,
                     const std::string& signature, tensorflow::SignatureDef* def) {
  tensorflow::TensorInfo& info = (*def->mutable_outputs())[key];
  info.set_name(str_cat(signature, "_", key, ":0"));
  info.set_dtype(dtype);
  info.mutable_tensor_shape()->add_dim()->set_size(-1);
  info.mutable_tensor_shape()->add_dim()->set_size(columns);
}

// The name of the signature a classify or regress request runs (see run_examples).
std::string examples_signature(const LoadedVersion& version, const std::string& asked,
                               ExportOutput::Kind kind, std::string_view api) {
  std::vector<std::string> of_kind;
  for (const auto& [name, outputs] : version.signatures()) {
    if (version.export_output(name).kind == kind) of_kind.push_back(name);
  }
  std::string name = asked;
  if (name.empty()) {
    bool default_fits = version.signatures().count(kDefaultSignature) &&
                        version.export_output(kDefaultSignature).kind == kind;
    if (default_fits) return kDefaultSignature;
    if (of_kind.size() == 1) return of_kind[0];
    name = kDefaultSignature;
  }
  const ExportOutput& found = version.export_output(name);  // throws for an unknown one
  if (found.kind != kind) {
    throw InvalidArgumentError(str_cat(
        api, " needs a ", kind == ExportOutput::Kind::kClassify ? "classification" : "regression",
        " signature; '", name, "' is a ", found.kind_name(), " signature (version ",
        version.version(), "'s ", api, " signatures: ", of_kind.empty() ? "none" : join(of_kind),
        ")"));
  }
  return name;
}

}  // namespace

Prediction Inference::run_examples(Batcher::Arrival arrival, std::optional<int64_t> version,
                                   const std::string& signature, ExportOutput::Kind kind,
                                   const ExampleBatch& batch) {
  std::shared_ptr<LoadedVersion> loaded = versions_.get(version);
  Prediction prediction;
  prediction.version = loaded->version();
  prediction.signature = examples_signature(
      *loaded, signature, kind, kind == ExportOutput::Kind::kClassify ? "Classify" : "Regress");
  prediction.export_output = loaded->export_output(prediction.signature);
  io::Features inputs = examples_to_inputs(batch, loaded->inputs());
  check_inputs(inputs, loaded->inputs());
  prediction.outputs =
      batcher_.run(std::move(arrival), loaded, prediction.signature, std::move(inputs));
  return prediction;
}

Prediction Inference::predict(Batcher::Arrival arrival, std::optional<int64_t> version,
                              const std::string& signature,
                              const std::function<io::Features(const TensorSpecs&)>& decode,
                              const std::vector<std::string>& output_filter) {
  std::shared_ptr<LoadedVersion> loaded = versions_.get(version);
  Prediction prediction;
  prediction.version = loaded->version();
  prediction.signature = signature.empty() ? kDefaultSignature : signature;
  const TensorSpecs& outputs = loaded->outputs(prediction.signature);
  prediction.export_output = loaded->export_output(prediction.signature);
  if (prediction.export_output.kind != ExportOutput::Kind::kPredict) {
    throw InvalidArgumentError(str_cat(
        "signature '", prediction.signature, "' is a ", prediction.export_output.kind_name(),
        " signature, which takes tf.Examples: use :", prediction.export_output.kind_name(),
        " (gRPC ",
        prediction.export_output.kind == ExportOutput::Kind::kClassify ? "Classify" : "Regress",
        ")"));
  }
  for (const std::string& name : output_filter) {
    if (!outputs.count(name)) {
      std::vector<std::string> names;
      for (const auto& [key, spec] : outputs) names.push_back(key);
      throw InvalidArgumentError(str_cat("output_filter names '", name, "', which signature '",
                                         prediction.signature,
                                         "' does not return; it has: ", join(names)));
    }
  }
  io::Features inputs = decode(loaded->inputs());
  check_inputs(inputs, loaded->inputs());
  prediction.outputs =
      batcher_.run(std::move(arrival), loaded, prediction.signature, std::move(inputs));
  if (!output_filter.empty()) {
    std::map<std::string, Tensor> kept;
    for (const std::string& name : output_filter) kept[name] = prediction.outputs.at(name);
    prediction.outputs = std::move(kept);
  }
  return prediction;
}

void check_inputs(const io::Features& inputs, const TensorSpecs& specs) {
  std::vector<std::string> takes;
  for (const auto& [name, spec] : specs) takes.push_back(name);
  for (const auto& [name, value] : inputs) {
    if (!specs.count(name)) {
      throw InvalidArgumentError(
          str_cat("unknown input '", name, "'; the signature takes: ", join(takes)));
    }
  }
  int64_t batch = -1;
  for (const auto& [name, spec] : specs) {
    const Tensor* value = inputs.find(name);
    if (!value) {
      throw InvalidArgumentError(
          str_cat("input '", name, "' is missing; the signature takes: ", join(takes)));
    }
    std::vector<int64_t> per_example;
    for (int axis = 1; axis < value->rank(); ++axis) per_example.push_back(value->dim(axis));
    if (value->rank() == 0 || value->dim(0) == 0 || value->dtype() != spec.dtype ||
        per_example != spec.shape) {
      throw InvalidArgumentError(str_cat("input '", name, "' is ", dtype_name(value->dtype()), " ",
                                         value->shape(), "; the signature takes ",
                                         dtype_name(spec.dtype), " [batch, ", join(spec.shape),
                                         "] with a batch of at least 1"));
    }
    if (batch >= 0 && value->dim(0) != batch) {
      throw InvalidArgumentError(str_cat("input '", name, "' has a batch of ", value->dim(0),
                                         " where the others have ", batch));
    }
    batch = value->dim(0);
  }
}

tensorflow::serving::GetModelStatusResponse model_status(const ModelVersions& versions,
                                                         std::optional<int64_t> version) {
  tensorflow::serving::GetModelStatusResponse response;
  std::map<int64_t, std::shared_ptr<LoadedVersion>> served;
  if (version) {
    served[*version] = versions.get(version);
  } else {
    served = versions.all();
    if (served.empty()) versions.get(std::nullopt);  // throws NotFoundError saying so
  }
  for (auto it = served.rbegin(); it != served.rend(); ++it) {
    auto* status = response.add_model_version_status();
    status->set_version(it->first);
    status->set_state(tensorflow::serving::ModelVersionStatus::AVAILABLE);
    status->mutable_status()->set_error_code(tensorflow::error::OK);
  }
  return response;
}

tensorflow::serving::SignatureDefMap signature_defs(const LoadedVersion& version) {
  tensorflow::serving::SignatureDefMap map;
  for (const auto& [signature, outputs] : version.signatures()) {
    tensorflow::SignatureDef& def = (*map.mutable_signature_def())[signature];
    const ExportOutput& kind = version.export_output(signature);
    def.set_method_name(str_cat("tensorflow/serving/", kind.kind_name()));
    if (kind.kind == ExportOutput::Kind::kClassify) {
      add_examples_info(&def);
      const std::string& key = kind.scores.empty() ? kind.classes : kind.scores;
      const Predictor::TensorSpec& spec = outputs.at(key);
      int64_t columns = spec.shape.empty() ? 1 : spec.shape[0];
      if (!kind.classes.empty() || !kind.class_names.empty()) {
        add_output_info("classes", tensorflow::DT_STRING, columns, signature, &def);
      }
      if (!kind.scores.empty()) {
        add_output_info("scores", tensorflow::DT_FLOAT, columns, signature, &def);
      }
      continue;
    }
    if (kind.kind == ExportOutput::Kind::kRegress) {
      add_examples_info(&def);
      add_output_info("outputs", tensorflow::DT_FLOAT, 1, signature, &def);
      continue;
    }
    for (const auto& [name, spec] : version.inputs()) {
      add_tensor_info(name, spec, signature, def.mutable_inputs());
    }
    for (const auto& [name, spec] : outputs) {
      add_tensor_info(name, spec, signature, def.mutable_outputs());
    }
  }
  return map;
}

bool authorized(const std::string& token, std::string_view authorization) {
  if (token.empty()) return true;
  std::string expected = "Bearer " + token;
  if (authorization.size() != expected.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    difference |= static_cast<unsigned char>(authorization[i] ^ expected[i]);
  }
  return difference == 0;
}

}  // namespace cadre::serving_internal
