// Element offsets of strided operands for a linear index over a common shape, as the CPU's
// StridedLoop walks them (core/backend/cpu/loops.h): broadcast operands carry zero strides,
// size-1 dimensions are dropped, and adjacent dimensions that every operand walks
// contiguously are merged, so most calls end with rank 1 or 2.
//
// Built on the host from tensors; evaluated on the GPU (and in host tests) per element.
#pragma once

#include <array>
#include <cstdint>

#include "cadre/tensor/shape.h"
#include "cadre/tensor/tensor.h"
#include "core/base/host_device.h"

namespace cadre::backend::portable {

template <int N>
struct Offsets {
  int rank = 1;
  bool contiguous = true;  // every operand's offset is the linear index itself
  int64_t sizes[Shape::kMaxRank] = {};
  int64_t strides[N][Shape::kMaxRank] = {};

  // offsets[k] = operand k's element offset of linear index `linear` (row-major order).
  CADRE_HOST_DEVICE void get(int64_t linear, int64_t (&offsets)[N]) const {
    if (contiguous) {
      for (int k = 0; k < N; ++k) offsets[k] = linear;
      return;
    }
    for (int k = 0; k < N; ++k) offsets[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t size = sizes[d];
      int64_t q = linear / size;
      int64_t index = linear - q * size;
      linear = q;
      for (int k = 0; k < N; ++k) offsets[k] += index * strides[k][d];
    }
  }

  CADRE_HOST_DEVICE int64_t get0(int64_t linear) const {
    int64_t offsets[N];
    get(linear, offsets);
    return offsets[0];
  }
};

// Offsets for operands of one shape (operands[0]'s); all must have that shape.
template <int N>
Offsets<N> make_offsets(const std::array<const Tensor*, N>& operands) {
  Offsets<N> o;
  const Shape& shape = operands[0]->shape();
  int r = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    o.sizes[r] = shape[d];
    for (int k = 0; k < N; ++k) o.strides[k][r] = operands[k]->strides()[d];
    ++r;
  }
  if (r == 0) {  // a single element
    o.rank = 1;
    o.sizes[0] = 1;
    for (int k = 0; k < N; ++k) o.strides[k][0] = 0;
    return o;
  }
  int merged = 0;
  for (int d = 1; d < r; ++d) {
    bool can = true;
    for (int k = 0; k < N; ++k) can = can && o.strides[k][merged] == o.strides[k][d] * o.sizes[d];
    if (can) {
      o.sizes[merged] *= o.sizes[d];
    } else {
      ++merged;
      o.sizes[merged] = o.sizes[d];
    }
    for (int k = 0; k < N; ++k) o.strides[k][merged] = o.strides[k][d];
  }
  o.rank = merged + 1;
  o.contiguous = o.rank == 1;
  for (int k = 0; k < N; ++k) o.contiguous = o.contiguous && o.strides[k][0] == 1;
  return o;
}

}  // namespace cadre::backend::portable
