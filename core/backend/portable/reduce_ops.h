// The combining operations of the CUDA reductions (the CPU's in
// core/backend/cpu/reduction_kernels.cc: sums accumulate in double, or int64 for integers;
// max and min propagate NaN), and the per-output body of argmax/argmin.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/backend/portable/scalar_math.h"

namespace cadre::backend::portable {

template <typename T>
struct SumOp {
  using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  CADRE_HOST_DEVICE static Acc init() { return Acc(0); }
  CADRE_HOST_DEVICE static Acc combine(Acc a, Acc b) { return a + b; }
};

template <typename T>
struct MaxOp {
  using Acc = T;
  CADRE_HOST_DEVICE static Acc init() {
    if constexpr (std::is_floating_point_v<T>) {
      return -infinity<T>();
    } else {
      return std::numeric_limits<T>::lowest();
    }
  }
  CADRE_HOST_DEVICE static Acc combine(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (is_nan(a) || is_nan(b)) return quiet_nan<T>();
    }
    return a > b ? a : b;
  }
};

template <typename T>
struct MinOp {
  using Acc = T;
  CADRE_HOST_DEVICE static Acc init() {
    if constexpr (std::is_floating_point_v<T>) {
      return infinity<T>();
    } else {
      return std::numeric_limits<T>::max();
    }
  }
  CADRE_HOST_DEVICE static Acc combine(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (is_nan(a) || is_nan(b)) return quiet_nan<T>();
    }
    return a < b ? a : b;
  }
};

struct AnyOp {
  using Acc = bool;
  CADRE_HOST_DEVICE static Acc init() { return false; }
  CADRE_HOST_DEVICE static Acc combine(Acc a, Acc b) { return a || b; }
};

struct AllOp {
  using Acc = bool;
  CADRE_HOST_DEVICE static Acc init() { return true; }
  CADRE_HOST_DEVICE static Acc combine(Acc a, Acc b) { return a && b; }
};

// The reduction's result from its accumulator: the mean divides by `count` (NaN, or 0 for
// integers, when count is 0).
template <typename R, typename Acc>
CADRE_HOST_DEVICE inline R finish_reduction(Acc acc, bool mean, int64_t count) {
  if (mean) {
    if constexpr (std::is_floating_point_v<Acc>) {
      return static_cast<R>(count == 0 ? quiet_nan<Acc>() : acc / Acc(count));
    } else {
      return static_cast<R>(count == 0 ? 0 : acc / count);
    }
  }
  return static_cast<R>(acc);
}

// out[j] for j over [outer, inner]: the first index along the middle axis of x
// [outer, n, inner] holding the extreme value (a NaN counts as the extreme).
template <typename T>
struct ArgReduceElement {
  const T* x;
  int64_t* out;
  int64_t n, inner;
  bool is_max;
  CADRE_HOST_DEVICE void operator()(int64_t j) const {
    int64_t o = j / inner, i = j - o * inner;
    const T* base = x + o * n * inner + i;
    int64_t best = 0;
    for (int64_t r = 1; r < n; ++r) {
      T candidate = base[r * inner], current = base[best * inner];
      bool better;
      if (is_nan(current)) {
        better = false;
      } else if (is_nan(candidate)) {
        better = true;
      } else {
        better = is_max ? candidate > current : candidate < current;
      }
      if (better) best = r;
    }
    out[j] = best;
  }
};

}  // namespace cadre::backend::portable
