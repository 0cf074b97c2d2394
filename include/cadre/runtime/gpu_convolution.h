// How float32 convolutions on a GPU choose between cuDNN and Cadre's own im2col matrix with
// cuBLAS products, a process setting. Neither wins everywhere: on an H100, cuDNN's TF32
// kernels ran a CNN at batch 4096 1.5x faster than im2col, and im2col ran it at batch 256
// 1.1x (TF32) and 2.3x (float32) faster than cuDNN. The default times both on each
// problem's first call, as TensorFlow autotunes its cuDNN algorithms.
#pragma once

#include <string_view>

namespace cadre {

enum class GpuConvolution {
  kAutotune,  // both timed on a problem's first call on a device; the faster kept (default);
              // one that runs out of GPU memory there loses
  kCudnn,     // cuDNN wherever it takes the problem: the same path on every run
  kIm2col,    // im2col always
};

// Thread-safe; takes effect for convolutions started after the call.
void set_gpu_convolution(GpuConvolution choice);
GpuConvolution gpu_convolution();

// "autotune", "cudnn" or "im2col"; throws InvalidArgumentError listing them.
GpuConvolution parse_gpu_convolution(std::string_view name);
std::string_view gpu_convolution_name(GpuConvolution choice);

}  // namespace cadre
