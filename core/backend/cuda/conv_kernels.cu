// CUDA 2-D convolution (NHWC input, [KH, KW, in, out] filters). A 1x1 convolution with unit
// stride and no padding is a plain product over the pixels. Float32 goes through cuDNN
// (cudnn_conv.h) where it takes the problem and gpu_convolution() picks it. The rest is
// matrix products over an im2col matrix (core/backend/portable/conv_ops.h): the product
// runs on cuBLASLt or cuBLAS tensor cores with the bias and ReLU fused, and the filter needs
// no reorder. The batch is processed in chunks of images so that the im2col workspace stays
// bounded.
#include <algorithm>

#include "core/backend/cuda/cudnn_conv.h"
#include "core/backend/cuda/for_each.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/portable/conv_ops.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cuda {
namespace {

using kernels::Conv2DParams;
using kernels::MatmulParams;
using portable::ConvGeometry;

// Bytes of im2col workspace per buffer; larger batches are processed in chunks.
constexpr int64_t kWorkspaceBytes = int64_t{128} << 20;

// A contiguous [rows, cols] view of t's memory starting `offset` elements into it.
Tensor matrix_view(const Tensor& t, int64_t offset, int64_t rows, int64_t cols) {
  Shape shape{rows, cols};
  return Tensor::view_of(t.buffer(), shape, shape.contiguous_strides(), t.offset() + offset,
                         t.dtype());
}

int64_t images_per_chunk(const ConvGeometry& g, size_t element_bytes) {
  int64_t per_image = g.oh * g.ow * g.taps() * static_cast<int64_t>(element_bytes);
  return std::clamp<int64_t>(kWorkspaceBytes / std::max<int64_t>(1, per_image), 1, g.n);
}

template <typename T>
void im2col(const Tensor& x, const ConvGeometry& g, int64_t n0, int64_t images, Tensor& cols) {
  for_each(x.device(), images * g.oh * g.ow * g.taps(),
           portable::Im2ColElement<T>{ptr<T>(x), mut<T>(cols), g, n0}, "conv2d (im2col)");
}

void im2col_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                   const ConvGeometry& g, const MatmulParams& mp) {
  Tensor filters = matrix_view(w, 0, g.taps(), g.o);
  int64_t chunk = images_per_chunk(g, dtype_size(x.dtype()));
  int64_t pixels = g.oh * g.ow;
  Tensor cols = Tensor::empty(Shape{chunk * pixels, g.taps()}, x.dtype(), x.device());
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    int64_t images = std::min(chunk, g.n - n0);
    visit_float_dtype(x.dtype(), "conv2d",
                      [&]<typename T>() { im2col<T>(x, g, n0, images, cols); });
    Tensor out = matrix_view(y, n0 * pixels * g.o, images * pixels, g.o);
    gemm(matrix_view(cols, 0, images * pixels, g.taps()), filters, bias, out, mp);
  }
}

void conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
            const Conv2DParams& p) {
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64) {
    throw_unsupported_dtype("conv2d", x.dtype(), "float32, float64");
  }
  DeviceGuard guard(y.device());
  ConvGeometry g = portable::conv_geometry(x.shape(), w.shape(), y.shape(), p);
  MatmulParams mp;
  mp.activation = p.activation;
  if (portable::conv_is_pointwise(g)) {
    Tensor out = matrix_view(y, 0, g.n * g.oh * g.ow, g.o);
    gemm(matrix_view(x, 0, g.n * g.h * g.w, g.c), matrix_view(w, 0, g.taps(), g.o), bias, out, mp);
    return;
  }
  auto own = [&] { im2col_conv2d(x, w, bias, y, g, mp); };
  if (!cudnn_conv2d(x, w, bias, y, p, own)) own();
}

// dx and dw (each when defined) through im2col and col2im.
void im2col_conv2d_grad(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                        const ConvGeometry& g) {
  int64_t pixels = g.oh * g.ow;
  Tensor filters = matrix_view(w, 0, g.taps(), g.o);
  MatmulParams transpose_b;  // dcols = dy · w^T
  transpose_b.transpose_b = true;
  MatmulParams transpose_a;  // dw = cols^T · dy
  transpose_a.transpose_a = true;
  int64_t chunk = images_per_chunk(g, dtype_size(x.dtype()));
  Tensor cols = dw.defined() ? Tensor::empty(Shape{chunk * pixels, g.taps()}, x.dtype(), x.device())
                             : Tensor();
  Tensor dcols = dx.defined()
                     ? Tensor::empty(Shape{chunk * pixels, g.taps()}, x.dtype(), x.device())
                     : Tensor();
  Tensor dw2 = dw.defined() ? matrix_view(dw, 0, g.taps(), g.o) : Tensor();
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    int64_t images = std::min(chunk, g.n - n0);
    Tensor dy_chunk = matrix_view(dy, n0 * pixels * g.o, images * pixels, g.o);
    visit_float_dtype(x.dtype(), "conv2d_grad", [&]<typename T>() {
      if (dw.defined()) {
        im2col<T>(x, g, n0, images, cols);
        MatmulParams mp = transpose_a;
        mp.accumulate = n0 > 0;  // dw sums over every chunk
        gemm(matrix_view(cols, 0, images * pixels, g.taps()), dy_chunk, Tensor(), dw2, mp);
      }
      if (dx.defined()) {
        Tensor dcols_chunk = matrix_view(dcols, 0, images * pixels, g.taps());
        gemm(dy_chunk, filters, Tensor(), dcols_chunk, transpose_b);
        for_each(dx.device(), images * g.h * g.w * g.c,
                 portable::Col2ImElement<T>{ptr<T>(dcols), mut<T>(dx), g, n0},
                 "conv2d_grad (col2im)");
      }
    });
  }
}

