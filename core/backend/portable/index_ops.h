// Per-element bodies of the CUDA gather and one-hot kernels (the CPU's
// core/backend/cpu/index_kernels.cc, element by element).
#pragma once

#include <cstdint>

#include "core/base/host_device.h"

namespace cadre::backend::portable {

// out [outer, n, inner] from params [outer, rows, inner]; W is the element's storage word, I
// the index type. Indices were checked to lie in [0, rows).
template <typename W, typename I>
struct GatherElement {
  const W* params;
  const I* indices;
  W* out;
  int64_t rows, n, inner;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t c = i % inner, j = i / inner;
    int64_t k = j % n, o = j / n;
    out[i] = params[(o * rows + static_cast<int64_t>(indices[k])) * inner + c];
  }
};

// out [n, depth]: on_value where the column equals the index, off_value elsewhere (an index
// outside [0, depth) gives a row of off_value).
template <typename T, typename I>
struct OneHotElement {
  const I* indices;
  T* out;
  int64_t depth;
  T on, off;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t row = i / depth, col = i - row * depth;
    out[i] = static_cast<int64_t>(indices[row]) == col ? on : off;
  }
};

}  // namespace cadre::backend::portable
