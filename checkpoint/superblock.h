// The first check of a checkpoint file, before libhdf5 sees it: the superblock (the HDF5
// header at offset 0) must describe a file of the size on disk. libhdf5 trusts its addresses
// and sizes, and a damaged one can make it allocate gigabytes before it notices the damage
// (found by fuzzing); a checkpoint that fails here is reported as damaged instead.
#pragma once

#include <cstdint>
#include <string>

namespace cadre::checkpoint::internal {

// Throws DataLossError naming `path` and what is wrong with its superblock, given the file's
// first bytes (`head`, up to 96 of them) and its size.
void check_superblock(const std::string& path, const std::string& head, uint64_t file_size);

}  // namespace cadre::checkpoint::internal
