// The CUDA convolution (im2col and its gradients) and pooling kernels' bodies run on the
// host against the CPU kernels, bit for bit where the CPU's order of operations is the same.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "core/backend/portable/conv_ops.h"
#include "core/kernels/nn.h"
#include "tests/core/portable_test_util.h"

namespace cadre {
namespace {

namespace p = backend::portable;
using testing::all_close;
using testing::host_ptr;
using testing::kCpu;
using testing::poisoned;
using testing::random_values;
using testing::run_on_host;
using testing::same_bytes;

// Naive row-major product of contiguous float64 matrices: c[m, n] = a[m, k] b[k, n], with a
// and/or b read transposed.
Tensor product(const Tensor& a, const Tensor& b, int64_t m, int64_t k, int64_t n, bool ta,
               bool tb) {
  Tensor c = Tensor::zeros({m, n}, DType::kFloat64, kCpu);
  const double* pa = host_ptr<double>(a);
  const double* pb = host_ptr<double>(b);
  double* pc = host_ptr<double>(c);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t l = 0; l < k; ++l)
        sum += (ta ? pa[l * m + i] : pa[i * k + l]) * (tb ? pb[j * k + l] : pb[l * n + j]);
      pc[i * n + j] = sum;
    }
  }
  return c;
}

TEST(CudaPortableTest, Im2ColConvolutionAndItsGradientsMatchTheCpu) {
  struct Case {
    std::array<int64_t, 4> x;
    std::array<int64_t, 4> w;
    kernels::Conv2DParams params;
  };
  kernels::Conv2DParams strided;
  strided.strides = {2, 1};
  strided.dilations = {1, 2};
  strided.pad_begin = {1, 0};
  strided.pad_end = {1, 1};
  kernels::Conv2DParams same;
  same.pad_begin = {1, 1};
  same.pad_end = {1, 1};
  for (const Case& c :
       {Case{{3, 7, 6, 3}, {3, 2, 3, 4}, strided}, Case{{2, 5, 5, 2}, {3, 3, 2, 3}, same},
        Case{{2, 4, 3, 5}, {1, 1, 5, 2}, kernels::Conv2DParams{}}}) {
    const kernels::Conv2DParams& params = c.params;
    int64_t oh = (c.x[1] + params.pad_begin[0] + params.pad_end[0] -
                  ((c.w[0] - 1) * params.dilations[0] + 1)) /
                     params.strides[0] +
                 1;
    int64_t ow = (c.x[2] + params.pad_begin[1] + params.pad_end[1] -
                  ((c.w[1] - 1) * params.dilations[1] + 1)) /
                     params.strides[1] +
                 1;
    Shape xs{c.x[0], c.x[1], c.x[2], c.x[3]}, ws{c.w[0], c.w[1], c.w[2], c.w[3]};
    Shape ys{c.x[0], oh, ow, c.w[3]};
    Tensor x = random_values(xs, DType::kFloat64, 80, false);
    Tensor w = random_values(ws, DType::kFloat64, 81, false);
    Tensor dy = random_values(ys, DType::kFloat64, 82, false);
    Tensor y_cpu = poisoned(ys, DType::kFloat64);
    kernels::conv2d.get(kCpu)(x, w, Tensor(), y_cpu, params);
    Tensor dx_cpu = poisoned(xs, DType::kFloat64), dw_cpu = poisoned(ws, DType::kFloat64);
    Tensor db_cpu = poisoned({c.w[3]}, DType::kFloat64);
    kernels::conv2d_grad.get(kCpu)(x, w, dy, Tensor(), dx_cpu, dw_cpu, db_cpu, params);

    p::ConvGeometry g = p::conv_geometry(xs, ws, ys, params);
    int64_t rows = g.n * g.oh * g.ow;
    EXPECT_EQ(p::conv_is_pointwise(g), c.w[0] == 1 && c.w[1] == 1);
    // Forward: y = im2col(x) · w, the im2col matrix built one image at a time (chunks).
    Tensor cols = poisoned({rows, g.taps()}, DType::kFloat64);
    int64_t per_image = g.oh * g.ow * g.taps();
    for (int64_t n0 = 0; n0 < g.n; ++n0) {
      run_on_host(per_image,
                  p::Im2ColElement<double>{host_ptr<double>(x),
                                           host_ptr<double>(cols) + n0 * per_image, g, n0});
    }
    Tensor w2 = w.reshape({g.taps(), g.o});
    EXPECT_TRUE(
        all_close(product(cols, w2, rows, g.taps(), g.o, false, false).reshape(ys.to_vector()),
                  y_cpu, 1e-12));
    // dw = cols^T · dy; dx = col2im(dy · w^T), gathered image by image.
    Tensor dy2 = dy.reshape({rows, g.o});
    EXPECT_TRUE(
        all_close(product(cols, dy2, g.taps(), rows, g.o, true, false).reshape(ws.to_vector()),
                  dw_cpu, 1e-12));
    Tensor dcols = product(dy2, w2, rows, g.o, g.taps(), false, true);
    Tensor dx = poisoned(xs, DType::kFloat64);
    int64_t image = g.h * g.w * g.c;
    for (int64_t n0 = 0; n0 < g.n; ++n0) {
      run_on_host(image, p::Col2ImElement<double>{host_ptr<double>(dcols) + n0 * per_image,
                                                  host_ptr<double>(dx), g, n0});
    }
    EXPECT_TRUE(all_close(dx, dx_cpu, 1e-12));
  }
}

