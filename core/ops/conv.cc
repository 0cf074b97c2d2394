// Convolution and pooling over NHWC images, with TensorFlow's padding rules.
#include <algorithm>
#include <cctype>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/nn.h"
#include "core/base/strings.h"
#include "core/kernels/nn.h"
#include "core/ops/checks.h"
#include "core/ops/kernel_activation.h"
#include "core/tensor/views.h"

namespace cadre {

using autodiff::BackwardContext;

namespace {

std::array<int64_t, 2> image_dims(const Tensor& x) { return {x.shape()[1], x.shape()[2]}; }

// Output size and padding of one spatial dimension, as TensorFlow computes them.
void window_geometry(int64_t in, int64_t window, int64_t stride, int64_t dilation, Padding padding,
                     int64_t& out, int64_t& pad_begin, int64_t& pad_end) {
  int64_t effective = (window - 1) * dilation + 1;
  if (padding == Padding::kSame) {
    out = (in + stride - 1) / stride;
    int64_t total = std::max<int64_t>((out - 1) * stride + effective - in, 0);
    pad_begin = total / 2;
    pad_end = total - pad_begin;
  } else {
    out = in >= effective ? (in - effective) / stride + 1 : 0;
    pad_begin = pad_end = 0;
  }
}

// A pooling's input gradient, built: at once for average pooling and windows that overlap,
// and for max pooling's deferred form only when an op other than a convolution that reads
// the form as it is (kernels::conv2d_grad_from_max_pool) needs it.
Tensor pool_input_grad(const Tensor& dy, const Tensor& argmax, const kernels::Pool2DParams& params,
                       const Shape& input_shape) {
  Tensor dx = Tensor::empty(input_shape, dy.dtype(), dy.device());
  if (dx.numel() > 0) kernels::pool2d_grad.call(dx.device(), dy, argmax, dx, params);
  return dx;
}

class DeferredMaxPoolGrad final : public autodiff::DeferredGradient {
 public:
  explicit DeferredMaxPoolGrad(kernels::MaxPoolInputGrad grad) : grad_(std::move(grad)) {}
  const kernels::MaxPoolInputGrad& form() const { return grad_; }
  Tensor materialize() const override {
    return pool_input_grad(grad_.dy, grad_.argmax, grad_.params, grad_.input_shape);
  }
  Shape shape() const override { return grad_.input_shape; }
  DType dtype() const override { return grad_.dy.dtype(); }
  Device device() const override { return grad_.dy.device(); }

 private:
  kernels::MaxPoolInputGrad grad_;
};

// A convolution's output before it is computed (kernels::conv2d_max_pool_suits): a max
// pooling that takes it computes the pooling from the convolution's inputs, and the output
// is written only if something else reads it. The inputs are copies, so that what the
// output holds cannot change with a later in-place write to them (a variable's update).
class DeferredConv final : public BufferFill {
 public:
  DeferredConv(const Tensor& x, const Tensor& w, const Tensor& bias,
               const kernels::Conv2DParams& params, const Shape& shape)
      : x_(x.clone()),
        w_(w.clone()),
        bias_(bias.defined() ? bias.clone() : Tensor()),
        params_(params),
        shape_(shape) {}
  void fill(void* data) const override {
    Tensor y = Tensor::from_blob(data, shape_, x_.dtype(), x_.device(), {});
    kernels::conv2d.call(x_.device(), x_, w_, bias_, y, params_);
  }
  // The pooling of the output, if the backend computes it with the convolution.
  bool max_pool(const kernels::Pool2DParams& pool, Tensor& y, Tensor& argmax) const {
    return kernels::conv2d_max_pool.call(x_.device(), x_, w_, bias_, params_, shape_, pool, y,
                                         argmax);
  }
  // The pending convolution whose whole output `t` is, or null.
  static const DeferredConv* of(const Tensor& t) {
    const auto* conv = dynamic_cast<const DeferredConv*>(t.buffer()->pending_fill());
    if (conv == nullptr || t.offset() != 0 || t.shape() != conv->shape_ || !t.is_contiguous()) {
      return nullptr;
    }
    return conv;
  }

