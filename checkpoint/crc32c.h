// CRC-32C (Castagnoli), the checksum stored with every dataset of a checkpoint.
//
// Uses the SSE4.2 crc32 instruction when the build targets it, a table otherwise; both give
// the same values (crc32c("123456789") == 0xE3069283). Thread-safe: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cadre::checkpoint {

// Continues a CRC over `size` more bytes: crc32c_extend(crc32c(a), b) == crc32c(a + b).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);
inline uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }
// The CRC of a + b from crc32c(a), crc32c(b) and b's length, so that blocks can be
// checksummed independently (on another thread) and joined in order.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b);

}  // namespace cadre::checkpoint
