#include "core/base/crc32c.h"

#include <array>
#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif
#if defined(__SSE4_2__) && defined(__x86_64__)
#include <immintrin.h>
#define CADRE_CRC32C_FOLD 1
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

// x^n mod P.
uint32_t x_to_the(uint64_t n) {
  uint32_t result = 0x80000000u, power = 0x40000000u;  // x^0, x^1
  for (; n != 0; n >>= 1) {
    if (n & 1u) result = multiply_mod_p(result, power);
    power = multiply_mod_p(power, power);
  }
  return result;
}

// x^(8 * bytes) mod P: what feeding `bytes` zero bytes multiplies a register by.
uint32_t x_to_8n(uint64_t bytes) { return x_to_the(8 * bytes); }

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

#if defined(CADRE_CRC32C_FOLD)
// Folding with carry-less multiplies (AVX-512 VPCLMULQDQ): four times the crc32
// instruction's 8 bytes a cycle. The message is a polynomial whose first bit (bit 0 of the
// first byte) has the highest degree, so a 16-byte lane whose first 8 bytes are L and last
// 8 are H stands for L x^64 + H; moved `bits` further along the message it becomes
// L x^(bits + 64) + H x^bits, which is congruent to two 64 x 32-bit carry-less products
// that fit in one lane. The products of these reflected operands come out multiplied by x,
// and a 32-bit constant in a qword's low half reads as multiplied by x^32: hence the
// exponents less 33. What is left at the end is a lane with the CRC of everything before
// it, which the crc32 instruction finishes.
struct FoldConstants {
  uint64_t low, high;  // for the lane's first and second 8 bytes
};

FoldConstants fold_by(uint64_t bits) { return {x_to_the(bits + 64 - 33), x_to_the(bits - 33)}; }

__attribute__((target("avx512f,vpclmulqdq"))) __m512i fold512(__m512i lanes, __m512i k,
                                                              __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(lanes, k, 0x00),
                                   _mm512_clmulepi64_epi128(lanes, k, 0x11), next, 0x96);
}

__attribute__((target("pclmul,sse4.2"))) __m128i fold128(__m128i lane, FoldConstants k,
                                                         __m128i next) {
  __m128i constants = _mm_set_epi64x(static_cast<int64_t>(k.high), static_cast<int64_t>(k.low));
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(lane, constants, 0x00),
                                     _mm_clmulepi64_si128(lane, constants, 0x11)),
                       next);
}

// Extends `state` (the register, not the CRC) over the first 256 * n bytes, n >= 1.
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2"))) uint32_t extend_folding(
    uint32_t state, const uint8_t* bytes, size_t blocks) {
  static const FoldConstants k2048 = fold_by(2048), k512 = fold_by(512), k384 = fold_by(384),
                             k256 = fold_by(256), k128 = fold_by(128);
  // Through memory: GCC 12 warns about the undefined upper lanes of its broadcast and
  // extract intrinsics.
  uint64_t words[8];
  auto every_lane = [&words](FoldConstants k) {
    for (int i = 0; i < 8; i += 2) words[i] = k.low, words[i + 1] = k.high;
    return words;
  };
  const __m512i by2048 = _mm512_loadu_si512(every_lane(k2048));
  const __m512i by512 = _mm512_loadu_si512(every_lane(k512));
  __m512i a0 = _mm512_loadu_si512(bytes), a1 = _mm512_loadu_si512(bytes + 64),
          a2 = _mm512_loadu_si512(bytes + 128), a3 = _mm512_loadu_si512(bytes + 192);
  // The register so far joins the message's first 32 bits.
  a0 = _mm512_xor_si512(a0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(state))));
  for (size_t b = 1; b < blocks; ++b) {
    const uint8_t* next = bytes + 256 * b;
    a0 = fold512(a0, by2048, _mm512_loadu_si512(next));
    a1 = fold512(a1, by2048, _mm512_loadu_si512(next + 64));
    a2 = fold512(a2, by2048, _mm512_loadu_si512(next + 128));
    a3 = fold512(a3, by2048, _mm512_loadu_si512(next + 192));
  }
  _mm512_storeu_si512(words, fold512(fold512(fold512(a0, by512, a1), by512, a2), by512, a3));
  auto lane_at = [&words](int i) {
    return _mm_loadu_si128(reinterpret_cast<__m128i*>(words + 2 * i));
  };
  __m128i lane = lane_at(3);
  lane = fold128(lane_at(2), k128, lane);
  lane = fold128(lane_at(1), k256, lane);
  lane = fold128(lane_at(0), k384, lane);
  uint64_t wide = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(lane)));
  wide = _mm_crc32_u64(wide, static_cast<uint64_t>(_mm_extract_epi64(lane, 1)));
  return static_cast<uint32_t>(wide);
}

bool can_fold() {
  static const bool can = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
  return can;
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
#if defined(CADRE_CRC32C_FOLD)
  // Below a few blocks the crc32 instruction is as fast.
  if (size >= 1024 && can_fold()) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    size_t blocks = size / 256;
    uint32_t state = extend_folding(~crc, bytes, blocks);
    return ~extend_hardware(state, bytes + 256 * blocks, size - 256 * blocks);
  }
#endif
#if defined(__SSE4_2__)
  return ~extend_hardware(~crc, static_cast<const uint8_t*>(data), size);
#else
  return internal::extend_tables(crc, data, size);
#endif
}

uint32_t combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b) {
  // The pre- and post-inversions cancel: crc(a + b) = crc(a) * x^(8|b|) + crc(b).
  if (crc_a == 0) return crc_b;  // a dataset's first block
  return multiply_mod_p(x_to_8n(size_b), crc_a) ^ crc_b;
}

}  // namespace cadre::crc32c
