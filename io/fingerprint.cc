// FarmHash's 64-bit fingerprint (its "na" family, which farmhash::Fingerprint64 is) and
// TensorFlow's FingerprintCat64, written from the published algorithm: the ids of hashed
// feature columns depend on every bit, so this must equal the reference on every input
// (CategoricalTest checks values TensorFlow computed).
#include <cstring>
#include <utility>

#include "cadre/io/categorical.h"

namespace cadre::io {
namespace {

constexpr uint64_t k0 = 0xc3a5c85c97cb3127ull;
constexpr uint64_t k1 = 0xb492b66fbe98f273ull;
constexpr uint64_t k2 = 0x9ae16a3b2f90404full;

// Little-endian loads (the fingerprint is defined on little-endian words).
uint64_t fetch64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
uint32_t fetch32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint64_t rotate(uint64_t v, int shift) {
  return shift == 0 ? v : (v >> shift) | (v << (64 - shift));
}
uint64_t shift_mix(uint64_t v) { return v ^ (v >> 47); }

uint64_t hash_len16(uint64_t u, uint64_t v, uint64_t mul) {
  uint64_t a = (u ^ v) * mul;
  a ^= a >> 47;
  uint64_t b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}

uint64_t hash_len0to16(const char* s, size_t len) {
  if (len >= 8) {
    uint64_t mul = k2 + len * 2;
    uint64_t a = fetch64(s) + k2;
    uint64_t b = fetch64(s + len - 8);
    uint64_t c = rotate(b, 37) * mul + a;
    uint64_t d = (rotate(a, 25) + b) * mul;
    return hash_len16(c, d, mul);
  }
  if (len >= 4) {
    uint64_t mul = k2 + len * 2;
    uint64_t a = fetch32(s);
    return hash_len16(len + (a << 3), fetch32(s + len - 4), mul);
  }
  if (len > 0) {
    auto a = static_cast<uint8_t>(s[0]);
    auto b = static_cast<uint8_t>(s[len >> 1]);
    auto c = static_cast<uint8_t>(s[len - 1]);
    uint32_t y = static_cast<uint32_t>(a) + (static_cast<uint32_t>(b) << 8);
    uint32_t z = static_cast<uint32_t>(len) + (static_cast<uint32_t>(c) << 2);
    return shift_mix(y * k2 ^ z * k0) * k2;
  }
  return k2;
}

uint64_t hash_len17to32(const char* s, size_t len) {
  uint64_t mul = k2 + len * 2;
  uint64_t a = fetch64(s) * k1;
  uint64_t b = fetch64(s + 8);
  uint64_t c = fetch64(s + len - 8) * mul;
  uint64_t d = fetch64(s + len - 16) * k2;
  return hash_len16(rotate(a + b, 43) + rotate(c, 30) + d, a + rotate(b + k2, 18) + c, mul);
}

uint64_t hash_len33to64(const char* s, size_t len) {
  uint64_t mul = k2 + len * 2;
  uint64_t a = fetch64(s) * k2;
  uint64_t b = fetch64(s + 8);
  uint64_t c = fetch64(s + len - 8) * mul;
  uint64_t d = fetch64(s + len - 16) * k2;
  uint64_t y = rotate(a + b, 43) + rotate(c, 30) + d;
  uint64_t z = hash_len16(y, a + rotate(b + k2, 18) + c, mul);
  uint64_t e = fetch64(s + 16) * mul;
  uint64_t f = fetch64(s + 24);
  uint64_t g = (y + fetch64(s + len - 32)) * mul;
  uint64_t h = (z + fetch64(s + len - 24)) * mul;
  return hash_len16(rotate(e + f, 43) + rotate(g, 30) + h, e + rotate(f + a, 18) + g, mul);
}

using Pair = std::pair<uint64_t, uint64_t>;

Pair weak_hash_len32(const char* s, uint64_t a, uint64_t b) {
  uint64_t w = fetch64(s), x = fetch64(s + 8), y = fetch64(s + 16), z = fetch64(s + 24);
  a += w;
  b = rotate(b + a + z, 21);
  uint64_t c = a;
  a += x;
  a += y;
  b += rotate(a, 44);
  return {a + z, b + c};
}

// One 64-byte round of the long-input loop; `mul` and `extra` differ in the last round.
void round64(const char* s, uint64_t mul, uint64_t extra, uint64_t& x, uint64_t& y, uint64_t& z,
             Pair& v, Pair& w) {
  x = rotate(x + y + v.first + fetch64(s + 8), 37) * mul;
  y = rotate(y + v.second + fetch64(s + 48), 42) * mul;
  x ^= w.second * extra;
  y += v.first * extra + fetch64(s + 40);
  z = rotate(z + w.first, 33) * mul;
  v = weak_hash_len32(s, v.second * mul, x + w.first);
  w = weak_hash_len32(s + 32, z + w.second, y + fetch64(s + 16));
  std::swap(z, x);
}

uint64_t hash_long(const char* s, size_t len) {
  constexpr uint64_t seed = 81;
  uint64_t x = seed;
  uint64_t y = seed * k1 + 113;
  uint64_t z = shift_mix(y * k2 + 113) * k2;
  Pair v{0, 0}, w{0, 0};
  x = x * k2 + fetch64(s);
  const char* end = s + ((len - 1) / 64) * 64;
  const char* last64 = end + ((len - 1) & 63) - 63;
  do {
    round64(s, k1, 1, x, y, z, v, w);
    s += 64;
  } while (s != end);
  uint64_t mul = k1 + ((z & 0xff) << 1);
  w.first += (len - 1) & 63;
  v.first += w.first;
  w.first += v.first;
  round64(last64, mul, 9, x, y, z, v, w);
  return hash_len16(hash_len16(v.first, w.first, mul) + shift_mix(y) * k0 + z,
                    hash_len16(v.second, w.second, mul) + x, mul);
}

}  // namespace

uint64_t fingerprint64(std::string_view bytes) {
  const char* s = bytes.data();
  size_t len = bytes.size();
  if (len <= 16) return hash_len0to16(s, len);
  if (len <= 32) return hash_len17to32(s, len);
  if (len <= 64) return hash_len33to64(s, len);
  return hash_long(s, len);
}

uint64_t fingerprint_cat64(uint64_t first, uint64_t second) {
  constexpr uint64_t kMul = 0xc6a4a7935bd1e995ull;
  uint64_t result = first ^ kMul;
  result ^= shift_mix(second * kMul) * kMul;
  result *= kMul;
  result = shift_mix(result) * kMul;
  return shift_mix(result);
}

}  // namespace cadre::io
