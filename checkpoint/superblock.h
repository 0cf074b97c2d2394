// The superblock (the HDF5 header at offset 0) of checkpoint files: checked before libhdf5
// reads a file, and sealed in the image of a file libhdf5 still holds open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cadre::checkpoint::internal {

// The first check of a checkpoint file, before libhdf5 sees it: the superblock must describe
// a file of the size on disk. libhdf5 trusts its addresses and sizes, and a damaged one can
// make it allocate gigabytes before it notices the damage (found by fuzzing); a checkpoint
// that fails here is reported as damaged instead. Throws DataLossError naming `path` and
// what is wrong with its superblock, given the file's first bytes (`head`, up to 96 of
// them) and its size.
void check_superblock(const std::string& path, const std::string& head, uint64_t file_size);

// libhdf5 flags the superblock (versions 2 and 3) of a file it holds open for writing, and
// H5Fget_file_image of HDF5 1.10 clears that flag in the image without updating the
// superblock's checksum, which makes the image unreadable. Clears the flag in `image` (a
// whole file's bytes, `size` of them, 8-byte addresses) and recomputes the checksum; returns
// the end-of-file address the superblock records. Throws InternalError for any other
// superblock.
uint64_t seal_superblock(char* image, size_t size);

}  // namespace cadre::checkpoint::internal
