// Element types of tensors and their mapping to C++ types.
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string_view>

#include "cadre/base/errors.h"

namespace cadre {

enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kInt32,
  kInt64,
  kUInt8,
  kBool,
  kBFloat16,  // storage type for the GPU path; CPU kernels only cast to and from it
  kFloat16,   // likewise
};

// 16-bit floating-point storage types. Conversions round to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value);
  explicit operator float() const;
};
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float value);
  explicit operator float() const;
};

std::string_view dtype_name(DType dtype);  // "float32", "int64", ...
size_t dtype_size(DType dtype);            // bytes per element
bool is_floating(DType dtype);             // float32/64, bfloat16, float16
bool is_integral(DType dtype);             // int32/64, uint8 (not bool)
// Parses a name as dtype_name prints it; throws InvalidArgumentError listing the valid names.
DType parse_dtype(std::string_view name);
std::ostream& operator<<(std::ostream& out, DType dtype);

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kUInt8;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::kBFloat16;
};
template <>
struct DTypeOf<Float16> {
  static constexpr DType value = DType::kFloat16;
};
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

// Calls fn.template operator()<T>() with T the C++ type of `dtype`, for the arithmetic
// types (float32, float64, int32, int64, uint8, bool). `what` names the operation in the
// error thrown for any other dtype.
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, std::string_view what, Fn&& fn);
// Same for float32 and float64 only.
template <typename Fn>
decltype(auto) visit_float_dtype(DType dtype, std::string_view what, Fn&& fn);

// Calls fn.template operator()<W>() with W the unsigned integer of dtype's size: kernels
// that only move elements (fill, copy, gather) need one instance per size, not per dtype.
template <typename Fn>
decltype(auto) visit_storage_word(DType dtype, Fn&& fn) {
  switch (dtype_size(dtype)) {
    case 1:
      return fn.template operator()<uint8_t>();
    case 2:
      return fn.template operator()<uint16_t>();
    case 4:
      return fn.template operator()<uint32_t>();
    default:
      return fn.template operator()<uint64_t>();
  }
}

[[noreturn]] void throw_unsupported_dtype(std::string_view what, DType dtype,
                                          std::string_view supported);

template <typename Fn>
decltype(auto) visit_dtype(DType dtype, std::string_view what, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      return fn.template operator()<float>();
    case DType::kFloat64:
      return fn.template operator()<double>();
    case DType::kInt32:
      return fn.template operator()<int32_t>();
    case DType::kInt64:
      return fn.template operator()<int64_t>();
    case DType::kUInt8:
      return fn.template operator()<uint8_t>();
    case DType::kBool:
      return fn.template operator()<bool>();
    default:
      break;
  }
  throw_unsupported_dtype(what, dtype, "float32, float64, int32, int64, uint8, bool");
}

template <typename Fn>
decltype(auto) visit_float_dtype(DType dtype, std::string_view what, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      return fn.template operator()<float>();
    case DType::kFloat64:
      return fn.template operator()<double>();
    default:
      break;
  }
  throw_unsupported_dtype(what, dtype, "float32, float64");
}

}  // namespace cadre