TEST(CudaPortableTest, PoolingMatchesTheCpuBitForBit) {
  Shape xs{2, 7, 8, 3};
  Tensor x = random_values(xs, DType::kFloat32, 90);
  for (auto kind : {kernels::PoolKind::kMax, kernels::PoolKind::kAvg}) {
    kernels::Pool2DParams params;
    params.kind = kind;
    params.window = {3, 2};
    params.strides = {2, 2};
    params.pad_begin = {1, 0};
    params.pad_end = {1, 1};
    int64_t oh = (7 + 2 - 3) / 2 + 1, ow = (8 + 1 - 2) / 2 + 1;
    Shape ys{2, oh, ow, 3};
    Tensor y_cpu = poisoned(ys, DType::kFloat32), y_host = poisoned(ys, DType::kFloat32);
    Tensor arg_cpu = poisoned(ys, DType::kInt32), arg_host = poisoned(ys, DType::kInt32);
    bool max = kind == kernels::PoolKind::kMax;
    Tensor no_argmax;
    kernels::pool2d.get(kCpu)(x, y_cpu, max ? arg_cpu : no_argmax, params);
    p::PoolGeometry g = p::pool_geometry(xs, ys, params);
    run_on_host(y_host.numel(),
                p::PoolElement<float>{host_ptr<float>(x), host_ptr<float>(y_host),
                                      max ? host_ptr<int32_t>(arg_host) : nullptr, g});
    EXPECT_TRUE(same_bytes(y_host, y_cpu)) << "max " << max;
    if (max) {
      EXPECT_TRUE(same_bytes(arg_host, arg_cpu));
    }
    Tensor dy = random_values(ys, DType::kFloat32, 91, false);
    Tensor dx_cpu = poisoned(xs, DType::kFloat32), dx_host = poisoned(xs, DType::kFloat32);
    kernels::pool2d_grad.get(kCpu)(dy, max ? arg_cpu : Tensor(), dx_cpu, params);
    run_on_host(
        dx_host.numel(),
        p::PoolGradElement<float>{host_ptr<float>(dy), max ? host_ptr<int32_t>(arg_cpu) : nullptr,
                                  host_ptr<float>(dx_host), g});
    EXPECT_TRUE(same_bytes(dx_host, dx_cpu)) << "max " << max;
  }
}

// The GPU's convolution gradient from a max pooling over its ReLU (conv2d_grad_from_max_pool)
// builds the pooling's and the ReLU's gradients in one pass: the same bytes as the CPU's
// pooling gradient followed by its ReLU gradient, for windows that overlap (an element the
// maximum of two windows) and for windows that tile.
TEST(CudaPortableTest, MaxPoolingGradientThroughAReluMatchesTheCpuBitForBit) {
  Shape xs{2, 7, 8, 3};
  Tensor pre = random_values(xs, DType::kFloat32, 92);
  std::vector<float> values = pre.to_vector<float>();
  for (float& v : values) v = v > 0 ? v : 0.0f;  // a ReLU's output: many zeros, ties among them
  Tensor x = Tensor::from_vector(values, xs);
  struct Case {
    std::array<int64_t, 2> window, strides, pad_begin, pad_end;
  };
  for (const Case& c :
       {Case{{3, 2}, {2, 2}, {1, 0}, {1, 1}}, Case{{2, 2}, {2, 2}, {0, 0}, {0, 0}}}) {
    kernels::Pool2DParams params;
    params.window = c.window;
    params.strides = c.strides;
    params.pad_begin = c.pad_begin;
    params.pad_end = c.pad_end;
    int64_t oh = (7 + c.pad_begin[0] + c.pad_end[0] - c.window[0]) / c.strides[0] + 1;
    int64_t ow = (8 + c.pad_begin[1] + c.pad_end[1] - c.window[1]) / c.strides[1] + 1;
    Shape ys{2, oh, ow, 3};
    Tensor y = poisoned(ys, DType::kFloat32), arg = poisoned(ys, DType::kInt32);
    kernels::pool2d.get(kCpu)(x, y, arg, params);
    Tensor dy = random_values(ys, DType::kFloat32, 93, false);
    Tensor through_pool = poisoned(xs, DType::kFloat32), expected = poisoned(xs, DType::kFloat32);
    kernels::pool2d_grad.get(kCpu)(dy, arg, through_pool, params);
    kernels::activation_grad.get(kCpu)(kernels::Activation::kRelu, 0, x, through_pool, expected);
    Tensor dx = poisoned(xs, DType::kFloat32);
    p::PoolGradElement<float> element{host_ptr<float>(dy), host_ptr<int32_t>(arg),
                                      host_ptr<float>(dx), p::pool_geometry(xs, ys, params)};
    element.relu_pooled = host_ptr<float>(y);
    run_on_host(dx.numel(), element);
    EXPECT_TRUE(same_bytes(dx, expected)) << "window " << c.window[0] << "x" << c.window[1];
  }
}

}  // namespace
}  // namespace cadre
