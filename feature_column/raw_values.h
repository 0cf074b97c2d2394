// Internal to feature_column: one example's raw values of a feature, as the input pipeline
// gives them: a byte string (uint8 [n], one value: CSV's and tf.train.Example's strings),
// integers (any integer dtype, any shape: each element a value) or floats.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cadre/io/categorical.h"
#include "cadre/io/element.h"

namespace cadre::feature_column::internal {

// The feature `key` of `example`; InvalidArgumentError naming `column` and the key when it is
// missing.
const Tensor& feature(const io::Features& example, const std::string& key,
                      const std::string& column);

// String or integer values, missing ones ("" and -1) dropped unless `keep_missing` (crosses
// keep them, as TensorFlow's do). `strings` takes a byte string, else integers; the other is
// an InvalidArgumentError naming the column and key.
std::vector<io::CrossValue> categorical_values(const Tensor& raw, bool strings,
                                               const std::string& column, const std::string& key,
                                               bool keep_missing = false);

// A byte string's bytes, viewed in `host` (which keeps them alive): `raw` itself when it is on
// the CPU and contiguous. InvalidArgumentError naming `column` and `key` for anything else.
std::string_view string_value(const Tensor& raw, Tensor& host, const std::string& column,
                              const std::string& key);

// Every element as a double, or as a float (numbers of any dtype).
std::vector<double> numbers(const Tensor& raw);
std::vector<float> floats(const Tensor& raw);

}  // namespace cadre::feature_column::internal
