// What TensorFlow Serving's Classify and Regress APIs share: their input is a list of
// tf.Examples (each a map of feature name -> list of values, optionally with a context
// Example merged into each), which the server turns into the dense inputs of the signature
// by the export's input specs (name, dtype, per-example shape), as a tf.Example parsing
// serving input receiver would; their answers are built from a classification or
// regression signature's outputs (cadre::ExportOutput).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cadre/estimator/model_fn.h"
#include "cadre/io/element.h"
#include "io/proto/example.pb.h"
#include "serving/rest_json.h"

namespace cadre::serving_internal {

// One feature of one example: a tf.Example's float_list, int64_list or bytes_list. Values
// are kept as doubles (int64 values past 2^53 lose precision, as in JSON); a bytes list
// keeps its count only, since Cadre has no string tensors.
struct FeatureValues {
  enum class Kind { kFloat, kInt64, kBytes };
  Kind kind = Kind::kFloat;
  std::vector<double> values;
  size_t bytes_count = 0;  // kBytes
};
using ExampleFeatures = std::map<std::string, FeatureValues>;

struct ExampleBatch {
  std::vector<ExampleFeatures> examples;
  ExampleFeatures context;  // merged into each example; an example's own feature wins
};

// A tf.Example message (TensorFlow's, or io's wire-compatible cadre.proto.Example).
ExampleFeatures example_features(const proto::Example& example);

// The signature's inputs for `batch`: for every input of `specs`, each example's feature of
// that name, its values filling the per-example shape in row-major order. Features no input
// takes are ignored (as tf.io.parse_example ignores them). Throws InvalidArgumentError
// naming the example, the feature and what the input takes when there are no examples, a
// feature is missing, has another number of values, is a bytes list, or holds a value the
// input's dtype cannot (a fraction or out-of-range number for an integer input).
io::Features examples_to_inputs(const ExampleBatch& batch, const TensorSpecs& specs);

// Per example, the (label, score) of each class of a classification signature's outputs
// (`outputs` holds output.keys()). Throws InvalidArgumentError when a class id falls outside
// output.class_names.
using Classification = std::vector<std::pair<std::string, float>>;
std::vector<Classification> classifications(const std::map<std::string, Tensor>& outputs,
                                            const ExportOutput& output);

// Per example, the value of a regression signature's output.
std::vector<float> regressions(const std::map<std::string, Tensor>& outputs,
                               const ExportOutput& output);

}  // namespace cadre::serving_internal