void conv2d_grad(const Tensor& x, const Tensor& w, const Tensor& dy_out, const Tensor& y,
                 Tensor& dx, Tensor& dw, Tensor& db, const Conv2DParams& p) {
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64) {
    throw_unsupported_dtype("conv2d", x.dtype(), "float32, float64");
  }
  DeviceGuard guard(dy_out.device());
  // The fused activation's gradient first.
  Tensor dy = dy_out;
  if (p.activation != kernels::Activation::kNone) {
    dy = Tensor::empty(dy_out.shape(), dy_out.dtype(), dy_out.device());
    kernels::activation_grad.get(dy.device())(p.activation, 0, y, dy_out, dy);
  }
  ConvGeometry g = portable::conv_geometry(x.shape(), w.shape(), dy.shape(), p);
  int64_t pixels = g.oh * g.ow;
  if (db.defined()) {
    reduce_3d(kernels::ReduceOp::kSum, dy.device(), dy.dtype(), dy.raw_data(), 1, g.n * pixels, g.o,
              db.raw_data());
  }
  if (!dx.defined() && !dw.defined()) return;
  if (portable::conv_is_pointwise(g)) {
    Tensor filters = matrix_view(w, 0, g.taps(), g.o);
    Tensor dy2 = matrix_view(dy, 0, g.n * pixels, g.o);
    if (dx.defined()) {
      MatmulParams transpose_b;  // dx = dy · w^T
      transpose_b.transpose_b = true;
      Tensor dx2 = matrix_view(dx, 0, g.n * pixels, g.c);
      gemm(dy2, filters, Tensor(), dx2, transpose_b);
    }
    if (dw.defined()) {
      MatmulParams transpose_a;  // dw = x^T · dy
      transpose_a.transpose_a = true;
      Tensor dw2 = matrix_view(dw, 0, g.taps(), g.o);
      gemm(matrix_view(x, 0, g.n * pixels, g.c), dy2, Tensor(), dw2, transpose_a);
    }
    return;
  }
  auto own = [&] { im2col_conv2d_grad(x, w, dy, dx, dw, g); };
  if (!cudnn_conv2d_grad(x, w, dy, dx, dw, p, own)) own();
}

// The gradients of a convolution whose output (after a fused ReLU or none) went only into a
// max pooling: the pooling's gradient and the ReLU's are built in one pass, into one
// buffer the size of the convolution's output, where building them apart took two.
bool conv2d_grad_from_max_pool(const Tensor& x, const Tensor& w,
                               const kernels::MaxPoolInputGrad& grad, Tensor& dx, Tensor& dw,
                               Tensor& db, const Conv2DParams& p) {
  bool relu = p.activation == kernels::Activation::kRelu;
  if (grad.params.kind != kernels::PoolKind::kMax ||
      (!relu && p.activation != kernels::Activation::kNone)) {
    return false;
  }
  DeviceGuard guard(grad.dy.device());
  Tensor dz = Tensor::empty(grad.input_shape, grad.dy.dtype(), grad.dy.device());
  portable::PoolGeometry g = portable::pool_geometry(dz.shape(), grad.dy.shape(), grad.params);
  visit_float_dtype(dz.dtype(), "conv2d_grad", [&]<typename T>() {
    portable::PoolGradElement<T> element{ptr<T>(grad.dy), ptr<int32_t>(grad.argmax), mut<T>(dz), g};
    if (relu) element.relu_pooled = ptr<T>(grad.pooled);
    for_each(dz.device(), dz.numel(), element, "conv2d_grad (from max pooling)");
  });
  Conv2DParams linear = p;
  linear.activation = kernels::Activation::kNone;
  conv2d_grad(x, w, dz, Tensor(), dx, dw, db, linear);
  return true;
}

// A convolution whose output only a max pooling reads is computed when the pooling is, into
// a buffer freed once pooled, instead of being kept for the backward pass, which reads the
// pooling's output and argmax (conv2d_grad_from_max_pool). The pending convolution keeps a
// copy of its input (ops' DeferredConv): taken where the output is at least four times the
// input, as the first layer's is (1 channel to 32: 354 MB kept for 13 MB at batch 4096).
bool conv2d_max_pool_suits(const Tensor& x, const Tensor& w, const Conv2DParams& p) {
  if ((x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64) || x.rank() != 4 ||
      w.rank() != 4) {
    return false;
  }
  return w.shape()[3] >= 4 * x.shape()[3] * p.strides[0] * p.strides[1];
}

bool conv2d_max_pool(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2DParams& p,
                     const Shape& conv_output, const kernels::Pool2DParams& pool, Tensor& y,
                     Tensor& argmax) {
  if (pool.kind != kernels::PoolKind::kMax) return false;
  DeviceGuard guard(x.device());
  Tensor z = Tensor::empty(conv_output, x.dtype(), x.device());
  conv2d(x, w, bias, z, p);
  kernels::pool2d.call(z.device(), z, y, argmax, pool);
  return true;  // z's memory goes back to the cache, for work queued after the pooling
}

}  // namespace

void register_conv_kernels() {
  kernels::conv2d.set(DeviceType::kGPU, &conv2d);
  kernels::conv2d_grad.set(DeviceType::kGPU, &conv2d_grad);
  kernels::conv2d_grad_from_max_pool.set(DeviceType::kGPU, &conv2d_grad_from_max_pool);
  kernels::conv2d_max_pool_suits.set(DeviceType::kGPU, &conv2d_max_pool_suits);
  kernels::conv2d_max_pool.set(DeviceType::kGPU, &conv2d_max_pool);
}

}  // namespace cadre::backend::cuda
