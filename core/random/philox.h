// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), a
// counter-based generator: the output for a counter is a pure function of the counter and
// the key. Header-only so that CPU and CUDA kernels share one definition.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/base/host_device.h"

namespace cadre::philox {

struct Block {
  uint32_t v[4];
};

CADRE_HOST_DEVICE inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

// The four 32-bit outputs for counter (c0..c3) under the 64-bit key.
CADRE_HOST_DEVICE inline Block generate(uint64_t key, uint32_t c0, uint32_t c1, uint32_t c2,
                                        uint32_t c3) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c0, hi0, lo0);
    mulhilo(kM1, c2, hi1, lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// Block number `block` of a stream; `attempt` selects an independent block for rejection
// sampling.
CADRE_HOST_DEVICE inline Block block(uint64_t key, uint64_t block, uint32_t attempt = 0) {
  return generate(key, static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), attempt,
                  0);
}

// [0, 1) with 24 random bits.
CADRE_HOST_DEVICE inline float to_unit_float(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}
// [0, 1) with 53 random bits.
CADRE_HOST_DEVICE inline double to_unit_double(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// Two standard normals from two uniform words (Box-Muller), in double precision so that
// float and double outputs of one stream agree to float precision.
CADRE_HOST_DEVICE inline void box_muller(uint32_t a, uint32_t b, double& z0, double& z1) {
  constexpr double kTwoPi = 6.283185307179586;
  double u1 = (static_cast<double>(a) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
  double u2 = static_cast<double>(b) * (1.0 / 4294967296.0);
  double r = ::sqrt(-2.0 * ::log(u1));
  z0 = r * ::cos(kTwoPi * u2);
  z1 = r * ::sin(kTwoPi * u2);
}

}  // namespace cadre::philox
