// CRC-32C (Castagnoli, the iSCSI polynomial), and the masking that TFRecord framing applies
// to the CRCs it stores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cadre::io::crc32c {

// The CRC of `n` bytes following bytes whose CRC was `crc` (0 for none). Uses the SSE4.2
// crc32 instruction when the CPU has it, else tables.
uint32_t extend(uint32_t crc, const void* data, size_t n);
inline uint32_t value(const void* data, size_t n) { return extend(0, data, n); }
inline uint32_t value(std::string_view bytes) { return extend(0, bytes.data(), bytes.size()); }

// TFRecord stores mask(crc): computing a CRC over data that embeds CRCs is then less
// likely to be degenerate.
inline uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t unmask(uint32_t masked) {
  uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

namespace internal {
// Both implementations, so that tests check each on any machine that can run it.
uint32_t extend_tables(uint32_t crc, const void* data, size_t n);
bool cpu_has_sse42();
uint32_t extend_sse42(uint32_t crc, const void* data, size_t n);  // only if cpu_has_sse42()
}  // namespace internal

}  // namespace cadre::io::crc32c
