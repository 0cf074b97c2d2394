// The saved position of a dataset iterator, as a checkpoint stores it.
//
// An IteratorState is a handful of named tensors: int64 scalars (positions, counters, RNG
// state), uint8 byte strings (file names, encoded buffers of elements held by shuffle,
// prefetch or map). Keys are paths through the pipeline from the iterator that was asked,
// e.g. "input/input/buffer" for the buffer of the shuffle two stages upstream; every stage
// also records its kind ("input/input/kind" = "shuffle"), so that a state restored into a
// different pipeline fails with a clear error instead of resuming somewhere arbitrary.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cadre/io/element.h"
#include "cadre/tensor/tensor.h"

namespace cadre::io {

using IteratorState = std::map<std::string, Tensor>;

// Writes entries under a key prefix. Copies of a writer share the state they write into.
class StateWriter {
 public:
  explicit StateWriter(IteratorState& state, std::string prefix = "")
      : state_(&state), prefix_(std::move(prefix)) {}
  // A writer for a stage nested under `name`.
  StateWriter child(std::string_view name) const;

  void write_int(std::string_view key, int64_t value);
  void write_string(std::string_view key, std::string_view value);
  void write_elements(std::string_view key, const std::vector<Element>& elements);
  // Every entry of `state` (saved by another writer) under this writer's prefix.
  void write_all(const IteratorState& state);
  // Moves in every entry of `state`, which a writer with this writer's prefix saved (its
  // keys are whole already): no key or value is copied.
  void adopt(IteratorState&& state);
  const std::string& prefix() const { return prefix_; }

 private:
  IteratorState* state_;
  std::string prefix_;
};

// Reads what a StateWriter with the same prefix wrote. A missing key or a value of the
// wrong type throws InvalidArgumentError naming the full key.
class StateReader {
 public:
  explicit StateReader(const IteratorState& state, std::string prefix = "")
      : state_(&state), prefix_(std::move(prefix)) {}
  StateReader child(std::string_view name) const;

  bool contains(std::string_view key) const;
  int64_t read_int(std::string_view key) const;
  std::string read_string(std::string_view key) const;
  std::vector<Element> read_elements(std::string_view key) const;

 private:
  const Tensor& get(std::string_view key) const;
  std::string full_key(std::string_view key) const;

  const IteratorState* state_;
  std::string prefix_;
};

}  // namespace cadre::io
