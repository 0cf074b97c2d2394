#include "cadre/runtime/precision.h"

#include <atomic>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {
namespace {

std::atomic<Float32Precision>& precision_setting() {
  static std::atomic<Float32Precision> value{Float32Precision::kFloat32};
  return value;
}

}  // namespace

void set_float32_precision(Float32Precision precision) {
  precision_setting().store(precision, std::memory_order_relaxed);
}

Float32Precision float32_precision() { return precision_setting().load(std::memory_order_relaxed); }

Float32Precision parse_float32_precision(std::string_view name) {
  if (name == "float32") return Float32Precision::kFloat32;
  if (name == "tf32") return Float32Precision::kTF32;
  if (name == "bf16" || name == "bfloat16") return Float32Precision::kBFloat16;
  throw InvalidArgumentError(
      str_cat("unknown float32 precision '", name, "'; expected float32, tf32 or bf16"));
}

std::string_view float32_precision_name(Float32Precision precision) {
  switch (precision) {
    case Float32Precision::kFloat32:
      return "float32";
    case Float32Precision::kTF32:
      return "tf32";
    case Float32Precision::kBFloat16:
      return "bf16";
  }
  return "float32";
}

}  // namespace cadre
