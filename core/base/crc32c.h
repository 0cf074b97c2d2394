// CRC-32C (Castagnoli, the iSCSI polynomial): the checksum of every checkpoint dataset and of
// TFRecord framing. crc32c::value("123456789") == 0xE3069283. Pure functions: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cadre::crc32c {

// The CRC of `size` more bytes after bytes whose CRC was `crc` (0 for none):
// extend(value(a), b) == value(a + b). Folds buffers of 1 KiB and more with carry-less
// multiplies where the CPU has AVX-512 VPCLMULQDQ (50-75 GB/s in cache); else the SSE4.2
// crc32 instruction (the build's x86-64-v3 baseline has it), three streams at a time over
// large buffers.
uint32_t extend(uint32_t crc, const void* data, size_t size);
inline uint32_t value(const void* data, size_t size) { return extend(0, data, size); }
inline uint32_t value(std::string_view bytes) { return extend(0, bytes.data(), bytes.size()); }

// value(a + b) from value(a), value(b) and b's length, so that blocks checksummed
// independently (on other threads) join in order.
uint32_t combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b);

namespace internal {
// The byte-table definition, which tests compare the fast path against.
uint32_t extend_tables(uint32_t crc, const void* data, size_t size);
}  // namespace internal

}  // namespace cadre::crc32c
