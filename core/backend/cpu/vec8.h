// Eight float or int32 lanes (one AVX register) as a GCC/Clang vector type, for loops the
// auto-vectoriser handles badly: it turns selects into masked loads and stores (microcoded
// and slow on AMD cores) and keeps run-time-indexed sums in memory.
#pragma once

#include <cstdint>
#include <cstring>

namespace cadre::backend::cpu::vec8 {

constexpr int64_t kLanes = 8;
using Float = float __attribute__((vector_size(kLanes * sizeof(float))));
using Int = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));

template <typename V, typename T>
inline V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V, typename T>
inline void store(T* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// Lane by lane: a where mask is all ones, else b (mask lanes are all ones or all zeros, as
// comparisons give).
inline Float select(Int mask, Float a, Float b) {
  return reinterpret_cast<Float>((mask & reinterpret_cast<Int>(a)) |
                                 (~mask & reinterpret_cast<Int>(b)));
}
inline Int select(Int mask, Int a, Int b) { return (mask & a) | (~mask & b); }

// A ReLU's gradient: g where the ReLU's output is positive, else zero.
inline Float relu_gradient(Float output, Float g) { return select(output > 0.f, g, Float{}); }

// to[i] += from[i] for i in [0, n).
inline void add_into(float* to, const float* from, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    store(to + i, load<Float>(to + i) + load<Float>(from + i));
  }
  for (; i < n; ++i) to[i] += from[i];
}

}  // namespace cadre::backend::cpu::vec8
