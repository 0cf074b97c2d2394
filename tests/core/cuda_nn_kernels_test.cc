// The matmul, softmax, cross-entropy, convolution, pooling, batch-norm and optimizer
// kernels on gpu:0 against cpu:0, forward and backward, on fresh random inputs and
// poisoned outputs. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdio>

#include "cadre/runtime/gpu_convolution.h"
#include "cadre/runtime/precision.h"
#include "core/base/strings.h"
#include "core/kernels/linalg.h"
#include "core/kernels/nn.h"
#include "core/kernels/optimizer.h"
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
using testing::random_both;
using testing::ulps;

// Restores float32 products when a test ends.
struct PrecisionScope {
  explicit PrecisionScope(Float32Precision p) { set_float32_precision(p); }
  ~PrecisionScope() { set_float32_precision(Float32Precision::kFloat32); }
};

TEST_F(CudaTest, MatmulEveryLayoutEpilogueAndPrecision) {
  const int64_t m = 129, k = 257, n = 65;
  struct Mode {
    Float32Precision precision;
    double tolerance;
  };
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    std::vector<Mode> modes = {
        {Float32Precision::kFloat32, dtype == DType::kFloat32 ? 2e-6 : 1e-14}};
    if (dtype == DType::kFloat32) {
      modes.push_back({Float32Precision::kTF32, 4e-3});
      modes.push_back({Float32Precision::kBFloat16, 3e-2});
    }
    for (const Mode& mode : modes) {
      PrecisionScope precision(mode.precision);
      for (int64_t batch : {0, 4}) {  // 0: plain matrices
        for (bool shared_b : {false, true}) {
          if (batch == 0 && shared_b) continue;
          for (bool ta : {false, true}) {
            for (bool tb : {false, true}) {
              Shape as = ta ? Shape{k, m} : Shape{m, k}, bs = tb ? Shape{n, k} : Shape{k, n};
              Shape cs{m, n};
              if (batch > 0) {
                as = Shape{batch, as[0], as[1]};
                if (!shared_b) bs = Shape{batch, bs[0], bs[1]};
                cs = Shape{batch, m, n};
              }
              Both a = random_both(as, dtype, 1), b = random_both(bs, dtype, 2);
              Both bias = random_both({n}, dtype, 3);
              // The product's error scales with the product, also after an activation
              // that squashes it into (-1, 1).
              Tensor product = Tensor::empty(cs, dtype, kHost);
              kernels::matmul.get(kHost)(
                  a.cpu, b.cpu, bias.cpu, product,
                  kernels::MatmulParams{ta, tb, false, Activation::kNone, 0});
              double product_scale = testing::max_abs(product);
              for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kSigmoid,
                                     Activation::kTanh, Activation::kElu}) {
                for (bool with_bias : {false, true}) {
                  kernels::MatmulParams params{ta, tb, false, act, 0.5};
                  Both out = poisoned_both(cs, dtype);
                  kernels::matmul.get(kGpu)(a.gpu, b.gpu, with_bias ? bias.gpu : Tensor(), out.gpu,
                                            params);
                  kernels::matmul.get(kHost)(a.cpu, b.cpu, with_bias ? bias.cpu : Tensor(), out.cpu,
                                             params);
                  EXPECT_TRUE(matches_scaled(out, mode.tolerance, product_scale))
                      << dtype << " " << float32_precision_name(mode.precision) << " batch "
                      << batch << " ta " << ta << " tb " << tb << " act " << static_cast<int>(act)
                      << " bias " << with_bias;
                }
              }
              // out += a·b keeps what out held.
              kernels::MatmulParams accumulate{ta, tb, true, Activation::kNone, 0};
              Both out = random_both(cs, dtype, 4);
              kernels::matmul.get(kGpu)(a.gpu, b.gpu, Tensor(), out.gpu, accumulate);
              kernels::matmul.get(kHost)(a.cpu, b.cpu, Tensor(), out.cpu, accumulate);
              EXPECT_TRUE(matches_scaled(out, mode.tolerance)) << "accumulate";
            }
          }
        }
      }
    }
  }
}

