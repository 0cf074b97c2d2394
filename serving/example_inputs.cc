#include "serving/example_inputs.h"

#include <cmath>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::serving_internal {

namespace {

const char* feature_kind_name(FeatureValues::Kind kind) {
  switch (kind) {
    case FeatureValues::Kind::kFloat:
      return "a float list";
    case FeatureValues::Kind::kInt64:
      return "an int64 list";
    case FeatureValues::Kind::kBytes:
      return "a bytes list";
  }
  return "a list";
}

// Whether `value` is a value of the integer (or bool) dtype `dtype`; converting one outside
// the range would be undefined.
bool holds_integer(double value, DType dtype) {
  if (value != std::floor(value)) return false;
  switch (dtype) {
    case DType::kBool:
      return value == 0 || value == 1;
    case DType::kUInt8:
      return value >= 0 && value < 256;
    case DType::kInt32:
      return value >= -2147483648.0 && value < 2147483648.0;
    default:
      return value >= -9223372036854775808.0 && value < 9223372036854775808.0;
  }
}

std::string takes(const std::string& name, const Predictor::TensorSpec& spec, int64_t count) {
  return str_cat("input '", name, "' takes ", dtype_name(spec.dtype), " [", join(spec.shape), "] (",
                 count, " value", count == 1 ? "" : "s", " per example)");
}

}  // namespace

ExampleFeatures example_features(const proto::Example& example) {
  ExampleFeatures features;
  for (const auto& [name, feature] : example.features().feature()) {
    FeatureValues& values = features[name];
    switch (feature.kind_case()) {
      case proto::Feature::kFloatList:
        values.kind = FeatureValues::Kind::kFloat;
        values.values.assign(feature.float_list().value().begin(),
                             feature.float_list().value().end());
        break;
      case proto::Feature::kInt64List:
        values.kind = FeatureValues::Kind::kInt64;
        for (int64_t value : feature.int64_list().value()) {
          values.values.push_back(static_cast<double>(value));
        }
        break;
      case proto::Feature::kBytesList:
        values.kind = FeatureValues::Kind::kBytes;
        values.bytes_count = static_cast<size_t>(feature.bytes_list().value_size());
        break;
      default:  // an empty Feature: an empty list of no kind
        break;
    }
  }
  return features;
}

io::Features examples_to_inputs(const ExampleBatch& batch, const TensorSpecs& specs) {
  if (batch.examples.empty()) {
    throw InvalidArgumentError("the request has no examples; send at least one tf.Example");
  }
  const int64_t rows = static_cast<int64_t>(batch.examples.size());
  io::Features inputs;
  for (const auto& [name, spec] : specs) {
    int64_t count = 1;
    for (int64_t dim : spec.shape) count *= dim;
    std::vector<double> values;
    values.reserve(static_cast<size_t>(rows * count));
    for (int64_t row = 0; row < rows; ++row) {
      const ExampleFeatures& example = batch.examples[static_cast<size_t>(row)];
      auto found = example.find(name);
      if (found == example.end()) {
        found = batch.context.find(name);
        if (found == batch.context.end()) {
          throw InvalidArgumentError(str_cat("examples[", row, "] has no feature '", name,
                                             "' (nor has the context); ",
                                             takes(name, spec, count)));
        }
      }
      const FeatureValues& feature = found->second;
      std::string where = str_cat("examples[", row, "] feature '", name, "'");
      if (feature.kind == FeatureValues::Kind::kBytes) {
        throw InvalidArgumentError(
            str_cat(where, " is a bytes list; ", takes(name, spec, count), ", not strings"));
      }
      if (static_cast<int64_t>(feature.values.size()) != count) {
        throw InvalidArgumentError(str_cat(where, " has ", feature.values.size(), " value",
                                           feature.values.size() == 1 ? "" : "s", "; ",
                                           takes(name, spec, count)));
      }
      if (!is_floating(spec.dtype)) {
        for (double value : feature.values) {
          if (!holds_integer(value, spec.dtype)) {
            throw InvalidArgumentError(
                str_cat(where, " (", feature_kind_name(feature.kind), ") holds ", value, ", which ",
                        dtype_name(spec.dtype), " does not; ", takes(name, spec, count)));
          }
        }
      }
      values.insert(values.end(), feature.values.begin(), feature.values.end());
    }
    std::vector<int64_t> dims{rows};
    dims.insert(dims.end(), spec.shape.begin(), spec.shape.end());
    inputs.set(name, Tensor::from_vector(values, Shape(dims)).cast(spec.dtype));
  }
  return inputs;
}

std::vector<Classification> classifications(const std::map<std::string, Tensor>& outputs,
                                            const ExportOutput& output) {
  std::vector<float> scores;
  std::vector<int64_t> ids;
  int64_t rows = 0, columns = 1;
  if (!output.scores.empty()) {
    const Tensor& tensor = outputs.at(output.scores);
    scores = tensor.to_vector<float>();
    rows = tensor.dim(0);
    columns = tensor.dim(1);
  }
  if (!output.classes.empty()) {
    const Tensor& tensor = outputs.at(output.classes);
    ids = tensor.to_vector<int64_t>();
    rows = tensor.dim(0);
    columns = tensor.rank() == 2 ? tensor.dim(1) : 1;
  }
  std::vector<Classification> results(static_cast<size_t>(rows));
  for (int64_t row = 0; row < rows; ++row) {
    Classification& classes = results[static_cast<size_t>(row)];
    for (int64_t column = 0; column < columns; ++column) {
      size_t at = static_cast<size_t>(row * columns + column);
      std::string label;
      if (!ids.empty()) {
        int64_t id = ids[at];
        if (output.class_names.empty()) {
          label = std::to_string(id);
        } else if (id >= 0 && id < static_cast<int64_t>(output.class_names.size())) {
          label = output.class_names[static_cast<size_t>(id)];
        } else {
          throw InvalidArgumentError(str_cat("the model's class id ", id, " (prediction '",
                                             output.classes, "') is not one of its ",
                                             output.class_names.size(), " class names"));
        }
      } else if (!output.class_names.empty()) {
        label = output.class_names[static_cast<size_t>(column)];
      }
      classes.emplace_back(std::move(label), scores.empty() ? 0.0f : scores[at]);
    }
  }
  return results;
}

std::vector<float> regressions(const std::map<std::string, Tensor>& outputs,
                               const ExportOutput& output) {
  return outputs.at(output.value).to_vector<float>();
}

}  // namespace cadre::serving_internal
