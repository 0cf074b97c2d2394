// Reads one checkpoint file: its variables (whole, or rows of them for partitioned
// variables), optimizer slots, global step, RNG and iterator state, and attributes; and
// verifies its checksums.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cadre/random/generator.h"
#include "cadre/tensor/tensor.h"

namespace cadre::checkpoint {

// Bytes a checkpoint file takes, by part. `file` also counts what none of the parts hold:
// HDF5's headers, attributes (checksums, names) and free space.
struct CheckpointSizes {
  uint64_t file = 0;
  uint64_t variables = 0;
  uint64_t slots = 0;
  uint64_t input = 0;  // iterator state: the input pipelines' positions
  uint64_t rng = 0;    // random generators and the global step
};

// A variable or slot as stored.
struct VariableInfo {
  DType dtype = DType::kFloat32;
  Shape shape;
  std::string slot_of;  // the variable this slot belongs to; empty for a variable
  // The name in the file where it differs from the logical one: a TensorFlow checkpoint's
  // optimizer slots and step counter (training/Adam/<variable>/m is <variable>/Adam/m).
  std::string stored_name;
};

// A problem `verify` found in one dataset.
struct DatasetProblem {
  std::string dataset;  // path in the file: "variables/hidden1/kernel"
  std::string problem;  // "checksum mismatch (stored 0x..., computed 0x...)"
};

// The open file is held until the reader is destroyed, so a checkpoint that retention
// removes after open() stays readable (POSIX unlink semantics).
//
// Every read verifies the dataset's CRC32C unless `verify` is false and throws
// DataLossError naming the file and the dataset when it does not match or the data cannot
// be read. Reads of different readers, or of one reader from several threads, are safe
// (HDF5 serialises them).
class CheckpointReader {
 public:
  // Opens `path` and reads its index. Throws NotFoundError when there is no such file and
  // DataLossError naming the file when it is not HDF5, is truncated or damaged, or is not
  // a Cadre checkpoint of a format version this library reads. A sharded checkpoint (format
  // version 2, checkpoint/FORMAT.md) is opened with every part it names (DataLossError naming
  // a part that is missing, or not of the size its manifest says); its variables, reads and
  // verify() are the logical ones, whichever part holds each row, and verify() also checks
  // each part's checksum.
  //
  // `path` may also be a TensorFlow checkpoint (a tensor bundle: its prefix, such as
  // "model.ckpt-1000", or the prefix's .index file). Its tensors are the variables, under
  // their TensorFlow names (optimizer slots under Cadre's, VariableInfo::stored_name saying
  // TensorFlow's), and its global_step tensor the global step; format_version()
  // is 0, and there is no RNG or iterator state. Strings and partitioned variables are not
  // read (attributes()["tensors_not_read"] counts them).
  static std::unique_ptr<CheckpointReader> open(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& path() const;
  int64_t global_step() const;
  int64_t format_version() const;
  // Every root attribute and every entry of the metadata group ("strategy", ...), as text.
  std::map<std::string, std::string> attributes() const;

  // Variables and slots by logical name ("hidden1/kernel", "hidden1/kernel/Adam/m").
  const std::map<std::string, VariableInfo>& variables() const;
  // Throws NotFoundError naming the file and listing nearby names when absent.
  const VariableInfo& variable(const std::string& name) const;

  // The whole value as a new host tensor.
  Tensor read(const std::string& name, bool verify = true) const;
  // Writes the whole value into `destination` in place (any device or layout, same shape;
  // converted to its dtype). Reads straight into its memory when it is a contiguous host
  // tensor of the stored dtype; otherwise through one block-sized staging buffer.
  void read_into(const std::string& name, const Tensor& destination, bool verify = true) const;
  // Rows [first_row, first_row + destination.dim(0)) of the logical value into
  // `destination`: restoring into a partitioned variable. Verifying the checksum reads the
  // whole dataset once, a block at a time; with verify = false only the rows are read.
  void read_rows_into(const std::string& name, int64_t first_row, const Tensor& destination,
                      bool verify = true) const;

  // Several partitions (first row, destination) of one variable in one pass over the
  // dataset, verifying its checksum once.
  void read_partitions_into(const std::string& name,
                            const std::vector<std::pair<int64_t, Tensor>>& partitions,
                            bool verify = true) const;

  std::map<std::string, Generator::State> rng_states(bool verify = true) const;
  std::map<std::string, Tensor> iterator_state(bool verify = true) const;

  // The stored bytes of each part (no data is read).
  CheckpointSizes sizes() const;

  // Checks every dataset's checksum (reading each once, a block at a time) and returns what
  // is wrong, empty when the file is intact.
  std::vector<DatasetProblem> verify() const;

  // Bytes per block read (default 2 MiB: a block is checksummed while still in cache).
  void set_block_bytes(size_t bytes);

 private:
  struct Impl;
  explicit CheckpointReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cadre::checkpoint