TEST_F(CudaTest, SoftmaxAndCrossEntropyForwardAndBackward) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (Shape shape : {Shape{300, 10}, Shape{7, 3000}, Shape{1, 1}}) {
      Both x = random_both(shape, dtype, 5), dy = random_both(shape, dtype, 6);
      for (bool log : {false, true}) {
        Both y = poisoned_both(shape, dtype), dx = poisoned_both(shape, dtype);
        kernels::softmax.get(kGpu)(x.gpu, y.gpu, log);
        kernels::softmax.get(kHost)(x.cpu, y.cpu, log);
        EXPECT_TRUE(matches(y, ulps(dtype, 16), ulps(dtype, 4))) << shape << " log " << log;
        kernels::softmax_grad.get(kGpu)(y.gpu, dy.gpu, dx.gpu, log);
        kernels::softmax_grad.get(kHost)(y.cpu, dy.cpu, dx.cpu, log);
        EXPECT_TRUE(matches(dx, ulps(dtype, 64), ulps(dtype, 64))) << shape << " log " << log;
      }
      for (DType label_dtype : {DType::kInt32, DType::kInt64}) {
        Both labels = testing::both(cast(
            floor(random_uniform({shape[0]}, 0, double(shape[1]), DType::kFloat64)), label_dtype));
        Both loss = poisoned_both({shape[0]}, dtype), probs = poisoned_both(shape, dtype);
        kernels::sparse_xent.get(kGpu)(x.gpu, labels.gpu, loss.gpu, probs.gpu);
        kernels::sparse_xent.get(kHost)(x.cpu, labels.cpu, loss.cpu, probs.cpu);
        EXPECT_TRUE(matches(loss, ulps(dtype, 16), ulps(dtype, 16))) << shape;
        EXPECT_TRUE(matches(probs, ulps(dtype, 16), ulps(dtype, 4))) << shape;
        Both dloss = random_both({shape[0]}, dtype, 7), dlogits = poisoned_both(shape, dtype);
        kernels::sparse_xent_grad.get(kGpu)(probs.gpu, labels.gpu, dloss.gpu, dlogits.gpu);
        kernels::sparse_xent_grad.get(kHost)(probs.cpu, labels.cpu, dloss.cpu, dlogits.cpu);
        EXPECT_TRUE(matches(dlogits, ulps(dtype, 16), ulps(dtype, 16))) << shape;
      }
    }
  }
}

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

TEST_F(CudaTest, PoolingForwardAndBackward) {
  Shape xs{4, 13, 14, 6};
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (auto kind : {kernels::PoolKind::kMax, kernels::PoolKind::kAvg}) {
      kernels::Pool2DParams params;
      params.kind = kind;
      params.window = {3, 3};
      params.strides = {2, 2};
      params.pad_begin = {1, 1};
      params.pad_end = {1, 1};
      Shape ys{4, 7, 7, 6};
      bool max = kind == kernels::PoolKind::kMax;
      Both x = random_both(xs, dtype, 12), dy = random_both(ys, dtype, 13);
      Both y = poisoned_both(ys, dtype), arg = poisoned_both(ys, DType::kInt32);
      Both no_arg;
      Both& argmax = max ? arg : no_arg;
      kernels::pool2d.get(kGpu)(x.gpu, y.gpu, argmax.gpu, params);
      kernels::pool2d.get(kHost)(x.cpu, y.cpu, argmax.cpu, params);
      // Windows are summed in the CPU's order: the same bits.
      EXPECT_TRUE(matches(y, 0)) << "max " << max;
      if (max) {
        EXPECT_TRUE(matches(arg, 0));
      }
      Both dx = poisoned_both(xs, dtype);
      kernels::pool2d_grad.get(kGpu)(dy.gpu, argmax.gpu, dx.gpu, params);
      kernels::pool2d_grad.get(kHost)(dy.cpu, argmax.cpu, dx.cpu, params);
      EXPECT_TRUE(matches(dx, 0)) << "max " << max;
    }
  }
}

