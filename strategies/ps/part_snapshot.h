// What a ps task writes as its part of a sharded checkpoint: a snapshot of its variables (row
// slices of logical ones) and their optimizer slots, and how they are written; and how the
// task reads its rows of a checkpoint back on restore. The program that runs the task
// supplies both (the checkpoint module is not the strategies').
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cadre/tensor/dtype.h"
#include "cadre/tensor/shape.h"
#include "cadre/tensor/tensor.h"

namespace cadre::ps {

// Rows [first_row, first_row + shape[0]) of logical variable or slot `name` (a 0-d
// variable: its value, first_row 0), as of the moment the snapshot was marked: small ones
// copied then (`value`), the others read a block at a time while the task serves on
// (`read`, copy-on-write: see saved_tensor.h).
struct SnapshotItem {
  std::string name;
  std::string slot_of;  // a slot's logical variable
  int64_t first_row = 0;
  DType dtype = DType::kFloat32;
  Shape shape;
  Tensor value;  // the copy, or undefined when `read` is set
  // Copies rows [begin, end) to `destination`, contiguously. Called in row order, each
  // range once, from row 0; valid until the snapshot ends (Shard::end_snapshot).
  std::function<void(int64_t begin, int64_t end, void* destination)> read;
};

struct PartSnapshot {
  std::vector<SnapshotItem> items;
  std::map<std::string, int64_t> iterations;  // "<optimizer>/iterations"
};

// Writes `snapshot` durably as `directory`/`file_name`, a part of the checkpoint of
// `global_step`, and returns the file's size and the CRC-32C of its bytes.
using PartWriter = std::function<std::pair<uint64_t, uint32_t>(
    const std::string& directory, const std::string& file_name, int64_t global_step,
    const PartSnapshot& snapshot)>;

// Reads rows [first_row, first_row + destination.dim(0)) of logical variable or slot `name`
// of checkpoint `checkpoint` (a file name) in the task's model_dir into `destination`, a
// host tensor of the variable's dtype. Throws Cadre's typed errors: PermissionDeniedError for
// a name that is not a file in model_dir, NotFoundError, InvalidArgumentError when the rows
// do not fit, DataLossError.
using RowRestorer = std::function<void(const std::string& checkpoint, const std::string& name,
                                       int64_t first_row, const Tensor& destination)>;

}  // namespace cadre::ps
