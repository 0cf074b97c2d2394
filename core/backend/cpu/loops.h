// Iteration over strided operands in the row-major order of an output shape. Operands are
// views of the same shape (broadcast inputs carry zero strides); adjacent dimensions that
// every operand walks contiguously are merged so that the inner loop is as long as it can be.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "cadre/tensor/tensor.h"
#include "core/runtime/parallel_for.h"

namespace cadre::backend::cpu {

inline constexpr int64_t kElementwiseGrain = 32768;

template <int N>
struct StridedLoop {
  int rank = 1;
  std::array<int64_t, Shape::kMaxRank> shape{};
  std::array<std::array<int64_t, Shape::kMaxRank>, N> strides{};

  explicit StridedLoop(const std::array<const Tensor*, N>& operands) {
    const Shape& s = operands[0]->shape();
    // Drop size-1 dimensions, then merge dimension d into d+1 where every operand allows it.
    int r = 0;
    for (int d = 0; d < s.rank(); ++d) {
      if (s[d] == 1) continue;
      shape[r] = s[d];
      for (int k = 0; k < N; ++k) strides[k][r] = operands[k]->strides()[d];
      ++r;
    }
    if (r == 0) {
      shape[0] = 1;
      for (int k = 0; k < N; ++k) strides[k][0] = 0;
      rank = 1;
      return;
    }
    int merged = 0;
    for (int d = 1; d < r; ++d) {
      bool can = true;
      for (int k = 0; k < N; ++k) can = can && strides[k][merged] == strides[k][d] * shape[d];
      if (can) {
        shape[merged] *= shape[d];
        for (int k = 0; k < N; ++k) strides[k][merged] = strides[k][d];
      } else {
        ++merged;
        shape[merged] = shape[d];
        for (int k = 0; k < N; ++k) strides[k][merged] = strides[k][d];
      }
    }
    rank = merged + 1;
  }

  int64_t inner_stride(int k) const { return strides[k][rank - 1]; }

  // Calls row(offsets, count) for runs along the innermost dimension covering the linear
  // range [begin, end) of the output; offsets[k] is operand k's element offset of the run.
  template <typename Row>
  void for_each_row(int64_t begin, int64_t end, Row&& row) const {
    std::array<int64_t, Shape::kMaxRank> index{};
    int64_t rest = begin;
    for (int d = rank - 1; d >= 0; --d) {
      index[d] = rest % shape[d];
      rest /= shape[d];
    }
    std::array<int64_t, N> offsets{};
    for (int k = 0; k < N; ++k) {
      for (int d = 0; d < rank; ++d) offsets[k] += index[d] * strides[k][d];
    }
    int64_t pos = begin;
    const int last = rank - 1;
    while (pos < end) {
      int64_t count = std::min(shape[last] - index[last], end - pos);
      row(offsets, count);
      pos += count;
      index[last] += count;
      for (int k = 0; k < N; ++k) offsets[k] += count * strides[k][last];
      for (int d = last; d > 0 && index[d] == shape[d]; --d) {
        index[d] = 0;
        ++index[d - 1];
        for (int k = 0; k < N; ++k) {
          offsets[k] += strides[k][d - 1] - shape[d] * strides[k][d];
        }
      }
    }
  }
};

// A contiguous version of t (t itself when it already is), copied without recording on
// any gradient tape.
Tensor contiguous_raw(const Tensor& t);

template <typename T>
const T* typed(const Tensor& t) {
  return static_cast<const T*>(t.raw_data());
}
template <typename T>
T* typed_mut(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

}  // namespace cadre::backend::cpu
