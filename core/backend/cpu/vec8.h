// Eight float or int32 lanes (one AVX register): the 8-lane form of lanes.h, with the
// functions most vectorised loops use.
#pragma once

#include <cstdint>

#include "core/backend/cpu/lanes.h"

namespace cadre::backend::cpu::vec8 {

constexpr int64_t kLanes = Lanes<8>::kLanes;
using Float = Lanes<8>::Float;
using Int = Lanes<8>::Int;

using lanes::load;
using lanes::relu_gradient;
using lanes::select;
using lanes::store;

// to[i] += from[i] for i in [0, n).
inline void add_into(float* to, const float* from, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    store(to + i, load<Float>(to + i) + load<Float>(from + i));
  }
  for (; i < n; ++i) to[i] += from[i];
}

}  // namespace cadre::backend::cpu::vec8
