#include "estimator/export_format.h"

#include <google/protobuf/util/json_util.h>

#include <ctime>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "estimator/proto/export.pb.h"

namespace cadre::estimator_internal {

namespace {

TensorSpec spec_of(const Tensor& tensor) {
  TensorSpec spec;
  spec.dtype = tensor.dtype();
  for (int axis = 1; axis < tensor.rank(); ++axis) spec.shape.push_back(tensor.dim(axis));
  return spec;
}

void to_proto(const TensorSpec& spec, estimator::TensorSpec* out) {
  out->set_dtype(std::string(dtype_name(spec.dtype)));
  for (int64_t d : spec.shape) out->add_shape(d);
}

TensorSpec from_proto(const estimator::TensorSpec& in) {
  TensorSpec spec;
  spec.dtype = parse_dtype(in.dtype());
  spec.shape.assign(in.shape().begin(), in.shape().end());
  return spec;
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

}  // namespace

std::string new_export_dir(Env& env, const std::string& export_dir_base) {
  int64_t stamp = static_cast<int64_t>(std::time(nullptr));
  while (env.file_exists(join_path(export_dir_base, std::to_string(stamp)))) ++stamp;
  return join_path(export_dir_base, std::to_string(stamp));
}

ExportedModel describe_export(const EstimatorSpec& spec, const io::Features& features,
                              const checkpoint::CheckpointReader& reader) {
  ExportedModel model;
  model.global_step = reader.global_step();
  model.source_checkpoint = reader.path();
  for (const auto& [name, value] : features) {
    if (value.rank() == 0) {
      throw InvalidArgumentError(str_cat("export_model: serving feature '", name,
                                         "' must have the batch as its first dimension"));
    }
    model.inputs[name] = spec_of(value);
  }
  for (const auto& [name, value] : spec.predictions) model.outputs[name] = spec_of(value);
  model.signatures = spec.export_outputs;
  if (model.signatures.empty()) {
    std::vector<std::string>& all = model.signatures["serving_default"].outputs;
    for (const auto& [name, value] : spec.predictions) all.push_back(name);
  }
  return model;
}

std::string export_description_json(const ExportedModel& model) {
  estimator::ExportDescription description;
  description.set_format_version(kExportFormatVersion);
  description.set_global_step(model.global_step);
  description.set_source_checkpoint(model.source_checkpoint);
  description.set_created(utc_now());
  for (const auto& [name, spec] : model.inputs)
    to_proto(spec, &(*description.mutable_inputs())[name]);
  for (const auto& [name, spec] : model.outputs) {
    to_proto(spec, &(*description.mutable_outputs())[name]);
  }
  for (const auto& [name, output] : model.signatures) {
    auto& signature = (*description.mutable_signatures())[name];
    for (const std::string& key : output.keys()) signature.add_outputs(key);
    if (output.kind == ExportOutput::Kind::kPredict) continue;
    signature.set_kind(std::string(output.kind_name()));
    signature.set_scores(output.scores);
    signature.set_classes(output.classes);
    for (const std::string& label : output.class_names) signature.add_class_names(label);
    signature.set_value(output.value);
  }
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(description, &json, options);
  if (!status.ok()) throw InternalError(str_cat("export description: ", status.ToString()));
  return json;
}

ExportedModel parse_export_description(const std::string& json, const std::string& source) {
  estimator::ExportDescription description;
  auto status = google::protobuf::util::JsonStringToMessage(json, &description);
  if (!status.ok()) {
    throw DataLossError(str_cat(source, " is not an export description: ", status.ToString()));
  }
  if (description.format_version() != kExportFormatVersion) {
    throw DataLossError(str_cat(source, " has export format version ", description.format_version(),
                                "; this library reads version ", kExportFormatVersion));
  }
  ExportedModel model;
  model.global_step = description.global_step();
  model.source_checkpoint = description.source_checkpoint();
  try {
    for (const auto& [name, spec] : description.inputs()) model.inputs[name] = from_proto(spec);
    for (const auto& [name, spec] : description.outputs()) model.outputs[name] = from_proto(spec);
  } catch (const InvalidArgumentError& error) {
    throw DataLossError(str_cat(source, ": ", error.what()));
  }
  for (const auto& [name, signature] : description.signatures()) {
    ExportOutput& output = model.signatures[name];
    output.outputs.assign(signature.outputs().begin(), signature.outputs().end());
    const std::string& kind = signature.kind();
    if (kind.empty() || kind == "predict") continue;
    if (kind != "classify" && kind != "regress") {
      throw DataLossError(str_cat(source, ": signature '", name, "' has kind '", kind,
                                  "'; expected predict, classify or regress"));
    }
    output.kind = kind == "classify" ? ExportOutput::Kind::kClassify : ExportOutput::Kind::kRegress;
    output.scores = signature.scores();
    output.classes = signature.classes();
    output.class_names.assign(signature.class_names().begin(), signature.class_names().end());
    output.value = signature.value();
    bool complete = output.kind == ExportOutput::Kind::kClassify
                        ? !(output.scores.empty() && output.classes.empty())
                        : !output.value.empty();
    if (!complete) {
      throw DataLossError(str_cat(source, ": ", kind, " signature '", name, "' names no ",
                                  kind == "classify" ? "scores or classes" : "value"));
    }
    output.outputs = output.keys();
  }
  if (model.signatures.empty()) throw DataLossError(str_cat(source, " names no signature"));
  return model;
}

}  // namespace cadre::estimator_internal
