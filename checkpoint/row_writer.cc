#include "checkpoint/row_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "cadre/base/errors.h"
#include "checkpoint/hdf5_util.h"
#include "core/base/crc32c.h"
#include "core/base/file_errors.h"
#include "core/base/strings.h"
#include "core/runtime/in_parallel.h"

namespace cadre::checkpoint::internal {

int posix_descriptor(hid_t file) {
  Handle access(H5Fget_access_plist(file));
  if (!access.valid() || H5Pget_driver(access.get()) != H5FD_SEC2) return -1;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == nullptr) return -1;
  return *static_cast<int*>(handle);
}

RowWriter::RowWriter(hid_t dataset, hid_t memory_type, const Shape& shape, std::string context,
                     bool start_writeback, int descriptor)
    : dataset_(dataset),
      memory_type_(memory_type),
      shape_(shape),
      context_(std::move(context)),
      start_writeback_(start_writeback) {
  quiet_hdf5();
  int64_t rows = shape.rank() == 0 ? 1 : shape[0];
  if (rows > 0 && shape.num_elements() > 0) {
    row_bytes_ = H5Tget_size(memory_type) * static_cast<size_t>(shape.num_elements() / rows);
  }
  if (row_bytes_ == 0 || descriptor < 0) return;
  haddr_t offset = H5Dget_offset(dataset);
  if (offset != HADDR_UNDEF) {
    fd_ = descriptor;
    offset_ = static_cast<int64_t>(offset);
  }
  H5Eclear2(H5E_DEFAULT);
}

void write_fully(int descriptor, const void* data, size_t size, int64_t offset,
                 const std::string& context) {
  const auto* in = static_cast<const char*>(data);
  auto at = static_cast<off_t>(offset);
  while (size > 0) {
    ssize_t wrote = ::pwrite(descriptor, in, size, at);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) throw_errno_error(str_cat(context, ": cannot write"), errno);
    in += wrote;
    at += wrote;
    size -= static_cast<size_t>(wrote);
  }
}

void RowWriter::write_one(const Block& block) const {
  if (fd_ >= 0) {
    const size_t block_size = static_cast<size_t>(block.end - block.begin) * row_bytes_;
    const int64_t block_start = offset_ + block.begin * static_cast<int64_t>(row_bytes_);
    write_fully(fd_, block.source, block_size, block_start, context_);
#ifdef __linux__
    // Write the block to the device now, while the other thread copies the next one (the
    // fsync that publishing needs then has little left), and drop its pages from the cache:
    // the next blocks reuse them. Left cached, a large file takes as much new page cache,
    // and on the 2-vCPU VM of docs/BENCHMARKS.md memory the guest has not touched lately
    // costs a fault each: a 1 GiB worker part took 22-25 s beside training, 1.0-1.5 s so.
    if (start_writeback_) {
      ::sync_file_range(
          fd_, block_start, static_cast<off_t>(block_size),
          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      ::posix_fadvise(fd_, block_start, static_cast<off_t>(block_size), POSIX_FADV_DONTNEED);
    }
#endif
    return;
  }
  quiet_hdf5();
  herr_t status;
  if (shape_.rank() == 0) {
    status = H5Dwrite(dataset_, memory_type_, H5S_ALL, H5S_ALL, H5P_DEFAULT, block.source);
  } else {
    Handle file_space = checked(H5Dget_space(dataset_), ErrorCode::kInternal, context_);
    std::vector<hsize_t> start(shape_.rank(), 0), count(shape_.begin(), shape_.end());
    start[0] = static_cast<hsize_t>(block.begin);
    count[0] = static_cast<hsize_t>(block.end - block.begin);
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                        nullptr);
    Handle memory_space = checked(H5Screate_simple(shape_.rank(), count.data(), nullptr),
                                  ErrorCode::kInternal, "H5Screate_simple");
    status = H5Dwrite(dataset_, memory_type_, memory_space.get(), file_space.get(), H5P_DEFAULT,
                      block.source);
  }
  if (status < 0) throw_hdf5(ErrorCode::kUnavailable, str_cat(context_, ": cannot write"));
}

std::vector<uint32_t> RowWriter::write(const std::vector<Block>& blocks) const {
  std::vector<uint32_t> crcs(blocks.size());
  // Thread t takes blocks t, t + 2, ...: copying a block into the page cache and then
  // checksumming it while it is in cache, as the other thread does the next one.
  auto work = [&](int first) {
    for (size_t i = static_cast<size_t>(first); i < blocks.size(); i += 2) {
      write_one(blocks[i]);
      crcs[i] = crc32c::value(blocks[i].source,
                              static_cast<size_t>(blocks[i].end - blocks[i].begin) * row_bytes_);
    }
  };
  in_parallel(blocks.size() > 1 ? 2 : 1, work);
  return crcs;
}

}  // namespace cadre::checkpoint::internal
