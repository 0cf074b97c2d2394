// Writes one checkpoint file. Publishing it (sync, rename, state file) is
// CheckpointManager's job; this only produces the HDF5 file described in FORMAT.md.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cadre/checkpoint/contents.h"

namespace cadre::checkpoint {

struct WriteOptions {
  // Large variables are written and checksummed in blocks of whole rows of about this
  // size (small enough to checksum from cache right after the copy); a tensor that is not a
  // contiguous host tensor is copied to the host one block at a time, so no second full copy of a
  // variable is ever held.
  size_t block_bytes = size_t{4} << 20;
  // Informational attributes of the file; 0 means now.
  double created_unix_seconds = 0;
  // The caller will fsync the file: its blocks are written to the device as they are
  // written, and their pages dropped from the page cache. Otherwise they stay in the page cache
  // until the kernel writes them back (a checkpoint that retention deletes sooner never reaches the
  // disk).
  bool durable = true;
};

// Writes `data` to a new HDF5 file at `path` (truncating any file there).
//
// Throws InvalidArgumentError (see check_data) before touching the file system when the
// data cannot be saved. I/O failures throw UnavailableError or ResourceExhaustedError naming
// the file and the dataset; the partial file is left for the caller to remove.
// Thread-safe (HDF5 serialises its own calls).
void write_checkpoint_file(const std::string& path, const CheckpointData& data,
                           const WriteOptions& options = {});

// Writes checkpoint files one after another, as a CheckpointManager's saves do, for less
// CPU than write_checkpoint_file: a small checkpoint (up to 64 MiB of tensors) is built in
// an HDF5 file in memory that is kept from one write to the next, and when the next
// checkpoint has the same names, dtypes and attributes, only its values change there (a
// dataset whose shape changed is replaced). The tensors' bytes go to the file straight from
// their memory, and the rest of the in-memory file around them. The files are those
// write_checkpoint_file writes (FORMAT.md), and its errors are the same. Not thread-safe:
// one writer at a time.
class CheckpointFileWriter {
 public:
  CheckpointFileWriter();
  ~CheckpointFileWriter();
  CheckpointFileWriter(const CheckpointFileWriter&) = delete;
  CheckpointFileWriter& operator=(const CheckpointFileWriter&) = delete;

  // As write_checkpoint_file. After a failure, the next write starts from scratch.
  void write(const std::string& path, const CheckpointData& data, const WriteOptions& options = {});

  // Tensors of more bytes than this are written as write_checkpoint_file does: building
  // the file costs little beside their bytes. Below it, the writer holds the file in
  // memory between writes: the objects and, as zeros, the space of the tensors' bytes.
  static constexpr size_t kInMemoryBytes = size_t{64} << 20;

 private:
  struct InMemoryFile;
  std::unique_ptr<InMemoryFile> file_;
};

// The library version written into files (the project's version).
const char* library_version();

}  // namespace cadre::checkpoint
