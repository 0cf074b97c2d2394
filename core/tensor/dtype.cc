#include "cadre/tensor/dtype.h"

#include <array>
#include <cmath>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {
namespace {

uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

constexpr std::array<DType, 8> kAllDTypes = {DType::kFloat32,  DType::kFloat64, DType::kInt32,
                                             DType::kInt64,    DType::kUInt8,   DType::kBool,
                                             DType::kBFloat16, DType::kFloat16};

}  // namespace

BFloat16::BFloat16(float value) {
  uint32_t bits = float_bits(value);
  if (std::isnan(value)) {
    this->bits = static_cast<uint16_t>((bits >> 16) | 0x40);  // keep it a quiet NaN
    return;
  }
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  this->bits = static_cast<uint16_t>((bits + rounding) >> 16);
}

BFloat16::operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }

Float16::Float16(float value) {
  uint32_t f = float_bits(value);
  uint32_t sign = (f >> 16) & 0x8000;
  uint32_t abs = f & 0x7fffffff;
  if (abs >= 0x7f800000) {  // inf or NaN
    bits = static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
    return;
  }
  if (abs >= 0x477ff000) {  // rounds past the largest half: infinity
    bits = static_cast<uint16_t>(sign | 0x7c00);
    return;
  }
  if (abs < 0x38800000) {  // subnormal half (or zero): scale and round in float arithmetic
    float magnitude = bits_float(abs);
    uint32_t sub = static_cast<uint32_t>(std::nearbyint(magnitude * 16777216.0f));  // 2^24
    bits = static_cast<uint16_t>(sign | sub);
    return;
  }
  uint32_t mantissa_odd = (abs >> 13) & 1;
  abs += 0xc8000fff + mantissa_odd;  // rebias exponent (-112 << 23) and round to nearest even
  bits = static_cast<uint16_t>(sign | (abs >> 13));
}

Float16::operator float() const {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {
    float magnitude = static_cast<float>(mantissa) / 16777216.0f;
    return bits_float(sign | float_bits(magnitude));
  }
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000 | (mantissa << 13));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat16:
      return "float16";
  }
  return "invalid";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
      return 1;
    case DType::kBool:
      return 1;
    case DType::kBFloat16:
      return 2;
    case DType::kFloat16:
      return 2;
  }
  return 0;
}

bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kBFloat16 ||
         dtype == DType::kFloat16;
}

bool is_integral(DType dtype) {
  return dtype == DType::kInt32 || dtype == DType::kInt64 || dtype == DType::kUInt8;
}

DType parse_dtype(std::string_view name) {
  for (DType dtype : kAllDTypes) {
    if (dtype_name(dtype) == name) return dtype;
  }
  std::array<std::string_view, kAllDTypes.size()> names;
  for (size_t i = 0; i < kAllDTypes.size(); ++i) names[i] = dtype_name(kAllDTypes[i]);
  throw InvalidArgumentError(str_cat("unknown dtype '", name, "'; expected one of: ", join(names)));
}

std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

void throw_unsupported_dtype(std::string_view what, DType dtype, std::string_view supported) {
  throw InvalidArgumentError(
      str_cat(what, ": unsupported dtype ", dtype_name(dtype), "; expected one of: ", supported));
}

}  // namespace cadre
