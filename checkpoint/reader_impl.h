// The implementation behind CheckpointReader (include/cadre/checkpoint/reader.h), shared by
// its files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cadre/checkpoint/reader.h"
#include "checkpoint/hdf5_util.h"
#include "checkpoint/sharded_reader.h"
#include "checkpoint/tf_bundle.h"

namespace cadre::checkpoint {

using internal::Handle;

// What a CheckpointReader holds: the open file, its index, and the reading of datasets in
// checksummed blocks.
struct CheckpointReader::Impl {
  std::string path;
  Handle file;
  int64_t global_step = 0;
  int64_t format_version = 0;
  std::map<std::string, VariableInfo> variables;
  std::map<std::string, std::string> dataset_paths;  // logical name -> path in the file
  size_t block_bytes = size_t{2} << 20;
  // A sharded checkpoint's parts, which hold the variables that are not in this file.
  std::unique_ptr<internal::ShardedLayout> sharded;
  // A TensorFlow checkpoint (a tensor bundle) instead of a file of ours: `file` is unset.
  std::unique_ptr<internal::TfBundleReader> tf_bundle;
  std::string context(const std::string& dataset) const;
  Handle open_dataset(const std::string& dataset) const;
  uint32_t stored_checksum(hid_t dataset, const std::string& name) const;
  void check_checksum(hid_t dataset, const std::string& name, uint32_t computed) const;

  // Writes rows [first_row, first_row + rows) of dataset `name` into each piece's tensor
  // (pieces do not overlap). With `verify`, every row of the dataset is read once and
  // checksummed; otherwise only the rows the pieces need.
  void read_pieces(const std::string& name, const VariableInfo& info,
                   const std::vector<std::pair<int64_t, Tensor>>& pieces, bool verify) const;

  // read_pieces for logical variable `name`, from this file or from the parts.
  void read_variable(const std::string& name, const VariableInfo& info,
                     const std::vector<std::pair<int64_t, Tensor>>& pieces, bool verify) const;

  // Copies rows [o0, o1) (logical) from `staging` (which holds rows from b0) to
  // `destination` (which holds rows from first_row).
  static void copy_rows(const Tensor& staging, int64_t b0, int64_t o0, int64_t o1,
                        int64_t first_row, const Tensor& destination, size_t row_bytes,
                        bool direct);

  // Checksums a whole dataset of any element type; returns a problem, empty when intact.
  std::string verify_dataset(const std::string& name) const;

  // Datasets of a group, or none when the group is absent (older or foreign files).
  std::vector<std::string> datasets_in(const char* group) const;
  VariableInfo describe(const std::string& name) const;
  void load_index();
};

}  // namespace cadre::checkpoint
