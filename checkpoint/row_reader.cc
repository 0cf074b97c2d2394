#include "checkpoint/row_reader.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cadre/base/errors.h"
#include "checkpoint/hdf5_util.h"
#include "checkpoint/row_writer.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"
#include "core/runtime/in_parallel.h"

namespace cadre::checkpoint::internal {
RowReader::RowReader(hid_t file, hid_t dataset, hid_t memory_type, const Shape& shape,
                     std::string context)
    : dataset_(dataset), memory_type_(memory_type), shape_(shape), context_(std::move(context)) {
  quiet_hdf5();
  rows_ = shape.rank() == 0 ? 1 : shape[0];
  if (rows_ > 0 && shape.num_elements() > 0) {
    row_bytes_ = H5Tget_size(memory_type) * static_cast<size_t>(shape.num_elements() / rows_);
  }
  if (row_bytes_ == 0) return;
  Handle create(H5Dget_create_plist(dataset));
  Handle stored_type(H5Dget_type(dataset));
  haddr_t offset = H5Dget_offset(dataset);
  if (create.valid() && stored_type.valid() && H5Pget_layout(create.get()) == H5D_CONTIGUOUS &&
      offset != HADDR_UNDEF && H5Tequal(stored_type.get(), memory_type) > 0 &&
      H5Dget_storage_size(dataset) == row_bytes_ * static_cast<size_t>(rows_)) {
    fd_ = posix_descriptor(file);
    offset_ = static_cast<int64_t>(offset);
  }
  H5Eclear2(H5E_DEFAULT);
}

void RowReader::read_one(const Block& block) const {
  if (fd_ >= 0) {
    auto* out = static_cast<char*>(block.target);
    size_t size = static_cast<size_t>(block.end - block.begin) * row_bytes_;
    off_t at = static_cast<off_t>(offset_ + block.begin * static_cast<int64_t>(row_bytes_));
    while (size > 0) {
      ssize_t got = ::pread(fd_, out, size, at);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        throw DataLossError(str_cat(context_, ": cannot read bytes ", at, "..", at + size, " (",
                                    got == 0 ? "the file is truncated" : std::strerror(errno),
                                    ")"));
      }
      out += got;
      at += got;
      size -= static_cast<size_t>(got);
    }
    return;
  }
  quiet_hdf5();
  herr_t status;
  if (shape_.rank() == 0) {
    status = H5Dread(dataset_, memory_type_, H5S_ALL, H5S_ALL, H5P_DEFAULT, block.target);
  } else {
    Handle file_space = checked(H5Dget_space(dataset_), ErrorCode::kDataLoss, context_);
    std::vector<hsize_t> start(shape_.rank(), 0), count(shape_.begin(), shape_.end());
    start[0] = static_cast<hsize_t>(block.begin);
    count[0] = static_cast<hsize_t>(block.end - block.begin);
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                        nullptr);
    Handle memory_space = checked(H5Screate_simple(shape_.rank(), count.data(), nullptr),
                                  ErrorCode::kInternal, "H5Screate_simple");
    status = H5Dread(dataset_, memory_type_, memory_space.get(), file_space.get(), H5P_DEFAULT,
                     block.target);
  }
  if (status < 0) throw_hdf5(ErrorCode::kDataLoss, str_cat(context_, ": cannot read"));
}

std::vector<uint32_t> RowReader::read(const std::vector<Block>& blocks, bool checksum) const {
  std::vector<uint32_t> crcs(checksum ? blocks.size() : 0);
  // Thread t takes blocks t, t + 2, ...: reading a block and checksumming it while it is
  // in cache, as the other thread does the same with the next one.
  auto work = [&](int first) {
    for (size_t i = static_cast<size_t>(first); i < blocks.size(); i += 2) {
      read_one(blocks[i]);
      if (checksum) {
        crcs[i] = crc32c::value(blocks[i].target,
                                static_cast<size_t>(blocks[i].end - blocks[i].begin) * row_bytes_);
      }
    }
  };
  in_parallel(blocks.size() > 1 ? 2 : 1, work);
  return crcs;
}

}  // namespace cadre::checkpoint::internal
