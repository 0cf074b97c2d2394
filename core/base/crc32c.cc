#include "core/base/crc32c.h"

#include <array>
#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace cadre::crc32c {
namespace {

// The Castagnoli polynomial in the register's (reflected) bit order.
constexpr uint32_t kPolynomial = 0x82F63B78u;

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t value = i;
    for (int bit = 0; bit < 8; ++bit) value = (value >> 1) ^ ((value & 1u) ? kPolynomial : 0u);
    table[i] = value;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

// Polynomials modulo the CRC polynomial, in the bit order of the CRC register: bit 31 holds
// the coefficient of x^0 and bit 0 that of x^31.
uint32_t multiply_mod_p(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 0; i < 32; ++i) {
    if (a & (0x80000000u >> i)) product ^= b;
    b = (b & 1u) ? (b >> 1) ^ kPolynomial : b >> 1;  // b *= x
  }
  return product;
}

// x^(8 * bytes) mod P: what feeding `bytes` zero bytes multiplies a register by.
uint32_t x_to_8n(uint64_t bytes) {
  uint32_t result = 0x80000000u, power = 0x00800000u;  // x^0, x^8
  for (; bytes != 0; bytes >>= 1) {
    if (bytes & 1u) result = multiply_mod_p(result, power);
    power = multiply_mod_p(power, power);
  }
  return result;
}

#if defined(__SSE4_2__)
uint32_t extend_hardware(uint32_t state, const uint8_t* bytes, size_t size) {
  // The crc32 instruction has a latency of three cycles but issues every cycle: three
  // independent streams over adjacent stripes keep it busy. A register fed stripe B after
  // holding s equals s shifted by |B| zero bytes XOR the CRC of B from a zero register, and
  // the shift is a multiplication by x^(8|B|) mod P.
  constexpr size_t kStripe = 32 * 1024;
  static const uint32_t kShift1 = x_to_8n(kStripe), kShift2 = x_to_8n(2 * kStripe);
  while (size >= 3 * kStripe) {
    uint64_t s0 = state, s1 = 0, s2 = 0;
    for (size_t i = 0; i < kStripe; i += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, bytes + i, 8);
      std::memcpy(&w1, bytes + kStripe + i, 8);
      std::memcpy(&w2, bytes + 2 * kStripe + i, 8);
      s0 = _mm_crc32_u64(s0, w0);
      s1 = _mm_crc32_u64(s1, w1);
      s2 = _mm_crc32_u64(s2, w2);
    }
    state = multiply_mod_p(kShift2, static_cast<uint32_t>(s0)) ^
            multiply_mod_p(kShift1, static_cast<uint32_t>(s1)) ^ static_cast<uint32_t>(s2);
    bytes += 3 * kStripe;
    size -= 3 * kStripe;
  }
  uint64_t wide = state;
  for (; size >= 8; size -= 8, bytes += 8) {
    uint64_t word;
    std::memcpy(&word, bytes, 8);
    wide = _mm_crc32_u64(wide, word);
  }
  state = static_cast<uint32_t>(wide);
  for (; size > 0; --size) state = _mm_crc32_u8(state, *bytes++);
  return state;
}
#endif

}  // namespace

namespace internal {

uint32_t extend_tables(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  uint32_t state = ~crc;
  for (; size > 0; --size) state = (state >> 8) ^ kTable[(state ^ *bytes++) & 0xFFu];
  return ~state;
}

}  // namespace internal

uint32_t extend(uint32_t crc, const void* data, size_t size) {
#if defined(__SSE4_2__)
  return ~extend_hardware(~crc, static_cast<const uint8_t*>(data), size);
#else
  return internal::extend_tables(crc, data, size);
#endif
}

uint32_t combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b) {
  // The pre- and post-inversions cancel: crc(a + b) = crc(a) * x^(8|b|) + crc(b).
  return multiply_mod_p(x_to_8n(size_b), crc_a) ^ crc_b;
}

}  // namespace cadre::crc32c