TEST_F(CudaTest, BatchNormTrainingInferenceAndGradients) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (Shape shape : {Shape{2048, 24}, Shape{3, 70}, Shape{100000, 3}}) {
      int64_t c = shape[1];
      Both x = random_both(shape, dtype, 14), gamma = random_both({c}, dtype, 15);
      Both beta = random_both({c}, dtype, 16), dy = random_both(shape, dtype, 17);
      Both y = poisoned_both(shape, dtype), mean = poisoned_both({c}, dtype);
      Both var = poisoned_both({c}, dtype), inv = poisoned_both({c}, dtype);
      kernels::batch_norm_train.get(kGpu)(x.gpu, gamma.gpu, beta.gpu, 1e-3, y.gpu, mean.gpu,
                                          var.gpu, inv.gpu);
      kernels::batch_norm_train.get(kHost)(x.cpu, gamma.cpu, beta.cpu, 1e-3, y.cpu, mean.cpu,
                                           var.cpu, inv.cpu);
      double tolerance = ulps(dtype, 64);
      for (const Both* t : {&y, &mean, &var, &inv}) {
        EXPECT_TRUE(matches(*t, tolerance, tolerance)) << shape << " " << dtype;
      }
      Both z = poisoned_both(shape, dtype);
      kernels::batch_norm_infer.get(kGpu)(x.gpu, gamma.gpu, beta.gpu, mean.gpu, var.gpu, 1e-3,
                                          z.gpu);
      kernels::batch_norm_infer.get(kHost)(x.cpu, gamma.cpu, beta.cpu, mean.cpu, var.cpu, 1e-3,
                                           z.cpu);
      EXPECT_TRUE(matches(z, tolerance, tolerance)) << "inference " << shape;
      Both dx = poisoned_both(shape, dtype), dgamma = poisoned_both({c}, dtype);
      Both dbeta = poisoned_both({c}, dtype);
      kernels::batch_norm_grad.get(kGpu)(x.gpu, dy.gpu, gamma.gpu, mean.gpu, inv.gpu, dx.gpu,
                                         dgamma.gpu, dbeta.gpu);
      kernels::batch_norm_grad.get(kHost)(x.cpu, dy.cpu, gamma.cpu, mean.cpu, inv.cpu, dx.cpu,
                                          dgamma.cpu, dbeta.cpu);
      EXPECT_TRUE(matches_scaled(dx, tolerance)) << "dx " << shape;
      EXPECT_TRUE(matches_scaled(dgamma, tolerance)) << "dgamma " << shape;
      EXPECT_TRUE(matches_scaled(dbeta, tolerance)) << "dbeta " << shape;
    }
  }
}

// 130 variables (more than one launch's table), float32 and float64, three steps of each
// optimizer on both devices.
TEST_F(CudaTest, FusedOptimizersOverManyVariables) {
  struct Model {
    std::vector<Tensor> vars, grads, s0, s1, s2;
  };
  auto make = [](Device device) {
    Model m;
    for (int i = 0; i < 130; ++i) {
      DType dtype = i % 10 == 9 ? DType::kFloat64 : DType::kFloat32;
      int64_t n = i == 0 ? 1 : (i * 37) % 5000 + 1;
      auto value = [&](uint64_t seed) {
        return testing::random_values({n}, dtype, seed * 1000 + i, false).to(device);
      };
      m.vars.push_back(value(1));
      m.grads.push_back(value(2));
      m.s0.push_back(abs(value(3)));
      m.s1.push_back(abs(value(4)));
      m.s2.push_back(value(5) * 0.1);
    }
    return m;
  };
  auto compare = [](const Model& g, const Model& c, const char* what) {
    for (size_t i = 0; i < g.vars.size(); ++i) {
      double tolerance = ulps(g.vars[i].dtype(), 32);
      ASSERT_TRUE(matches(g.vars[i], c.vars[i], tolerance, tolerance)) << what << " variable " << i;
      ASSERT_TRUE(matches(g.s0[i], c.s0[i], tolerance, tolerance)) << what << " slot 0 of " << i;
      ASSERT_TRUE(matches(g.s1[i], c.s1[i], tolerance, tolerance)) << what << " slot 1 of " << i;
      ASSERT_TRUE(matches(g.s2[i], c.s2[i], tolerance, tolerance)) << what << " slot 2 of " << i;
    }
  };
  for (int which = 0; which < 6; ++which) {
    Model g = make(kGpu), c = make(kHost);
    for (int step = 0; step < 3; ++step) {
      for (Model* m : {&g, &c}) {
        Device d = m->vars[0].device();
        switch (which) {
          case 0:
            kernels::sgd_update.get(d)(m->vars, m->grads, m->s0, {0.1, 0, false});
            break;
          case 1:
            kernels::sgd_update.get(d)(m->vars, m->grads, m->s0, {0.1, 0.9, true});
            break;
          case 2:
            kernels::adam_update.get(d)(m->vars, m->grads, m->s0, m->s1, {0.01, 0.9, 0.999, 1e-7});
            break;
          case 3:
            kernels::adagrad_update.get(d)(m->vars, m->grads, m->s0, {0.1, 1e-7});
            break;
          case 4:
            kernels::rmsprop_update.get(d)(m->vars, m->grads, m->s0, m->s1, m->s2,
                                           {0.01, 0.9, 0.5, 1e-7, true});
            break;
          default:
            kernels::rmsprop_update.get(d)(m->vars, m->grads, m->s0, m->s1, m->s2,
                                           {0.01, 0.9, 0, 1e-7, false});
        }
      }
    }
    compare(g, c, std::to_string(which).c_str());
  }
}

}  // namespace
}  // namespace cadre