 private:
  Tensor x_, w_, bias_;
  kernels::Conv2DParams params_;
  Shape shape_;
};

void check_positive(const char* op, const char* what, std::array<int64_t, 2> v) {
  if (v[0] < 1 || v[1] < 1) {
    throw InvalidArgumentError(
        str_cat(op, ": ", what, " must be positive, got [", v[0], ", ", v[1], "]"));
  }
}

void check_conv2d(const char* op, const Tensor& x, const Tensor& filters, const Tensor& bias,
                  std::array<int64_t, 2> strides, std::array<int64_t, 2> dilations) {
  checks::defined(op, x);
  checks::defined(op, filters, "filters");
  checks::floating(op, x);
  checks::same_dtype(op, x, filters);
  checks::same_device(op, x, filters);
  checks::rank(op, x, 4, "input (NHWC)");
  checks::rank(op, filters, 4, "filters ([KH, KW, in, out])");
  check_positive(op, "strides", strides);
  check_positive(op, "dilations", dilations);
  if (filters.shape()[2] != x.shape()[3]) {
    throw InvalidArgumentError(str_cat(op, ": input of shape ", x.shape(), " has ", x.shape()[3],
                                       " channels but the filters of shape ", filters.shape(),
                                       " expect ", filters.shape()[2]));
  }
  const int64_t out_channels = filters.shape()[3];
  if (bias.defined()) {
    checks::same_dtype(op, x, bias);
    if (bias.shape() != Shape{out_channels}) {
      throw InvalidArgumentError(str_cat(op, ": bias of shape ", bias.shape(), " does not fit ",
                                         out_channels, " output channels"));
    }
  }
}

// The gradients of conv2d (x, filters, bias) from its output's, dense or deferred (a max
// pool's, which the kernel may take directly).
std::vector<Gradient> conv2d_backward(const BackwardContext& c, const Tensor& xc, const Tensor& wc,
                                      const Tensor& saved, const kernels::Conv2DParams& params,
                                      bool has_bias, const Shape& out_shape) {
  // An empty batch, or no filters, has zero gradients (and oneDNN refuses such shapes).
  const bool empty = out_shape.num_elements() == 0;
  auto buffer = [empty](const Shape& shape, const Tensor& like) {
    return empty ? Tensor::zeros(shape, like.dtype(), like.device())
                 : Tensor::empty(shape, like.dtype(), like.device());
  };
  Tensor dx = c.needs_grad(0) ? buffer(xc.shape(), xc) : Tensor();
  Tensor dw = c.needs_grad(1) ? buffer(wc.shape(), wc) : Tensor();
  Tensor db = has_bias && c.needs_grad(2) ? buffer(Shape{wc.shape()[3]}, wc) : Tensor();
  auto result = [&] {
    return std::vector<Gradient>{dx.defined() ? Gradient(dx) : Gradient(),
                                 dw.defined() ? Gradient(dw) : Gradient(),
                                 db.defined() ? Gradient(db) : Gradient()};
  };
  if (empty) return result();
  Tensor dz;
  if (const autodiff::DeferredGradient* deferred = c.deferred_grad()) {
    const auto* pooled = dynamic_cast<const DeferredMaxPoolGrad*>(deferred);
    const auto& slot = kernels::conv2d_grad_from_max_pool;
    if (pooled != nullptr && slot.has(xc.device()) &&
        slot.call(xc.device(), xc, wc, pooled->form(), dx, dw, db, params)) {
      return result();
    }
    dz = deferred->materialize();
  } else {
    dz = contiguous(c.grad());
  }
  kernels::conv2d_grad.call(dz.device(), xc, wc, dz, saved, dx, dw, db, params);
  return result();
}

}  // namespace

Padding parse_padding(const std::string& name) {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "VALID") return Padding::kValid;
  if (upper == "SAME") return Padding::kSame;
  throw InvalidArgumentError(str_cat("unknown padding '", name, "'; expected VALID or SAME"));
}

