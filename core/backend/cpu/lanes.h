// N float or int32 lanes as a GCC/Clang vector type, for loops written once and compiled
// for 8 lanes (AVX2, the build's baseline) and for 16 (AVX-512, chosen at run time where
// the CPU has it; see conv_one_channel.cc). Every function is always inlined, so a wide
// instantiation is compiled only inside a function whose target has the wide registers.
// vec8.h is the 8-lane form the other loops use.
#pragma once

#include <cstdint>
#include <cstring>

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

// A 16-lane value passed or returned by a function compiled without AVX-512 would change
// the calling convention; these functions are always inlined into their callers, so no
// such call exists.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
template <int N>
struct Lanes {
  static constexpr int64_t kLanes = N;
  using Float = typename LaneTypes<N>::Float;
  using Int = typename LaneTypes<N>::Int;

  template <typename V, typename T>
  [[gnu::always_inline]] static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  template <typename V, typename T>
  [[gnu::always_inline]] static void store(T* p, V v) {
    std::memcpy(p, &v, sizeof v);
  }
  // Lane by lane: a where mask is all ones, else b.
  [[gnu::always_inline]] static Float select(Int mask, Float a, Float b) {
    return reinterpret_cast<Float>((mask & reinterpret_cast<Int>(a)) |
                                   (~mask & reinterpret_cast<Int>(b)));
  }
  [[gnu::always_inline]] static Int select(Int mask, Int a, Int b) {
    return (mask & a) | (~mask & b);
  }
  // A ReLU's gradient: g where the ReLU's output is positive, else zero.
  [[gnu::always_inline]] static Float relu_gradient(Float output, Float g) {
    return select(output > 0.f, g, Float{});
  }
};
#pragma GCC diagnostic pop

}  // namespace cadre::backend::cpu
