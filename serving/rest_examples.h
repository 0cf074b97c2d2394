// The JSON of TensorFlow Serving's REST classify and regress APIs:
//   {"signature_name": "...", "context": {FEATURES}, "examples": [{FEATURES}, ...]}
// where FEATURES maps a feature name to a value or a list of values (numbers, strings or
// {"b64": "..."}), one tf.Example each; answered {"results": [[["label", score], ...], ...]}
// (classify) or {"results": [value, ...]} (regress). Fuzzed by tests/fuzz/rest_request_fuzz.cc
// beside the predict bodies.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "serving/example_inputs.h"

namespace cadre::serving_internal {

struct ExamplesBody {
  std::string signature_name;  // as given; empty: none
  ExampleBatch batch;
};

// Throws InvalidArgumentError naming what is wrong: not a JSON object (or nested deeper than
// `max_depth`), "examples" missing or not a list of objects, "context" not an object, a
// feature value that is not a number, string, {"b64": ...} or a flat list of one kind of them.
ExamplesBody parse_examples_body(std::string_view body, int max_depth);

std::string encode_classifications(const std::vector<Classification>& results);
std::string encode_regressions(const std::vector<float>& results);

}  // namespace cadre::serving_internal
