#include "serving/rest_examples.h"

#include <cmath>
#include <cstdio>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::serving_internal {

namespace {

using rapidjson::Value;

// Whether `value` is a string, as a tf.Example's bytes_list holds: text or {"b64": "..."}.
bool is_bytes_value(const Value& value) {
  if (value.IsString()) return true;
  if (!value.IsObject() || value.MemberCount() != 1) return false;
  const Value* b64 = json_member(value, "b64");
  return b64 && b64->IsString();
}

// One feature: a value or a flat list of values of one kind (numbers: int64_list when every
// one is written as an integer, else float_list, as TensorFlow Serving infers them).
FeatureValues feature_from_json(const Value& json, const std::string& where) {
  FeatureValues feature;
  std::vector<const Value*> values;
  if (json.IsArray()) {
    for (const Value& item : json.GetArray()) values.push_back(&item);
  } else {
    values.push_back(&json);
  }
  bool any_number = false, any_bytes = false, all_integers = true;
  for (const Value* value : values) {
    if (value->IsNumber()) {
      any_number = true;
      all_integers = all_integers && (value->IsInt64() || value->IsUint64());
      feature.values.push_back(value->GetDouble());
    } else if (is_bytes_value(*value)) {
      any_bytes = true;
      ++feature.bytes_count;
    } else {
      throw InvalidArgumentError(
          str_cat(where,
                  ": a feature's value must be a number, a string, {\"b64\": ...} or a flat list "
                  "of them"));
    }
  }
  if (any_number && any_bytes) {
    throw InvalidArgumentError(str_cat(where, ": mixes numbers and strings in one list"));
  }
  feature.kind = any_bytes                    ? FeatureValues::Kind::kBytes
                 : any_number && all_integers ? FeatureValues::Kind::kInt64
                                              : FeatureValues::Kind::kFloat;
  return feature;
}

ExampleFeatures features_from_json(const Value& object, const std::string& where) {
  if (!object.IsObject()) {
    throw InvalidArgumentError(str_cat(where, " must be an object of features"));
  }
  ExampleFeatures features;
  for (const auto& entry : object.GetObject()) {
    std::string name(entry.name.GetString(), entry.name.GetStringLength());
    features[name] = feature_from_json(entry.value, str_cat(where, " feature '", name, "'"));
  }
  return features;
}

void append_float(std::string* out, float value) {
  if (std::isnan(value)) {
    *out += "NaN";
  } else if (std::isinf(value)) {
    *out += value > 0 ? "Infinity" : "-Infinity";
  } else {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
    *out += text;
  }
}

}  // namespace

ExamplesBody parse_examples_body(std::string_view body, int max_depth) {
  std::shared_ptr<rapidjson::Document> document = parse_json_object(body, max_depth);
  ExamplesBody parsed;
  if (const Value* signature = json_member(*document, "signature_name")) {
    if (!signature->IsString()) throw InvalidArgumentError("\"signature_name\" must be a string");
    parsed.signature_name.assign(signature->GetString(), signature->GetStringLength());
  }
  const Value* examples = json_member(*document, "examples");
  if (!examples || !examples->IsArray() || examples->Empty()) {
    throw InvalidArgumentError(
        "the body must have \"examples\", a non-empty list of objects (one tf.Example each)");
  }
  for (rapidjson::SizeType i = 0; i < examples->Size(); ++i) {
    parsed.batch.examples.push_back(
        features_from_json((*examples)[i], str_cat("examples[", i, "]")));
  }
  if (const Value* context = json_member(*document, "context")) {
    parsed.batch.context = features_from_json(*context, "\"context\"");
  }
  return parsed;
}

std::string encode_classifications(const std::vector<Classification>& results) {
  std::string out = "{\"results\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    if (i > 0) out += ',';
    out += '[';
    for (size_t j = 0; j < results[i].size(); ++j) {
      if (j > 0) out += ',';
      out += str_cat("[", json_quote(results[i][j].first), ",");
      append_float(&out, results[i][j].second);
      out += ']';
    }
    out += ']';
  }
  return out + "]}";
}

std::string encode_regressions(const std::vector<float>& results) {
  std::string out = "{\"results\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    if (i > 0) out += ',';
    append_float(&out, results[i]);
  }
  return out + "]}";
}

}  // namespace cadre::serving_internal
