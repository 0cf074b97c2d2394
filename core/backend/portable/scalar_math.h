// Scalar building blocks that the CPU and CUDA kernels share, written once for the host and
// the GPU (nvcc compiles them into the CUDA kernels, the host compiler into the CPU kernels
// and the host tests in tests/core/cuda_portable_*_test.cc): math functions, NaN and
// infinity, and the 16-bit float storage types with the CPU's conversions.
//
// Math functions are called through the C names (::expf, ::exp, ...), which resolve to
// CUDA's device functions on the GPU and to the C library on the host.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/base/host_device.h"

namespace cadre::backend::portable {

// --- math functions, overloaded for float and double ---
#define CADRE_PORTABLE_MATH1(name)                                          \
  CADRE_HOST_DEVICE inline float m_##name(float x) { return ::name##f(x); } \
  CADRE_HOST_DEVICE inline double m_##name(double x) { return ::name(x); }
CADRE_PORTABLE_MATH1(exp)
CADRE_PORTABLE_MATH1(expm1)
CADRE_PORTABLE_MATH1(log)
CADRE_PORTABLE_MATH1(log1p)
CADRE_PORTABLE_MATH1(sin)
CADRE_PORTABLE_MATH1(cos)
CADRE_PORTABLE_MATH1(tan)
CADRE_PORTABLE_MATH1(tanh)
CADRE_PORTABLE_MATH1(erf)
CADRE_PORTABLE_MATH1(erfc)
CADRE_PORTABLE_MATH1(floor)
CADRE_PORTABLE_MATH1(ceil)
CADRE_PORTABLE_MATH1(sqrt)
CADRE_PORTABLE_MATH1(fabs)
CADRE_PORTABLE_MATH1(nearbyint)
#undef CADRE_PORTABLE_MATH1
CADRE_HOST_DEVICE inline float m_fmod(float x, float y) { return ::fmodf(x, y); }
CADRE_HOST_DEVICE inline double m_fmod(double x, double y) { return ::fmod(x, y); }

template <typename T>
CADRE_HOST_DEVICE inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}
template <typename T>
CADRE_HOST_DEVICE inline T quiet_nan() {
  if constexpr (std::is_same_v<T, float>) {
    uint32_t bits = 0x7fc00000u;  // std::numeric_limits<float>::quiet_NaN()
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
  } else {
    uint64_t bits = 0x7ff8000000000000ull;
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
  }
}
template <typename T>
CADRE_HOST_DEVICE inline T infinity() {
  if constexpr (std::is_same_v<T, float>) {
    uint32_t bits = 0x7f800000u;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
  } else {
    uint64_t bits = 0x7ff0000000000000ull;
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
  }
}
template <typename T>
CADRE_HOST_DEVICE inline bool is_inf(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return m_fabs(v) == infinity<T>();
  } else {
    return false;
  }
}

// --- 16-bit float storage, bit-compatible with cadre::BFloat16 and cadre::Float16 ---
struct Bf16 {
  uint16_t bits;
};
struct Half {
  uint16_t bits;
};

CADRE_HOST_DEVICE inline uint32_t float_bits(float v) {
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}
CADRE_HOST_DEVICE inline float bits_float(uint32_t b) {
  float v;
  memcpy(&v, &b, sizeof v);
  return v;
}

// Round to nearest even; NaN stays a quiet NaN.
CADRE_HOST_DEVICE inline Bf16 to_bf16(float value) {
  uint32_t bits = float_bits(value);
  if (value != value) return {static_cast<uint16_t>((bits >> 16) | 0x40)};
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return {static_cast<uint16_t>((bits + rounding) >> 16)};
}
CADRE_HOST_DEVICE inline float from_bf16(Bf16 v) {
  return bits_float(static_cast<uint32_t>(v.bits) << 16);
}

CADRE_HOST_DEVICE inline Half to_half(float value) {
  uint32_t f = float_bits(value);
  uint32_t sign = (f >> 16) & 0x8000;
  uint32_t abs = f & 0x7fffffff;
  if (abs >= 0x7f800000) {  // inf or NaN
    return {static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0))};
  }
  if (abs >= 0x477ff000) return {static_cast<uint16_t>(sign | 0x7c00)};  // rounds to inf
  if (abs < 0x38800000) {  // subnormal half or zero: scale by 2^24 and round in float
    float scaled = bits_float(abs) * 16777216.0f;
    return {static_cast<uint16_t>(sign | static_cast<uint32_t>(::nearbyintf(scaled)))};
  }
  abs += 0xc8000fff + ((abs >> 13) & 1);  // rebias the exponent, round to nearest even
  return {static_cast<uint16_t>(sign | (abs >> 13))};
}
CADRE_HOST_DEVICE inline float from_half(Half v) {
  uint32_t sign = static_cast<uint32_t>(v.bits & 0x8000) << 16;
  uint32_t exponent = (v.bits >> 10) & 0x1f;
  uint32_t mantissa = v.bits & 0x3ff;
  if (exponent == 0) {
    return bits_float(sign | float_bits(static_cast<float>(mantissa) / 16777216.0f));
  }
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000 | (mantissa << 13));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, Bf16> || std::is_same_v<T, Half>;

// A floating-point value as integer type To, defined for every input (a plain C++ cast is
// undefined for NaN and out-of-range values): truncated toward zero, saturated at To's
// limits, and NaN as 0, as a GPU's saturating conversion gives it.
template <typename To, typename From>
CADRE_HOST_DEVICE inline To float_to_integer(From value) {
  constexpr To lowest = std::numeric_limits<To>::lowest(), highest = std::numeric_limits<To>::max();
  if (value != value) return To(0);
  if (value <= static_cast<From>(lowest)) return lowest;
  if (value >= static_cast<From>(highest)) return highest;
  return static_cast<To>(value);
}

// The CPU's convert<To>(From) for every pair of storage types.
template <typename To, typename From>
CADRE_HOST_DEVICE inline To convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<From, Bf16>) {
    return convert<To>(from_bf16(value));
  } else if constexpr (std::is_same_v<From, Half>) {
    return convert<To>(from_half(value));
  } else if constexpr (std::is_same_v<To, Bf16>) {
    return to_bf16(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, Half>) {
    return to_half(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return float_to_integer<To>(value);
  } else {
    return static_cast<To>(value);
  }
}

}  // namespace cadre::backend::portable
