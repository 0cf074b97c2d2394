// The JSON of TensorFlow Serving's REST predict API: request bodies in the row format
// ({"instances": [...]}, one entry per example) or the columnar one ({"inputs": ...}, each
// input batched), and the responses each gets ({"predictions": [...]} or {"outputs": ...}).
// Parsing goes through RapidJSON (what TensorFlow Serving's REST API uses too) after a
// nesting check of our own; fuzzed by tests/fuzz/rest_request_fuzz.cc. Protobuf's JSON
// parser, used before, built a google.protobuf.Value tree through its binary converter:
// 60% of the server's time on a 784-float request (docs/BENCHMARKS.md, Serving).
#pragma once

#include <rapidjson/document.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "cadre/estimator/predictor.h"
#include "cadre/io/element.h"

namespace cadre::serving_internal {

using TensorSpecs = std::map<std::string, Predictor::TensorSpec>;

struct PredictBody {
  std::string signature_name;  // as given; empty: none
  bool row_format = true;
  std::shared_ptr<const rapidjson::Document> document;  // the whole body
  const rapidjson::Value* data = nullptr;               // its "instances" or "inputs"
};

// The body as a JSON object. Throws InvalidArgumentError naming what is wrong: not JSON
// (with the byte offset), nested deeper than `max_depth`, or not an object.
std::shared_ptr<rapidjson::Document> parse_json_object(std::string_view body, int max_depth);
// The member `name` of a JSON object, or null.
const rapidjson::Value* json_member(const rapidjson::Value& object, const std::string& name);

// Throws InvalidArgumentError naming what is wrong: not JSON, nested deeper than
// `max_depth`, not an object, or with neither or both of "instances" and "inputs".
PredictBody parse_predict_body(std::string_view body, int max_depth);

// The batch the body holds for a signature taking `specs`. Throws InvalidArgumentError
// naming the input and the example whose shape or type differs from the spec.
io::Features decode_inputs(const PredictBody& body, const TensorSpecs& specs);

// {"predictions": [...]} (row format) or {"outputs": ...} (columnar), as TensorFlow Serving
// writes them: a lone output unnamed, several as objects keyed by output name.
std::string encode_predictions(const std::map<std::string, Tensor>& outputs, bool row_format);

// A JSON string literal of `text`.
std::string json_quote(std::string_view text);

}  // namespace cadre::serving_internal
