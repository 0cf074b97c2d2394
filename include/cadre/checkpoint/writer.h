// Writes one checkpoint file. Publishing it (sync, rename, state file) is
// CheckpointManager's job; this only produces the HDF5 file described in FORMAT.md.
#pragma once

#include <cstddef>
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
  // The caller will fsync the file: its blocks are handed to the device as they are
  // written. Otherwise they stay in the page cache until the kernel writes them back (a
  // checkpoint that retention deletes sooner never reaches the disk).
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

// The library version written into files (the project's version).
const char* library_version();

}  // namespace cadre::checkpoint