Tensor conv2d(const Tensor& x, const Tensor& filters, const Tensor& bias,
              std::array<int64_t, 2> strides, Padding padding, std::array<int64_t, 2> dilations,
              Activation activation) {
  const char* op = "conv2d";
  check_conv2d(op, x, filters, bias, strides, dilations);
  int64_t out_channels = filters.shape()[3];
  kernels::Conv2DParams params;
  params.strides = strides;
  params.dilations = dilations;
  std::array<int64_t, 2> out{};
  auto in = image_dims(x);
  for (int i = 0; i < 2; ++i) {
    window_geometry(in[i], filters.shape()[i], strides[i], dilations[i], padding, out[i],
                    params.pad_begin[i], params.pad_end[i]);
  }
  if (out[0] <= 0 || out[1] <= 0) {
    throw InvalidArgumentError(str_cat(op, ": filters of shape ", filters.shape(),
                                       " do not fit inside an input of shape ", x.shape(),
                                       " with VALID padding"));
  }
  bool fuse = activation == Activation::kRelu || activation == Activation::kNone;
  params.activation = fuse ? kernel_activation(activation) : kernels::Activation::kNone;
  Tensor xc = contiguous(x), wc = contiguous(filters);
  Tensor bc = bias.defined() ? contiguous(bias) : Tensor();
  const Shape out_shape{x.shape()[0], out[0], out[1], out_channels};
  Tensor y;
  const auto& deferrable = kernels::conv2d_max_pool_suits;
  if (fuse && out_shape.num_elements() > 0 && deferrable.has(x.device()) &&
      deferrable.call(x.device(), xc, wc, params)) {
    y = Tensor::empty_deferred(out_shape, x.dtype(), x.device(),
                               std::make_shared<DeferredConv>(xc, wc, bc, params, out_shape));
  } else {
    y = Tensor::empty(out_shape, x.dtype(), x.device());
    if (y.numel() > 0) kernels::conv2d.call(x.device(), xc, wc, bc, y, params);
  }
  if (autodiff::should_record({&x, &filters, &bias})) {
    // The output is kept only for the fused activation's gradient.
    Tensor saved = params.activation == kernels::Activation::kNone ? Tensor() : y;
    autodiff::record(
        op, {x, filters, bias}, {y},
        [xc, wc, saved, params, has_bias = bias.defined(),
         out_shape = y.shape()](const BackwardContext& c) {
          return conv2d_backward(c, xc, wc, saved, params, has_bias, out_shape);
        },
        /*takes_deferred=*/true);
  }
  return fuse ? y : activate(y, activation);
}

namespace {

Tensor pool2d(kernels::PoolKind kind, const char* op, const Tensor& x,
              std::array<int64_t, 2> window, std::array<int64_t, 2> strides, Padding padding) {
  checks::defined(op, x);
  checks::floating(op, x);
  checks::rank(op, x, 4, "input (NHWC)");
  check_positive(op, "window", window);
  check_positive(op, "strides", strides);
  kernels::Pool2DParams params;
  params.kind = kind;
  params.window = window;
  params.strides = strides;
  std::array<int64_t, 2> out{};
  auto in = image_dims(x);
  for (int i = 0; i < 2; ++i) {
    window_geometry(in[i], window[i], strides[i], 1, padding, out[i], params.pad_begin[i],
                    params.pad_end[i]);
  }
  if (out[0] <= 0 || out[1] <= 0) {
    throw InvalidArgumentError(str_cat(op, ": window [", window[0], ", ", window[1],
                                       "] does not fit inside an input of shape ", x.shape(),
                                       " with VALID padding"));
  }
  Shape out_shape{x.shape()[0], out[0], out[1], x.shape()[3]};
  Tensor y = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor argmax = kind == kernels::PoolKind::kMax
                      ? Tensor::empty(out_shape, DType::kInt32, x.device())
                      : Tensor();
  const DeferredConv* conv = kind == kernels::PoolKind::kMax ? DeferredConv::of(x) : nullptr;
  if (y.numel() > 0 && (conv == nullptr || !conv->max_pool(params, y, argmax))) {
    kernels::pool2d.call(x.device(), contiguous(x), y, argmax, params);
  }
  if (autodiff::should_record({&x})) {
    Tensor pooled = kind == kernels::PoolKind::kMax ? y : Tensor();
    autodiff::record(
        op, {x}, {y}, [argmax, pooled, params, in_shape = x.shape()](const BackwardContext& c) {
          kernels::MaxPoolInputGrad form{contiguous(c.grad()), argmax, pooled, params, in_shape};
          // Tiling windows: a convolution before the pooling can read this form as it is.
          if (form.tiles()) {
            std::shared_ptr<const autodiff::DeferredGradient> deferred =
                std::make_shared<DeferredMaxPoolGrad>(std::move(form));
            return std::vector<Gradient>{Gradient(std::move(deferred))};
          }
          return std::vector<Gradient>{pool_input_grad(form.dy, argmax, params, in_shape)};
        });
  }
  return y;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> window, std::array<int64_t, 2> strides,
                  Padding padding) {
  return pool2d(kernels::PoolKind::kMax, "max_pool2d", x, window, strides, padding);
}

Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> window, std::array<int64_t, 2> strides,
                  Padding padding) {
  return pool2d(kernels::PoolKind::kAvg, "avg_pool2d", x, window, strides, padding);
}

}  // namespace cadre
