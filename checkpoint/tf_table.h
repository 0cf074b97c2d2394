// Internal to the checkpoint module: the sorted string table TensorFlow writes as a
// checkpoint's .index file (tensorflow/core/lib/io/table, LevelDB's table format): blocks of
// prefix-compressed entries, each followed by its compression type and masked CRC-32C, an
// index block of block handles, and a 48-byte footer ending in a magic number.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cadre::checkpoint::internal {

using TableEntries = std::vector<std::pair<std::string, std::string>>;

// Every entry of the table in `bytes` (a whole file), in key order. Checks each block's
// checksum. Throws DataLossError naming `file` and what is wrong when the bytes are not such
// a table (no magic number, a handle or an entry past its block, a checksum that does not
// match) or use a compression this reader lacks (snappy).
TableEntries read_table(std::string_view bytes, const std::string& file);

// A table holding `entries`, whose keys must increase strictly (InvalidArgumentError
// otherwise), uncompressed, in data blocks of about `block_bytes`.
std::string build_table(const TableEntries& entries, size_t block_bytes = 256 << 10);

// LevelDB's masked CRC-32C, which TensorFlow stores for blocks and for tensors' bytes.
uint32_t mask_crc(uint32_t crc);

}  // namespace cadre::checkpoint::internal
