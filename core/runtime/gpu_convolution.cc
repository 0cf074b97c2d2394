#include "cadre/runtime/gpu_convolution.h"

#include <atomic>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {
namespace {

std::atomic<GpuConvolution>& convolution_setting() {
  static std::atomic<GpuConvolution> value{GpuConvolution::kAutotune};
  return value;
}

}  // namespace

void set_gpu_convolution(GpuConvolution choice) {
  convolution_setting().store(choice, std::memory_order_relaxed);
}

GpuConvolution gpu_convolution() { return convolution_setting().load(std::memory_order_relaxed); }

GpuConvolution parse_gpu_convolution(std::string_view name) {
  if (name == "autotune") return GpuConvolution::kAutotune;
  if (name == "cudnn") return GpuConvolution::kCudnn;
  if (name == "im2col") return GpuConvolution::kIm2col;
  throw InvalidArgumentError(
      str_cat("unknown GPU convolution '", name, "'; expected autotune, cudnn or im2col"));
}

std::string_view gpu_convolution_name(GpuConvolution choice) {
  switch (choice) {
    case GpuConvolution::kAutotune:
      return "autotune";
    case GpuConvolution::kCudnn:
      return "cudnn";
    case GpuConvolution::kIm2col:
      return "im2col";
  }
  return "autotune";
}

}  // namespace cadre
