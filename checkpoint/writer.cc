#include "cadre/checkpoint/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "checkpoint/file_builder.h"
#include "checkpoint/hdf5_util.h"
#include "checkpoint/row_writer.h"
#include "checkpoint/superblock.h"
#include "core/base/file_descriptor.h"
#include "core/base/file_errors.h"
#include "core/base/strings.h"

#ifndef CADRE_CHECKPOINT_LIBRARY_VERSION
#define CADRE_CHECKPOINT_LIBRARY_VERSION "unknown"
#endif

namespace cadre::checkpoint {
namespace {

using internal::checked;
using internal::FileBuilder;
using internal::Handle;

double creation_time(const WriteOptions& options) {
  if (options.created_unix_seconds != 0) return options.created_unix_seconds;
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// On disk (the sec2 driver) or in memory (the core driver, never written out by HDF5).
Handle file_access(bool in_memory) {
  Handle access = checked(H5Pcreate(H5P_FILE_ACCESS), ErrorCode::kInternal, "H5Pcreate");
  if (in_memory) H5Pset_fapl_core(access.get(), size_t{1} << 20, /*backing_store=*/0);
  // Large datasets start on page boundaries, so that reading them is a plain aligned copy.
  H5Pset_alignment(access.get(), hsize_t{1} << 20, 4096);
  // The HDF5 1.8 file format: its superblock and object headers carry checksums (so damaged
  // metadata fails to open instead of misreading), and every HDF5 from 1.8 on reads it.
  H5Pset_libver_bounds(access.get(), H5F_LIBVER_V18, H5F_LIBVER_V18);
  return access;
}

size_t tensor_bytes(const CheckpointData& data) {
  size_t bytes = 0;
  for (const auto& [name, value] : data.variables) bytes += value.nbytes();
  for (const auto& [name, parts] : data.partitioned_variables) {
    for (const Tensor& part : parts) bytes += part.nbytes();
  }
  for (const auto& [name, value] : data.iterator_state) bytes += value.nbytes();
  return bytes;
}

}  // namespace

const char* library_version() { return CADRE_CHECKPOINT_LIBRARY_VERSION; }

void write_checkpoint_file(const std::string& path, const CheckpointData& data,
                           const WriteOptions& options) {
  internal::write_checkpoint_file(path, data, options, {});
}

std::vector<internal::DirectRange> internal::write_checkpoint_file(
    const std::string& path, const CheckpointData& data, const WriteOptions& options,
    const RowSources& sources, const RowsInPlaceSources& in_place) {
  check_data(data);
  double created = creation_time(options);
  internal::quiet_hdf5();
  Handle access = file_access(/*in_memory=*/false);
  Handle file = checked(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()),
                        ErrorCode::kUnavailable, str_cat("cannot create checkpoint ", path));
  std::vector<internal::DirectRange> direct;
  {
    FileBuilder builder(file.get());
    builder.write(data, created,
                  {path, options, internal::posix_descriptor(file.get()), &sources, &in_place});
    direct = builder.direct_ranges();
  }
  if (!file.close()) {
    internal::throw_hdf5(ErrorCode::kUnavailable, str_cat("cannot finish checkpoint ", path));
  }
  return direct;
}

// The core driver's buffer, allocated through file image callbacks so that the file's
// bytes can be written out from where they are (H5Fget_file_image would copy them all,
// the datasets' unused space included).
struct CoreBuffer {
  char* data = nullptr;
  size_t size = 0;

  void* allocate(void* old, size_t bytes) {
    void* memory = std::realloc(old, bytes);
    if (memory != nullptr || bytes == 0) {
      data = static_cast<char*>(memory);
      size = bytes;
    }
    return memory;
  }

  static H5FD_file_image_callbacks_t callbacks(CoreBuffer* buffer) {
    H5FD_file_image_callbacks_t callbacks{};
    callbacks.image_malloc = [](size_t bytes, H5FD_file_image_op_t, void* self) {
      return static_cast<CoreBuffer*>(self)->allocate(nullptr, bytes);
    };
    callbacks.image_memcpy = [](void* to, const void* from, size_t bytes, H5FD_file_image_op_t,
                                void*) { return std::memcpy(to, from, bytes); };
    callbacks.image_realloc = [](void* old, size_t bytes, H5FD_file_image_op_t, void* self) {
      return static_cast<CoreBuffer*>(self)->allocate(old, bytes);
    };
    callbacks.image_free = [](void* memory, H5FD_file_image_op_t, void* self) -> herr_t {
      auto* buffer = static_cast<CoreBuffer*>(self);
      if (memory == buffer->data) *buffer = CoreBuffer{};
      std::free(memory);
      return 0;
    };
    // Property lists copied from the one that names the buffer share it.
    callbacks.udata_copy = [](void* self) { return self; };
    callbacks.udata_free = [](void*) -> herr_t { return 0; };
    callbacks.udata = buffer;
    return callbacks;
  }
};

// The HDF5 file in memory and its objects, kept from one write to the next. Members are
// destroyed in reverse: the builder's objects close before the file, the file before the
// buffer it lives in.
struct CheckpointFileWriter::InMemoryFile {
  CoreBuffer buffer;
  Handle file;
  std::unique_ptr<FileBuilder> builder;
  std::string layout;  // internal::layout_key of the data the objects hold
  // The bytes of the first file that were not datasets' data: its objects and padding.
  uint64_t overhead = 0;
  char superblock[48];  // sealed for the file on disk

