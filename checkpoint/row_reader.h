// Internal to the checkpoint module: reads rows of one HDF5 dataset in blocks, on two
// threads, checksumming each block while it is still in cache.
//
// A contiguous dataset whose stored type is the memory type (every dataset Cadre writes)
// is read with pread(2) at its file offset, which HDF5 reports for exactly this purpose;
// the two threads then copy from the page cache in parallel. Anything else goes through
// H5Dread, where the second thread still overlaps its checksums with the first's reads.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/tensor/shape.h"

namespace cadre::checkpoint::internal {

class RowReader {
 public:
  // `file` and `dataset` stay owned by the caller and must outlive the reader.
  RowReader(hid_t file, hid_t dataset, hid_t memory_type, const Shape& shape, std::string context);

  // Bytes per row (per element for a 0-d dataset); 0 when the dataset is empty.
  size_t row_bytes() const { return row_bytes_; }
  int64_t rows() const { return rows_; }

  // Rows [begin, end) of the dataset, to be written at `target`.
  struct Block {
    int64_t begin, end;
    void* target;
  };
  // Reads every block; returns each block's CRC-32C when `checksum` (else an empty
  // vector). Throws DataLossError naming the dataset when the data cannot be read.
  std::vector<uint32_t> read(const std::vector<Block>& blocks, bool checksum) const;

 private:
  void read_one(const Block& block) const;

  hid_t dataset_;
  hid_t memory_type_;
  Shape shape_;
  std::string context_;
  int64_t rows_ = 0;
  size_t row_bytes_ = 0;
  int fd_ = -1;         // the HDF5 file's descriptor when pread can be used, else -1
  int64_t offset_ = 0;  // the dataset's first byte in the file
};

}  // namespace cadre::checkpoint::internal
