// Internal to the checkpoint module: the logical view of a sharded checkpoint that a
// CheckpointReader gives, read from its parts (FORMAT.md, Sharded checkpoints). Every row
// of a variable is read straight from the part that holds it into the destination, so any
// partitioning of the destination (another number of ps tasks, one whole tensor) is served
// without holding more than the destination and one staging block.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cadre/checkpoint/reader.h"

namespace cadre::checkpoint::internal {

class ShardedLayout {
 public:
  // Reads the manifest of `file` (the checkpoint at `path`), checks that every part is
  // there with its size and opens it, and adds the logical variables and slots the parts
  // hold to `variables`. Throws DataLossError naming the checkpoint and the part at fault.
  ShardedLayout(hid_t file, const std::string& path,
                std::map<std::string, VariableInfo>* variables);
  ~ShardedLayout();

  bool holds(const std::string& name) const { return slices_.count(name) > 0; }
  // Rows [first_row, first_row + rows) of `name` into each piece's tensor. With `verify`,
  // each part read from is checked against the manifest's checksum first (once per part):
  // its datasets' checksums do not cover the rest of its bytes.
  void read(const std::string& name, const VariableInfo& info,
            const std::vector<std::pair<int64_t, Tensor>>& pieces, bool verify) const;
  // Each part's size and CRC-32C against the manifest; a problem names the part.
  std::vector<DatasetProblem> verify() const;
  void add_sizes(CheckpointSizes* sizes) const;

 private:
  struct Part {
    std::string file;
    uint64_t bytes = 0;
    uint32_t crc32c = 0;
    std::unique_ptr<CheckpointReader> reader;
    mutable std::once_flag verified;
  };
  // The problem with part `k`'s bytes, empty when they match the manifest.
  std::string part_problem(const Part& part) const;
  void verify_part(const Part& part) const;
  struct Slice {
    size_t part = 0;
    int64_t first_row = 0;
    int64_t rows = 0;
  };
  void load_parts(hid_t file);
  void load_tables(hid_t file, const char* tree, std::map<std::string, VariableInfo>* variables);
  std::string context() const;

  std::string path_;
  std::vector<std::unique_ptr<Part>> parts_;
  std::map<std::string, std::vector<Slice>> slices_;  // by first row
};

}  // namespace cadre::checkpoint::internal
