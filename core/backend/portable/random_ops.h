// Per-counter-block bodies of the random kernels, reproducing the CPU backend's streams
// (core/backend/cpu/random_kernels.cc): element i of a uniform draw comes from block
// offset + i / 4, word i % 4 (a double also takes word i % 4 of the same block at attempt
// 1); a normal draw takes two elements per block (Box-Muller on words 0 and 1); a truncated
// normal takes one element per block, retrying with the counter's third word. The GPU runs
// one functor call per block; the host tests run the same functors against the CPU.
//
// Bit-exactness needs the host's operation order: the CUDA file that includes this header is
// compiled with --fmad=false, so that lo + (hi - lo) * u is not contracted into an FMA.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/random/philox.h"

namespace cadre::backend::portable {

// Writes the elements of block `blk` of a uniform [lo, hi) draw of n elements.
template <typename T>
struct UniformBlock {
  T* out;
  int64_t n;
  uint64_t key, offset;
  double lo, hi;
  CADRE_HOST_DEVICE void operator()(int64_t blk) const {
    philox::Block r = philox::block(key, offset + static_cast<uint64_t>(blk));
    philox::Block w{};
    if constexpr (std::is_same_v<T, double>) {
      w = philox::block(key, offset + static_cast<uint64_t>(blk), 1);
    }
    for (int j = 0; j < 4; ++j) {
      int64_t i = blk * 4 + j;
      if (i >= n) break;
      if constexpr (std::is_same_v<T, float>) {
        out[i] = static_cast<float>(lo + (hi - lo) * philox::to_unit_float(r.v[j]));
      } else {
        out[i] = lo + (hi - lo) * philox::to_unit_double(r.v[j], w.v[j]);
      }
    }
  }
};

// Elements 2 blk and 2 blk + 1 of a normal draw.
template <typename T>
struct NormalBlock {
  T* out;
  int64_t n;
  uint64_t key, offset;
  double mean, stddev;
  CADRE_HOST_DEVICE void operator()(int64_t blk) const {
    philox::Block r = philox::block(key, offset + static_cast<uint64_t>(blk));
    double z0, z1;
    philox::box_muller(r.v[0], r.v[1], z0, z1);
    int64_t i = blk * 2;
    out[i] = static_cast<T>(mean + stddev * z0);
    if (i + 1 < n) out[i + 1] = static_cast<T>(mean + stddev * z1);
  }
};

// Element i of a normal draw resampled until within two standard deviations.
template <typename T>
struct TruncatedNormalElement {
  T* out;
  uint64_t key, offset;
  double mean, stddev;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    double value = 0;
    for (uint32_t attempt = 0;; ++attempt) {
      philox::Block r = philox::block(key, offset + static_cast<uint64_t>(i), attempt);
      double z0, z1;
      philox::box_muller(r.v[0], r.v[1], z0, z1);
      if (z0 <= 2 && z0 >= -2) {
        value = z0;
        break;
      }
      if (z1 <= 2 && z1 >= -2) {
        value = z1;
        break;
      }
      philox::box_muller(r.v[2], r.v[3], z0, z1);
      if (z0 <= 2 && z0 >= -2) {
        value = z0;
        break;
      }
      if (z1 <= 2 && z1 >= -2) {
        value = z1;
        break;
      }
    }
    out[i] = static_cast<T>(mean + stddev * value);
  }
};

// The dropout mask's elements of block blk: scale where the uniform float >= rate, else 0.
template <typename T>
struct DropoutBlock {
  T* mask;
  int64_t n;
  uint64_t key, offset;
  T scale;
  float threshold;
  CADRE_HOST_DEVICE void operator()(int64_t blk) const {
    philox::Block r = philox::block(key, offset + static_cast<uint64_t>(blk));
    for (int j = 0; j < 4; ++j) {
      int64_t i = blk * 4 + j;
      if (i >= n) break;
      mask[i] = philox::to_unit_float(r.v[j]) >= threshold ? scale : T(0);
    }
  }
};

}  // namespace cadre::backend::portable
