// Per-element body of the sparse softmax cross-entropy gradient (the CPU's
// core/backend/cpu/softmax_kernels.cc): dlogits[r, c] = dloss[r] * probs[r, c], minus
// dloss[r] at the label's column.
#pragma once

#include <cstdint>

#include "core/base/host_device.h"

namespace cadre::backend::portable {

template <typename T, typename L>
struct XentGradElement {
  const T* probs;
  const L* labels;
  const T* dloss;
  T* dlogits;
  int64_t cols;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t r = i / cols, c = i - r * cols;
    T g = dloss[r];
    T v = g * probs[i];
    if (static_cast<int64_t>(labels[r]) == c) v -= g;
    dlogits[i] = v;
  }
};

}  // namespace cadre::backend::portable
