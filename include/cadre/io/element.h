// The elements a Dataset yields: named feature tensors plus optional labels, the pair that
// model_fn receives.
//
// Generic sources (range, from_tensor_slices of one tensor, a generator returning tensors)
// yield single-tensor elements: one feature named "value", read with Element::value().
// Byte strings (file names, TFRecord records, CSV text) are uint8 tensors of shape [n].
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cadre/tensor/tensor.h"

namespace cadre::io {

// Named tensors, iterated in name order whatever the insertion order, so that two elements
// with the same names line up when batched or encoded.
class Features {
 public:
  using value_type = std::pair<std::string, Tensor>;
  using const_iterator = std::vector<value_type>::const_iterator;

  Features() = default;
  // Throws InvalidArgumentError when a name repeats.
  Features(std::initializer_list<value_type> items);

  // The tensor named `name`; throws InvalidArgumentError naming it and the names present.
  const Tensor& at(std::string_view name) const;
  Tensor& at(std::string_view name);
  // Null when absent.
  const Tensor* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  // Inserts or replaces.
  void set(std::string name, Tensor value);
  // Returns whether `name` was present.
  bool erase(std::string_view name);

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  std::vector<std::string> names() const;

 private:
  // Index of the first item not before `name`.
  size_t lower_bound(std::string_view name) const;

  // Sorted by name. A small vector: an element with inline slots measured slower through
  // shuffle and batch, which move elements around more than they create them.
  std::vector<value_type> items_;
};

// The feature name of single-tensor elements.
inline constexpr std::string_view kValueFeature = "value";

struct Element {
  Features features;
  Tensor labels;  // undefined when the dataset carries no labels
  // Where the element came from, for sources that can read it again (a row index, a file
  // and byte offset; a batch concatenates those of its elements). A checkpoint saves an
  // element held in a buffer (shuffle, prefetch) as its origin instead of its data. Set by
  // sources and carried by the stages between; empty when unknown. Map functions need not
  // keep it: map carries it past them.
  std::vector<int64_t> origin;

  Element() = default;
  // A single-tensor element {"value": value}. Implicit so that generators and map
  // functions of generic data can return a Tensor.
  Element(Tensor value);                                 // NOLINT(google-explicit-constructor)
  Element(Features features, Tensor labels = Tensor());  // NOLINT

  bool has_labels() const { return labels.defined(); }
  // The one feature of a single-feature element; throws InvalidArgumentError naming the
  // features when there are none or several.
  const Tensor& value() const;
};

// Byte strings as tensors: uint8 [n] holding the bytes, and back (any shape, row-major).
Tensor bytes_tensor(std::string_view bytes);
std::string tensor_bytes(const Tensor& tensor);

// A list of byte strings in one example (tf.train.Example's variable-length bytes features,
// a user's tags): their bytes end to end, uint8 [n], under `name`, and their lengths, int64
// [k], under string_lengths_key(name). A byte string without lengths beside it is one string.
std::string string_lengths_key(std::string_view name);
void set_string_list(Features& features, const std::string& name,
                     const std::vector<std::string>& values);
// The strings of `name` in `features`: a list as set_string_list leaves it, or one byte
// string. InvalidArgumentError naming the feature when it is neither (another dtype or rank,
// lengths that do not add up to the bytes).
std::vector<std::string> string_list(const Features& features, std::string_view name);

}  // namespace cadre::io

namespace cadre {
using io::Element;
using io::Features;
}  // namespace cadre
