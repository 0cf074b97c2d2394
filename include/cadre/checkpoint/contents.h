// What a checkpoint holds, independent of any distribution strategy: logical variables as
// whole tensors (or as row partitions of one), optimizer slots, the global step, RNG
// states, input-iterator state and informational attributes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cadre/random/generator.h"
#include "cadre/tensor/tensor.h"

namespace cadre::checkpoint {

// Rows [first_row, first_row + rows) of a logical variable or slot that a part of a sharded
// checkpoint holds (a 0-d variable: its one value, first_row 0, rows 1).
struct PartSlice {
  std::string name;     // logical: "embedding/table", "embedding/table/Adagrad/accumulator"
  std::string slot_of;  // a slot's variable (logical name); empty for a variable
  DType dtype = DType::kFloat32;
  Shape shape;  // of the whole logical variable
  int64_t first_row = 0;
  int64_t rows = 0;
};

// A part of a sharded checkpoint that another task writes into the model_dir itself (a ps
// task its variable slices and their slots), as FORMAT.md describes: the dataset of a slice
// is part_dataset_name(name, first_row), under /variables or (slots) /slots.
struct CheckpointPart {
  std::string file_name;  // in the model_dir, named by CheckpointManager::part_file_names
  std::vector<PartSlice> slices;
  // Blocks until the part is durable in the model_dir and returns its size in bytes and the
  // CRC-32C of those bytes; throws what kept it from being written.
  std::function<std::pair<uint64_t, uint32_t>()> wait;
};

// The input to a save. Tensors may live on any device and be non-contiguous views; the
// writer copies at most one block of rows at a time out of them (none for contiguous host
// tensors). The caller must not modify them until the save returns (an asynchronous save
// copies them first, or has writers finish its copy first: see CheckpointManagerOptions).
struct CheckpointData {
  int64_t global_step = 0;
  // Logical name ("hidden1/kernel", "Adam/iterations") -> the whole value.
  std::map<std::string, Tensor> variables;
  // Variables held as partitions along axis 0 (parameter-server shards): their
  // concatenation, in order, is the logical value, which is what the file holds. A name
  // must not appear both here and in `variables`.
  std::map<std::string, std::vector<Tensor>> partitioned_variables;
  // Optimizer slots: slot name ("hidden1/kernel/Adam/m") -> the variable it belongs to.
  // Each slot's value is in `variables` or `partitioned_variables` under the slot name.
  std::map<std::string, std::string> slot_of;
  // Random generators by name ("global", "replica_0", ...).
  std::map<std::string, Generator::State> rng_states;
  // The input pipeline's position, as the io module describes it; byte strings go as
  // uint8 tensors (see bytes_to_tensor).
  std::map<std::string, Tensor> iterator_state;
  // Information only ("strategy", "topology", ...): restoring never depends on it.
  std::map<std::string, std::string> attributes;
  // Parts other tasks write (a sharded checkpoint): the saver writes the rest of this data
  // and the manifest once every part is durable. Their logical names must differ from those
  // above.
  std::vector<CheckpointPart> parts;
};

// The name of the dataset (below /variables or /slots) that holds the slice of `name`
// beginning at `first_row` in a part: "<name>/rows-<first_row>".
std::string part_dataset_name(const std::string& name, int64_t first_row);

// Names are '/'-separated paths: non-empty components, none "." or "..", printable ASCII
// without '"' or '\\'. Throws InvalidArgumentError naming `what` and `name` otherwise.
void check_name(std::string_view what, std::string_view name);

// Checks everything a save would reject before anything is written: names, a name that is
// also another's path prefix ("a" and "a/b" cannot both be datasets in HDF5), partitions
// that disagree in dtype or trailing dimensions, slots whose variable is missing.
// Throws InvalidArgumentError listing every problem.
void check_data(const CheckpointData& data);

// The logical shape and dtype of a partitioned variable (parts checked by check_data).
Shape partitioned_shape(const std::vector<Tensor>& parts);

// A uint8 tensor of the bytes of `text`, and back.
Tensor bytes_to_tensor(std::string_view text);
std::string tensor_to_bytes(const Tensor& tensor);

}  // namespace cadre::checkpoint
