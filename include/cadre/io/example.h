// tf.train.Example records: building and serializing them, and parsing them into tensors by
// a feature spec (as tf.io.parse_single_example does).
//
// Value types map to tensors as: int64 list -> int64, float list -> float32, bytes -> uint8
// (a byte string is a uint8 tensor [n]).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "cadre/io/dataset.h"
#include "cadre/io/element.h"

namespace cadre::io {

enum class FeatureType { kBytes, kFloat, kInt64 };

// A feature with a fixed number of values, reshaped to `shape`. For kBytes the shape must
// be [] (one byte string, returned as uint8 [n]). A missing feature takes default_value
// (which must have `shape`); when that is undefined the feature is required.
struct FixedLenFeature {
  FixedLenFeature(FeatureType type, Shape shape, Tensor default_value = Tensor())
      : type(type), shape(shape), default_value(std::move(default_value)) {}

  FeatureType type = FeatureType::kFloat;
  Shape shape;
  Tensor default_value;
};

// A feature with any number of values, returned as a 1-D tensor [n] (n = 0 when missing);
// padded_batch batches such features. A list of byte strings comes as set_string_list
// (element.h) leaves it: the bytes end to end and the lengths beside them, which feature
// columns read per example.
struct VarLenFeature {
  FeatureType type = FeatureType::kInt64;
};

using FeatureSpec = std::map<std::string, std::variant<FixedLenFeature, VarLenFeature>>;

// Parses one serialized tf.train.Example. Features not in the spec are ignored. Throws
// InvalidArgumentError naming the feature when a required one is missing, has another type,
// or has the wrong number of values; and when the bytes are not an Example at all.
Features parse_example(std::string_view serialized, const FeatureSpec& spec);

// A map function for Dataset::map turning byte-string elements (tfrecord_dataset's) into
// the parsed features; a non-empty `label_key` moves that feature into the labels.
Dataset::MapFn example_parser(FeatureSpec spec, std::string label_key = "");

// Reinterprets a byte string (uint8 [n]) as little-endian elements of `dtype`: a 1-D tensor
// of n / dtype_size elements (InvalidArgumentError when n does not divide), as
// tf.io.decode_raw does for images stored as raw bytes.
Tensor decode_raw(const Tensor& bytes, DType dtype);

// Builds one Example. Adding a name twice replaces its earlier value.
class ExampleBuilder {
 public:
  ExampleBuilder& add_int64s(const std::string& name, std::vector<int64_t> values);
  ExampleBuilder& add_floats(const std::string& name, std::vector<float> values);
  ExampleBuilder& add_bytes(const std::string& name, std::vector<std::string> values);
  // The wire bytes of the Example, features in name order (deterministic).
  std::string serialize() const;

 private:
  using Values = std::variant<std::vector<std::string>, std::vector<float>, std::vector<int64_t>>;
  std::map<std::string, Values> features_;
};

}  // namespace cadre::io
