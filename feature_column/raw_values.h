// Internal to feature_column: one example's raw values of a feature, as the input pipeline
// gives them: a byte string (uint8 [n], one value: CSV's and tf.train.Example's strings), a
// list of them (io::set_string_list: a variable-length bytes feature), integers (any integer
// dtype, any shape: each element a value) or floats.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cadre/io/categorical.h"
#include "cadre/io/element.h"
#include "cadre/io/example.h"

namespace cadre::feature_column::internal {

// The feature `key` of `example`; InvalidArgumentError naming `column` and the key when it is
// missing.
const Tensor& feature(const io::Features& example, const std::string& key,
                      const std::string& column);

// Whether feature `key` is a list of strings (io::set_string_list), which TensorFlow holds as
// a sparse tensor; one string or numbers are dense there.
inline bool is_string_list(const io::Features& example, const std::string& lengths_key) {
  return example.find(lengths_key) != nullptr;
}

// Calls fn for each string of feature `key`: its one byte string, or each of a list when
// `lengths_key` (io::string_lengths_key(key)) is present. One empty string is a missing value
// and skipped unless `keep_missing`; in a list, every string counts, as TensorFlow drops
// missing values from dense inputs only. InvalidArgumentError naming `column` and `key` when
// the feature is not a byte string.
void for_each_string(const io::Features& example, const std::string& key,
                     const std::string& lengths_key, const std::string& column, bool keep_missing,
                     const std::function<void(std::string_view)>& fn);

// String or integer values, missing ones ("" and -1 of a dense input) dropped unless
// `keep_missing` (crosses keep them, as TensorFlow's do). `strings` takes byte strings, else
// integers; the other is an InvalidArgumentError naming the column and key.
std::vector<io::CrossValue> categorical_values(const io::Features& example, const std::string& key,
                                               const std::string& lengths_key, bool strings,
                                               const std::string& column,
                                               bool keep_missing = false);

// Adds `key`'s entry to a parse spec; InvalidArgumentError naming the key when the spec
// already reads it another way.
void add_spec(io::FeatureSpec& spec, const std::string& key,
              std::variant<io::FixedLenFeature, io::VarLenFeature> entry);

// Every element as a double, or as a float (numbers of any dtype).
std::vector<double> numbers(const Tensor& raw);
std::vector<float> floats(const Tensor& raw);

}  // namespace cadre::feature_column::internal
