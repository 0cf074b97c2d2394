// TFRecord stores CRCs masked: a CRC computed over data that embeds CRCs is then less
// likely to be degenerate.
#pragma once

#include <cstdint>

namespace cadre::io {

inline uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t unmask_crc(uint32_t masked) {
  uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

}  // namespace cadre::io
