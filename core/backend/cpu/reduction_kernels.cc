// CPU reductions over the middle axis of [outer, reduced, inner].
#include <cmath>
#include <limits>
#include <vector>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/kernels/reduction.h"

namespace cadre::backend::cpu {
namespace {

using kernels::ArgReduceOp;
using kernels::ReduceOp;

// Partial results of long reductions are combined in chunks of this many elements, a size
// fixed by the shape alone, so sums are the same bits with any number of threads.
constexpr int64_t kChunk = 16384;

// float32 sums accumulate in double: memory bandwidth, not arithmetic, bounds them.
template <typename T>
struct SumOp {
  using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  static Acc init() { return Acc(0); }
  static Acc combine(Acc a, Acc b) { return a + b; }
};
template <typename T>
struct MaxOp {
  using Acc = T;
  static Acc init() {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::lowest();
  }
  static Acc combine(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    return a > b ? a : b;
  }
};
template <typename T>
struct MinOp {
  using Acc = T;
  static Acc init() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::max();
  }
  static Acc combine(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    return a < b ? a : b;
  }
};
struct AnyOp {
  using Acc = bool;
  static Acc init() { return false; }
  static Acc combine(Acc a, Acc b) { return a || b; }
};
struct AllOp {
  using Acc = bool;
  static Acc init() { return true; }
  static Acc combine(Acc a, Acc b) { return a && b; }
};

// Reduces x[0..n) contiguous with 16 interleaved accumulators (vectorisable, and more
// accurate for sums than one running total).
template <typename Op, typename T>
typename Op::Acc reduce_run(const T* x, int64_t n) {
  using Acc = typename Op::Acc;
  constexpr int kLanes = 16;
  Acc lanes[kLanes];
  for (auto& l : lanes) l = Op::init();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = Op::combine(lanes[l], static_cast<Acc>(x[i + l]));
  }
  Acc acc = Op::init();
  for (; i < n; ++i) acc = Op::combine(acc, static_cast<Acc>(x[i]));
  for (int l = 0; l < kLanes; ++l) acc = Op::combine(acc, lanes[l]);
  return acc;
}

template <typename Op, typename T, typename R>
void reduce_typed(const Tensor& x, const Tensor& out, bool mean) {
  using Acc = typename Op::Acc;
  int64_t outer = x.shape()[0], n = x.shape()[1], inner = x.shape()[2];
  const T* px = typed<T>(x);
  R* po = typed_mut<R>(out);
  auto finish = [&](Acc acc) -> R {
    if (mean) {
      if constexpr (std::is_floating_point_v<Acc>) {
        return static_cast<R>(n == 0 ? std::numeric_limits<Acc>::quiet_NaN() : acc / Acc(n));
      } else {
        return static_cast<R>(n == 0 ? 0 : acc / n);
      }
    }
    return static_cast<R>(acc);
  };
  if (inner == 1) {
    if (outer == 1 && n > kChunk) {
      // One long reduction: fixed chunks in parallel, then combined in order.
      int64_t chunks = (n + kChunk - 1) / kChunk;
      std::vector<Acc> partial(chunks);
      parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          int64_t start = c * kChunk;
          partial[c] = reduce_run<Op>(px + start, std::min(kChunk, n - start));
        }
      });
      Acc acc = Op::init();
      for (Acc p : partial) acc = Op::combine(acc, p);
      po[0] = finish(acc);
      return;
    }
    int64_t grain = std::max<int64_t>(1, kChunk / std::max<int64_t>(1, n));
    parallel_for(0, outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) po[o] = finish(reduce_run<Op>(px + o * n, n));
    });
    return;
  }
  // Reduce along a strided axis: accumulate whole rows of `inner` elements.
  int64_t grain = std::max<int64_t>(1, kChunk / std::max<int64_t>(1, n * inner));
  parallel_for(0, outer, grain, [&](int64_t b, int64_t e) {
    std::vector<Acc> acc(inner);
    for (int64_t o = b; o < e; ++o) {
      std::fill(acc.begin(), acc.end(), Op::init());
      const T* base = px + o * n * inner;
      for (int64_t r = 0; r < n; ++r) {
        const T* row = base + r * inner;
        for (int64_t i = 0; i < inner; ++i) acc[i] = Op::combine(acc[i], static_cast<Acc>(row[i]));
      }
      for (int64_t i = 0; i < inner; ++i) po[o * inner + i] = finish(acc[i]);
    }
  });
}

void reduce(ReduceOp op, const Tensor& x, Tensor& out) {
  if (op == ReduceOp::kAny) return reduce_typed<AnyOp, bool, bool>(x, out, false);
  if (op == ReduceOp::kAll) return reduce_typed<AllOp, bool, bool>(x, out, false);
  visit_dtype(x.dtype(), "reduce", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw_unsupported_dtype("reduce", x.dtype(), "a numeric dtype");
    } else {
      switch (op) {
        case ReduceOp::kSum:
          return reduce_typed<SumOp<T>, T, T>(x, out, false);
        case ReduceOp::kMean:
          return reduce_typed<SumOp<T>, T, T>(x, out, true);
        case ReduceOp::kMax:
          return reduce_typed<MaxOp<T>, T, T>(x, out, false);
        case ReduceOp::kMin:
          return reduce_typed<MinOp<T>, T, T>(x, out, false);
        default:
          break;
      }
    }
  });
}

template <typename T>
bool better(ArgReduceOp op, T candidate, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(best)) return false;
    if (std::isnan(candidate)) return true;
  }
  return op == ArgReduceOp::kArgMax ? candidate > best : candidate < best;
}

void arg_reduce(ArgReduceOp op, const Tensor& x, Tensor& out) {
  visit_dtype(x.dtype(), "argmax", [&]<typename T>() {
    int64_t outer = x.shape()[0], n = x.shape()[1], inner = x.shape()[2];
    const T* px = typed<T>(x);
    int64_t* po = typed_mut<int64_t>(out);
    int64_t grain = std::max<int64_t>(1, kChunk / std::max<int64_t>(1, n * inner));
    parallel_for(0, outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* base = px + o * n * inner + i;
          int64_t best = 0;
          for (int64_t r = 1; r < n; ++r) {
            if (better(op, base[r * inner], base[best * inner])) best = r;
          }
          po[o * inner + i] = best;
        }
      }
    });
  });
}

}  // namespace

void register_reduction_kernels() {
  kernels::reduce.set(DeviceType::kCPU, &reduce);
  kernels::arg_reduce.set(DeviceType::kCPU, &arg_reduce);
}

}  // namespace cadre::backend::cpu
