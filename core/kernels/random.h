// Random-number kernels on the counter-based Philox4x32-10 generator (core/random/philox.h).
// Element i of the output uses counter block offset + i / 4 (normal: offset + i / 2;
// truncated normal: offset + i, with retries in the counter's third word), so a result
// depends on the key and offset only, never on thread scheduling or the device.
#pragma once

#include <cstdint>

#include "cadre/random/generator.h"
#include "cadre/tensor/tensor.h"
#include "core/kernels/registry.h"

namespace cadre::kernels {

using cadre::PhiloxKey;

enum class RandomDistribution {
  kUniform,          // [lo, hi)
  kNormal,           // mean lo, standard deviation hi
  kTruncatedNormal,  // normal resampled until within two standard deviations
};

// out: contiguous float32/float64.
using RandomFn = void(RandomDistribution dist, double lo, double hi, PhiloxKey key, Tensor& out);
// mask (contiguous float): 1/(1-rate) where uniform >= rate, else 0.
using DropoutMaskFn = void(double rate, PhiloxKey key, Tensor& mask);

// Counter blocks that a draw of `n` elements of `dist` consumes.
uint64_t philox_blocks(RandomDistribution dist, int64_t n);

extern KernelSlot<RandomFn> random;
extern KernelSlot<DropoutMaskFn> dropout_mask;

}  // namespace cadre::kernels
