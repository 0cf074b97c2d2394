// Internal to the checkpoint module: TensorFlow's checkpoint format, the tensor bundle that
// tf.train.Saver and tf.train.Checkpoint write. A checkpoint PREFIX is PREFIX.index, a table
// (checkpoint/tf_table.h) of a BundleEntryProto per tensor name (dtype, shape, data shard,
// offset, size, masked CRC-32C) with a BundleHeaderProto under the empty key, and
// PREFIX.data-NNNNN-of-MMMMM, the tensors' bytes, little-endian and row-major.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/checkpoint/reader.h"

namespace cadre::checkpoint::internal {

// The bundle prefix `path` names, when it names one: PREFIX itself (PREFIX.index exists) or
// PREFIX.index; nullopt otherwise.
std::optional<std::string> tf_bundle_prefix(Env& env, const std::string& path);

// A tensor's entry in the index.
struct TfBundleEntry {
  VariableInfo info;
  int shard = 0;
  uint64_t offset = 0, size = 0;
  uint32_t masked_crc = 0;
};

// What an index holds: its header's shard count and the entries of tensors of a dtype Cadre
// has, by TensorFlow name. Strings (TF2's object graph), partitioned variables and other
// dtypes are left out and counted. Throws DataLossError naming `file` when the bytes are not
// an index or an entry does not add up, UnimplementedError for a big-endian bundle.
struct TfBundleIndex {
  int num_shards = 1;
  std::map<std::string, TfBundleEntry> entries;
  size_t skipped = 0;
};
TfBundleIndex parse_tf_bundle_index(std::string_view bytes, const std::string& file);

class TfBundleReader {
 public:
  // Reads and checks PREFIX.index (parse_tf_bundle_index) and opens the data files.
  // Throws NotFoundError when the index does not exist, DataLossError when a data file is
  // missing.
  TfBundleReader(std::shared_ptr<Env> env, const std::string& prefix);
  ~TfBundleReader();

  // The tensors parse_tf_bundle_index keeps, and how many it left out.
  const std::map<std::string, VariableInfo>& variables() const { return variables_; }
  size_t skipped() const { return index_.skipped; }
  // The "global_step" tensor's value; 0 without one.
  int64_t global_step() const { return global_step_; }

  // Rows [first_row, first_row + rows) of `name` into each piece's tensor (any device,
  // layout or dtype). With `verify`, the tensor's CRC is checked first: a mismatch or a
  // short data file is a DataLossError naming the data file and the tensor.
  void read(const std::string& name, const std::vector<std::pair<int64_t, Tensor>>& pieces,
            bool verify) const;
  std::vector<DatasetProblem> verify() const;
  // Bytes of the index and data files.
  uint64_t bytes() const;
  int num_shards() const { return index_.num_shards; }

 private:
  Tensor load(const std::string& name, const TfBundleEntry& entry, bool verify) const;
  std::string data_file(int shard) const;

  std::shared_ptr<Env> env_;
  std::string prefix_;
  TfBundleIndex index_;
  int64_t global_step_ = 0;
  std::map<std::string, VariableInfo> variables_;
  std::vector<std::unique_ptr<RandomAccessFile>> shards_;
};

// Writes `tensors` (by TensorFlow name; any device) as the bundle PREFIX, one data file:
// the data file first and the index last, each published atomically, so that a reader sees
// the old bundle or the whole new one.
void write_tf_bundle(Env& env, const std::string& prefix,
                     const std::vector<std::pair<std::string, Tensor>>& tensors);

// Writes every variable and slot `checkpoint` holds, and its global step, as the bundle
// PREFIX under TensorFlow's names (checkpoint/tf_names.h), so that tf.train.load_checkpoint
// and an Estimator's warm_start_from read it. Returns the number of tensors written.
size_t write_as_tf_bundle(const CheckpointReader& checkpoint, Env& env, const std::string& prefix);

}  // namespace cadre::checkpoint::internal
