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

}  // namespace

Prediction Inference::predict(Batcher::Arrival arrival, std::optional<int64_t> version,
                              const std::string& signature,
                              const std::function<io::Features(const TensorSpecs&)>& decode,
                              const std::vector<std::string>& output_filter) {
  std::shared_ptr<LoadedVersion> loaded = versions_.get(version);
  Prediction prediction;
  prediction.version = loaded->version();
  prediction.signature = signature.empty() ? kDefaultSignature : signature;
  const TensorSpecs& outputs = loaded->outputs(prediction.signature);
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
    def.set_method_name("tensorflow/serving/predict");
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