  explicit InMemoryFile(const std::string& path) {
    static std::atomic<uint64_t> files{0};
    Handle access = file_access(/*in_memory=*/true);
    H5FD_file_image_callbacks_t callbacks = CoreBuffer::callbacks(&buffer);
    if (H5Pset_file_image_callbacks(access.get(), &callbacks) < 0) {
      internal::throw_hdf5(ErrorCode::kInternal, "H5Pset_file_image_callbacks");
    }
    // The core driver names open files, and two of the same name would clash.
    std::string name = str_cat("cadre-checkpoint-in-memory-", files.fetch_add(1));
    file = checked(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()),
                   ErrorCode::kUnavailable, str_cat("cannot create checkpoint ", path));
    builder = std::make_unique<FileBuilder>(file.get());
  }

  // Flushes the objects into the buffer and returns the file's size.
  uint64_t flush(const std::string& path) {
    if (H5Fflush(file.get(), H5F_SCOPE_LOCAL) < 0) {
      internal::throw_hdf5(ErrorCode::kUnavailable, str_cat("cannot finish checkpoint ", path));
    }
    if (buffer.size < sizeof(superblock)) {
      throw InternalError(
          str_cat("checkpoint ", path, ": HDF5 left ", buffer.size, " bytes in memory"));
    }
    std::memcpy(superblock, buffer.data, sizeof(superblock));
    return internal::seal_superblock(superblock, sizeof(superblock));
  }

  // A dataset replaced for a new shape leaves free space that HDF5 reuses only in part:
  // past a little of it, a new file is built instead (one full build's cost).
  bool wasteful(uint64_t size, uint64_t data_bytes) const {
    uint64_t waste = size - std::min(size, overhead + data_bytes);
    return waste > std::max<uint64_t>(64 << 10, size / 32);
  }

  // Writes the file's bytes but the datasets' data (`data_ranges`, sorted) to `out`,
  // which then ends at `end`. Bytes past the buffer are space HDF5 allocated and never
  // wrote: zeros, as on disk.
  void write_objects(int out, uint64_t end,
                     const std::vector<std::pair<uint64_t, uint64_t>>& data_ranges,
                     const std::string& path) const {
    std::string context = str_cat("checkpoint ", path);
    uint64_t at = 0;
    auto write_until = [&](uint64_t until) {
      until = std::min<uint64_t>(until, buffer.size);
      if (at < sizeof(superblock) && until > at) {
        uint64_t stop = std::min<uint64_t>(until, sizeof(superblock));
        internal::write_fully(out, superblock + at, stop - at, static_cast<int64_t>(at), context);
        at = stop;
      }
      if (until > at) {
        internal::write_fully(out, buffer.data + at, until - at, static_cast<int64_t>(at), context);
      }
    };
    for (const auto& [begin, finish] : data_ranges) {
      write_until(std::min(begin, end));
      at = std::max(at, finish);
    }
    write_until(end);
    if (::ftruncate(out, static_cast<off_t>(end)) != 0) throw_errno_error(context, errno);
  }
};

CheckpointFileWriter::CheckpointFileWriter() = default;
CheckpointFileWriter::~CheckpointFileWriter() = default;

void CheckpointFileWriter::write(const std::string& path, const CheckpointData& data,
                                 const WriteOptions& options) {
  check_data(data);
  if (tensor_bytes(data) > kInMemoryBytes) {
    file_.reset();
    write_checkpoint_file(path, data, options);
    return;
  }
  double created = creation_time(options);
  FileDescriptor out(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (out.get() < 0) throw_errno_error(str_cat("cannot create checkpoint ", path), errno);
  internal::quiet_hdf5();
  try {
    // At most twice: a reused file that turns out wasteful is replaced by a new one, and
    // the file on disk written again from empty.
    std::string layout = internal::layout_key(data, created);
    for (bool reused = true;;) {
      if (file_ == nullptr || file_->layout != layout) {
        file_ = std::make_unique<InMemoryFile>(path);
        reused = false;
      }
      file_->builder->write(data, created, {path, options, out.get()});
      file_->layout = layout;
      std::vector<std::pair<uint64_t, uint64_t>> data_ranges;
      for (const internal::DirectRange& range : file_->builder->direct_ranges()) {
        data_ranges.emplace_back(range.begin, range.end);
      }
      std::sort(data_ranges.begin(), data_ranges.end());
      uint64_t data_bytes = 0;
      for (const auto& [begin, finish] : data_ranges) data_bytes += finish - begin;
      uint64_t end = file_->flush(path);
      if (!reused) file_->overhead = end - std::min(end, data_bytes);
      if (reused && file_->wasteful(end, data_bytes)) {
        file_.reset();
        if (::ftruncate(out.get(), 0) != 0) throw_errno_error(str_cat("checkpoint ", path), errno);
        continue;
      }
      file_->write_objects(out.get(), end, data_ranges, path);
      break;
    }
  } catch (...) {
    file_.reset();
    throw;
  }
  if (out.close() != 0) throw_errno_error(str_cat("cannot finish checkpoint ", path), errno);
}

}  // namespace cadre::checkpoint
