// Internal to the checkpoint module: writes rows of one contiguous HDF5 dataset in blocks,
// on two threads, checksumming each block right after copying it out (while it is cached).
//
// Cadre creates its datasets with their file space allocated up front (and no fill), so a
// dataset's bytes have a fixed place in the file: blocks are written there with pwrite(2)
// on HDF5's own descriptor, in parallel. Where that is not possible the blocks go through
// H5Dwrite, and the second thread still overlaps checksums with the first's writes.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/tensor/shape.h"

namespace cadre::checkpoint::internal {

class RowWriter {
 public:
  // `dataset` stays owned by the caller and must outlive the writer; it is contiguous,
  // allocated, and stores `memory_type` (as the checkpoint writer creates its datasets).
  // `start_writeback`: write each block to the device as soon as it is written and drop its
  // pages from the page cache (an fsync follows; see WriteOptions::durable). `descriptor`:
  // the file's (posix_descriptor), for pwrite; -1 writes through H5Dwrite.
  RowWriter(hid_t dataset, hid_t memory_type, const Shape& shape, std::string context,
            bool start_writeback, int descriptor);

  size_t row_bytes() const { return row_bytes_; }
  // Whether blocks go to the descriptor with pwrite, and then the dataset's first byte.
  bool direct() const { return fd_ >= 0; }
  int64_t offset() const { return offset_; }

  // Rows [begin, end) of the dataset, taken from `source`.
  struct Block {
    int64_t begin, end;
    const void* source;
  };
  // Writes every block and returns each block's CRC-32C. Throws UnavailableError or
  // ResourceExhaustedError naming the dataset when a write fails.
  std::vector<uint32_t> write(const std::vector<Block>& blocks) const;

 private:
  void write_one(const Block& block) const;

  hid_t dataset_;
  hid_t memory_type_;
  Shape shape_;
  std::string context_;
  size_t row_bytes_ = 0;
  int fd_ = -1;         // the HDF5 file's descriptor when pwrite can be used, else -1
  int64_t offset_ = 0;  // the dataset's first byte in the file
  bool start_writeback_;
};

// pwrite(2) of all `size` bytes at `offset`, retried on short writes and EINTR. Throws as
// throw_errno_error("<context>: cannot write", errno).
void write_fully(int descriptor, const void* data, size_t size, int64_t offset,
                 const std::string& context);

// The POSIX descriptor of an HDF5 file opened with the sec2 driver, else -1.
int posix_descriptor(hid_t file);

}  // namespace cadre::checkpoint::internal
