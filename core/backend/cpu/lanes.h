// N float or int32 lanes as a GCC/Clang vector type, for loops the auto-vectoriser handles
// badly: it turns selects into masked loads and stores (microcoded and slow on AMD cores) and
// keeps run-time-indexed sums in memory. Loops written over Lanes<N> are compiled for 8
// lanes (AVX2, the build's baseline) and for 16 (AVX-512, chosen at run time where the CPU
// has it; see conv_one_channel.cc). The functions are always inlined, so a wide
// instantiation is compiled only inside a function whose target has the wide registers.
// vec8.h names the 8-lane form that most loops use.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cadre::backend::cpu {

// The vector types, spelled per width: a vector_size that depends on a template parameter
// is not applied.
template <int N>
struct LaneTypes;
template <>
struct LaneTypes<8> {
  using Float = float __attribute__((vector_size(32)));
  using Int = int32_t __attribute__((vector_size(32)));
};
template <>
struct LaneTypes<16> {
  using Float = float __attribute__((vector_size(64)));
  using Int = int32_t __attribute__((vector_size(64)));
};

template <int N>
struct Lanes {
  static constexpr int64_t kLanes = N;
  using Float = typename LaneTypes<N>::Float;
  using Int = typename LaneTypes<N>::Int;
};

namespace lanes {

// A 16-lane value passed or returned by a function compiled without AVX-512 would change
// the calling convention; these functions are always inlined into their callers, so no
// such call exists.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

template <typename V, typename T>
[[gnu::always_inline]] inline V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V, typename T>
[[gnu::always_inline]] inline void store(T* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
// Lane by lane: a where mask is all ones, else b (mask lanes are all ones or all zeros, as
// comparisons give). V is a float or an int vector of the mask's width.
template <typename V, typename I>
[[gnu::always_inline]] inline V select(I mask, V a, V b) {
  if constexpr (std::is_same_v<V, I>) {
    return (mask & a) | (~mask & b);
  } else {
    return reinterpret_cast<V>((mask & reinterpret_cast<I>(a)) | (~mask & reinterpret_cast<I>(b)));
  }
}
// A ReLU's gradient: g where the ReLU's output is positive, else zero.
template <typename V>
[[gnu::always_inline]] inline V relu_gradient(V output, V g) {
  return select(output > 0.f, g, V{});
}

#pragma GCC diagnostic pop

}  // namespace lanes
}  // namespace cadre::backend::cpu
