// What a ps task writes as its part of a sharded checkpoint: a copy of its variables (row
// slices of logical ones) and their optimizer slots, and how they are written, which the
// program that runs the task supplies (the checkpoint module is not the strategies').
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cadre/tensor/tensor.h"

namespace cadre::ps {

// Rows [first_row, first_row + value.dim(0)) of logical variable or slot `name` (a 0-d
// variable: its value, first_row 0).
struct SnapshotItem {
  std::string name;
  std::string slot_of;  // a slot's logical variable
  int64_t first_row = 0;
  Tensor value;
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

}  // namespace cadre::ps
