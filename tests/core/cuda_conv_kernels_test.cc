// The convolution kernels on gpu:0 against cpu:0, forward and backward (cuDNN, im2col and
// autotuned; fused with a max pooling), on fresh random inputs and poisoned outputs.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdio>

#include "cadre/runtime/gpu_convolution.h"
#include "cadre/runtime/precision.h"
#include "core/base/strings.h"
#include "core/kernels/nn.h"
#include "core/tensor/device_backend.h"
#include "tests/core/cuda_test_util.h"

namespace cadre {
namespace {

using kernels::Activation;
using testing::Both;
using testing::CudaTest;
using testing::kGpu;
using testing::kHost;
using testing::matches;
using testing::matches_scaled;
using testing::poisoned;
using testing::poisoned_both;
using testing::PrecisionScope;
using testing::random_both;
using testing::ulps;

struct ConvCase {
  Shape x, w;
  std::array<int64_t, 2> strides, dilations, pad_begin, pad_end;
  Activation act;
  bool bias;
};

kernels::Conv2DParams conv_params(const ConvCase& c) {
  kernels::Conv2DParams params;
  params.strides = c.strides;
  params.dilations = c.dilations;
  params.pad_begin = c.pad_begin;
  params.pad_end = c.pad_end;
  params.activation = c.act;
  return params;
}

Shape conv_output(const ConvCase& c) {
  int64_t oh = (c.x[1] + c.pad_begin[0] + c.pad_end[0] - ((c.w[0] - 1) * c.dilations[0] + 1)) /
                   c.strides[0] +
               1;
  int64_t ow = (c.x[2] + c.pad_begin[1] + c.pad_end[1] - ((c.w[1] - 1) * c.dilations[1] + 1)) /
                   c.strides[1] +
               1;
  return Shape{c.x[0], oh, ow, c.w[3]};
}

// Sets how GPU convolutions run until the scope ends (then the default, autotuning).
struct GpuConvolutionScope {
  explicit GpuConvolutionScope(GpuConvolution c) { set_gpu_convolution(c); }
  ~GpuConvolutionScope() { set_gpu_convolution(GpuConvolution::kAutotune); }
};

// Float32 convolutions through cuDNN where it takes them (symmetric padding, or padding that
// gives the same windows), through im2col, and as autotuning picks, each against the CPU in
// float32 and in TF32; float64 through im2col.
TEST_F(CudaTest, ConvolutionForwardAndBackward) {
  const ConvCase cases[] = {
      {{4, 28, 28, 1}, {3, 3, 1, 32}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, Activation::kRelu, true},
      {{3, 9, 11, 5}, {5, 3, 5, 7}, {2, 1}, {1, 2}, {2, 2}, {2, 2}, Activation::kNone, true},
      {{2, 8, 8, 16}, {1, 1, 16, 8}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, Activation::kNone, false},
      // The CNN example's second convolution (SAME padding, symmetric).
      {{16, 14, 14, 32}, {3, 3, 32, 64}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, Activation::kRelu, true},
      // SAME with stride 2 pads one more row and column at the end: not cuDNN's padding.
      {{3, 8, 8, 3}, {3, 3, 3, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, Activation::kRelu, true},
      // Large enough that the im2col matrix is built in several chunks of images.
      {{64, 64, 64, 64}, {3, 3, 64, 16}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, Activation::kRelu, true},
      {{64, 64, 64, 64}, {3, 3, 64, 16}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, Activation::kNone, true},
  };
  struct Mode {
    DType dtype;
    Float32Precision precision;
    double tolerance;
  };
  const Mode modes[] = {{DType::kFloat32, Float32Precision::kFloat32, 2e-6},
                        {DType::kFloat32, Float32Precision::kTF32, 4e-3},
                        {DType::kFloat64, Float32Precision::kFloat32, 1e-13}};
  for (const Mode& mode : modes) {
    PrecisionScope precision(mode.precision);
    DType dtype = mode.dtype;
    double tolerance = mode.tolerance;
    for (const ConvCase& c : cases) {
      if (dtype == DType::kFloat64 && c.x[0] == 64) continue;  // the CPU's float64 loops are slow
      kernels::Conv2DParams params = conv_params(c);
      Shape ys = conv_output(c);
      Both x = random_both(c.x, dtype, 8), w = random_both(c.w, dtype, 9);
      Both bias = random_both({c.w[3]}, dtype, 10), dy = random_both(ys, dtype, 11);
      Tensor no_bias;
      const Tensor& bias_cpu = c.bias ? bias.cpu : no_bias;
      const Tensor& bias_gpu = c.bias ? bias.gpu : no_bias;
      // The CPU's results, once.
      Tensor y = poisoned(ys, dtype), dx = poisoned(c.x, dtype), dw = poisoned(c.w, dtype);
      Tensor db = poisoned(Shape{c.w[3]}, dtype);
      kernels::conv2d.get(kHost)(x.cpu, w.cpu, bias_cpu, y, params);
      kernels::conv2d_grad.get(kHost)(x.cpu, w.cpu, dy.cpu, y, dx, dw, db, params);
      // The gradients read the CPU's output on both devices: a rounding difference at an
      // output near zero would flip the ReLU's mask there, and the gradients with it.
      Tensor y_for_grad = y.to(kGpu);
      for (GpuConvolution way :
           {GpuConvolution::kCudnn, GpuConvolution::kIm2col, GpuConvolution::kAutotune}) {
        GpuConvolutionScope scope(way);
        std::string what = str_cat(gpu_convolution_name(way), " ", c.x, " ", c.w, " ", dtype, " ",
                                   float32_precision_name(mode.precision));
        Both out{y, poisoned(ys, dtype).to(kGpu)};
        kernels::conv2d.get(kGpu)(x.gpu, w.gpu, bias_gpu, out.gpu, params);
        EXPECT_TRUE(matches_scaled(out, tolerance)) << "y " << what;
        Both gx{dx, poisoned(c.x, dtype).to(kGpu)}, gw{dw, poisoned(c.w, dtype).to(kGpu)};
        Both gb{db, poisoned(Shape{c.w[3]}, dtype).to(kGpu)};
        kernels::conv2d_grad.get(kGpu)(x.gpu, w.gpu, dy.gpu, y_for_grad, gx.gpu, gw.gpu, gb.gpu,
                                       params);
        EXPECT_TRUE(matches_scaled(gx, tolerance)) << "dx " << what;
        EXPECT_TRUE(matches_scaled(gw, tolerance)) << "dw " << what;
        EXPECT_TRUE(matches_scaled(gb, tolerance)) << "db " << what;
        // Only some gradients asked for.
        Both dx_only{dx, poisoned(c.x, dtype).to(kGpu)}, dw_only{dw, poisoned(c.w, dtype).to(kGpu)};
        Tensor none_x, none_w, none_b;
        kernels::conv2d_grad.get(kGpu)(x.gpu, w.gpu, dy.gpu, y_for_grad, dx_only.gpu, none_w,
                                       none_b, params);
        EXPECT_TRUE(matches_scaled(dx_only, tolerance)) << "dx alone " << what;
        kernels::conv2d_grad.get(kGpu)(x.gpu, w.gpu, dy.gpu, y_for_grad, none_x, dw_only.gpu,
                                       none_b, params);
        EXPECT_TRUE(matches_scaled(dw_only, tolerance)) << "dw alone " << what;
      }
    }
  }
}

// Through cuDNN no im2col matrix is built: a batch of 64 images of 64x64x64 through a 3x3
// filter would need a 604 MB one, which im2col builds in 128 MiB chunks.
TEST_F(CudaTest, ConvolutionsThroughCudnnBuildNoColumnMatrix) {
  const ConvCase c{{64, 64, 64, 64}, {3, 3, 64, 16},    {1, 1}, {1, 1}, {1, 1},
                   {1, 1},           Activation::kRelu, true};
  // Allocations are counted when they are made, on the host: no wait for the device.
  auto peak_beyond_operands = [&c](GpuConvolution way) {
    GpuConvolutionScope scope(way);
    Tensor x = Tensor::zeros(c.x, DType::kFloat32, kGpu),
           w = Tensor::zeros(c.w, DType::kFloat32, kGpu);
    Tensor bias = Tensor::zeros(Shape{c.w[3]}, DType::kFloat32, kGpu);
    Shape ys = conv_output(c);
    Tensor y = Tensor::empty(ys, DType::kFloat32, kGpu),
           dy = Tensor::zeros(ys, DType::kFloat32, kGpu);
    Tensor dx = Tensor::empty(c.x, DType::kFloat32, kGpu),
           dw = Tensor::empty(c.w, DType::kFloat32, kGpu);
    Tensor db = Tensor::empty(Shape{c.w[3]}, DType::kFloat32, kGpu);
    kernels::Conv2DParams params = conv_params(c);
    kernels::conv2d.get(kGpu)(x, w, bias, y, params);  // plans and workspaces made once
    kernels::conv2d_grad.get(kGpu)(x, w, dy, y, dx, dw, db, params);
    reset_peak_memory(kGpu);
    int64_t before = memory_stats(kGpu).bytes_in_use;
    kernels::conv2d.get(kGpu)(x, w, bias, y, params);
    kernels::conv2d_grad.get(kGpu)(x, w, dy, y, dx, dw, db, params);
    return memory_stats(kGpu).peak_bytes_in_use - before;
  };
  int64_t cudnn = peak_beyond_operands(GpuConvolution::kCudnn);
  int64_t im2col = peak_beyond_operands(GpuConvolution::kIm2col);
  std::printf("peak beyond the operands: %lld bytes through cuDNN, %lld through im2col\n",
              static_cast<long long>(cudnn), static_cast<long long>(im2col));
  // An H100 gave 117 MB (cuDNN's workspaces and the ReLU's gradient) against 278 MB (two
  // column matrices of 132 MB each, and the ReLU's gradient).
  EXPECT_LT(cudnn, im2col / 2);
  EXPECT_GT(im2col, int64_t{200} << 20);
}

// A convolution with a ReLU whose output went only into a 2x2 max pooling, as in the CNN:
// its gradients from the pooling's form (the pooling's and the ReLU's gradients built in one
// pass on the GPU) against the CPU's pooling gradient followed by its convolution gradient.
// The second case's pooling leaves the last row and column out.
TEST_F(CudaTest, ConvolutionGradientFromAMaxPoolingOverItsRelu) {
  struct Case {
    Shape x, w;
  };
  for (const Case& c :
       {Case{{8, 28, 28, 1}, {3, 3, 1, 32}}, Case{{4, 13, 13, 32}, {3, 3, 32, 64}}}) {
    kernels::Conv2DParams params;
    params.activation = Activation::kRelu;
    Shape ys{c.x[0], c.x[1] - 2, c.x[2] - 2, c.w[3]};
    kernels::Pool2DParams pool;  // 2x2, stride 2, max
    Shape ps{ys[0], ys[1] / 2, ys[2] / 2, ys[3]};
    Both x = random_both(c.x, DType::kFloat32, 20), w = random_both(c.w, DType::kFloat32, 21);
    Both bias = random_both({c.w[3]}, DType::kFloat32, 22);
    Tensor y = poisoned(ys, DType::kFloat32), pooled = poisoned(ps, DType::kFloat32);
    Tensor argmax = poisoned(ps, DType::kInt32);
    kernels::conv2d.get(kHost)(x.cpu, w.cpu, bias.cpu, y, params);
    kernels::pool2d.get(kHost)(y, pooled, argmax, pool);
    Tensor dpooled = testing::random_values(ps, DType::kFloat32, 23, /*specials=*/false);
    Tensor dy = poisoned(ys, DType::kFloat32);
    kernels::pool2d_grad.get(kHost)(dpooled, argmax, dy, pool);
    Tensor dx = poisoned(c.x, DType::kFloat32), dw = poisoned(c.w, DType::kFloat32);
    Tensor db = poisoned(Shape{c.w[3]}, DType::kFloat32);
    kernels::conv2d_grad.get(kHost)(x.cpu, w.cpu, dy, y, dx, dw, db, params);
    kernels::MaxPoolInputGrad form{dpooled.to(kGpu), argmax.to(kGpu), pooled.to(kGpu), pool, ys};
    Both gx{dx, poisoned(c.x, DType::kFloat32).to(kGpu)};
    Both gw{dw, poisoned(c.w, DType::kFloat32).to(kGpu)};
    Both gb{db, poisoned(Shape{c.w[3]}, DType::kFloat32).to(kGpu)};
    ASSERT_TRUE(kernels::conv2d_grad_from_max_pool.get(kGpu)(x.gpu, w.gpu, form, gx.gpu, gw.gpu,
                                                             gb.gpu, params));
    EXPECT_TRUE(matches_scaled(gx, 2e-6)) << "dx " << c.x;
    EXPECT_TRUE(matches_scaled(gw, 2e-6)) << "dw " << c.x;
    EXPECT_TRUE(matches_scaled(gb, 2e-6)) << "db " << c.x;
  }
}

// A convolution pooled as it is computed, its output never kept: taken where the output is
// at least four times the input (the first layer, not the second), the same bits as the
// GPU's convolution then its pooling, and the CPU's within the products' tolerance; an
// average pooling is not taken.
TEST_F(CudaTest, AConvolutionIsPooledAsItIsComputed) {
  const auto& suits = kernels::conv2d_max_pool_suits.get(kGpu);
  const auto& conv_pool = kernels::conv2d_max_pool.get(kGpu);
  const Shape xs{8, 28, 28, 1}, ws{3, 3, 1, 32}, ys{8, 26, 26, 32}, ps{8, 13, 13, 32};
  kernels::Pool2DParams pool;  // 2x2, stride 2, max
  for (Activation activation : {Activation::kRelu, Activation::kNone}) {
    kernels::Conv2DParams params;
    params.activation = activation;
    Both x = random_both(xs, DType::kFloat32, 30), w = random_both(ws, DType::kFloat32, 31);
    Both bias = random_both({32}, DType::kFloat32, 32);
    EXPECT_TRUE(suits(x.gpu, w.gpu, params));
    Tensor second_x = Tensor::zeros({8, 13, 13, 32}, DType::kFloat32, kGpu);
    EXPECT_FALSE(suits(second_x, Tensor::zeros({3, 3, 32, 64}, DType::kFloat32, kGpu), params));
    Both pooled = poisoned_both(ps, DType::kFloat32), argmax = poisoned_both(ps, DType::kInt32);
    ASSERT_TRUE(conv_pool(x.gpu, w.gpu, bias.gpu, params, ys, pool, pooled.gpu, argmax.gpu));
    Tensor y = poisoned(ys, DType::kFloat32).to(kGpu);
    kernels::conv2d.get(kGpu)(x.gpu, w.gpu, bias.gpu, y, params);
    Tensor apart = poisoned(ps, DType::kFloat32).to(kGpu);
    Tensor apart_argmax = poisoned(ps, DType::kInt32).to(kGpu);
    kernels::pool2d.get(kGpu)(y, apart, apart_argmax, pool);
    EXPECT_EQ(pooled.gpu.to(kHost).to_vector<float>(), apart.to(kHost).to_vector<float>());
    EXPECT_EQ(argmax.gpu.to(kHost).to_vector<int32_t>(),
              apart_argmax.to(kHost).to_vector<int32_t>());
    Tensor host_y = poisoned(ys, DType::kFloat32);
    kernels::conv2d.get(kHost)(x.cpu, w.cpu, bias.cpu, host_y, params);
    kernels::pool2d.get(kHost)(host_y, pooled.cpu, argmax.cpu, pool);
    EXPECT_TRUE(matches_scaled(pooled, 2e-6)) << static_cast<int>(activation);
    kernels::Pool2DParams average = pool;
    average.kind = kernels::PoolKind::kAvg;
    Tensor none;
    EXPECT_FALSE(conv_pool(x.gpu, w.gpu, bias.gpu, params, ys, average, pooled.gpu, none));
  }
}

}  // namespace
}  // namespace cadre
