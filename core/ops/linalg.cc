#include "cadre/ops/linalg.h"

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"
#include "core/kernels/linalg.h"
#include "core/ops/checks.h"
#include "core/ops/kernel_activation.h"
#include "core/tensor/views.h"

namespace cadre {

using autodiff::BackwardContext;
using kernels::MatmulParams;

namespace {

// A contiguous operand and whether the kernel should read it transposed: a transposed
// view of a contiguous matrix is passed as that matrix with the flag flipped. The CPU
// kernels also read a matrix whose rows are further apart than their length (a slice of
// columns, as a kernel gradient's rows read), without a copy.
std::pair<Tensor, bool> operand(const Tensor& x, bool transposed) {
  if (x.is_contiguous()) return {x, transposed};
  if (x.device().is_cpu() && views::is_row_strided_matrix(x)) return {x, transposed};
  if (views::is_transposed_matrix(x)) return {views::transpose(x, {1, 0}, "matmul"), !transposed};
  NoGradScope no_grad;
  return {contiguous(x), transposed};
}

// out = act(a·b + bias) for contiguous 2-D or 3-D operands, into `into` when it is
// defined (contiguous, of the product's shape and dtype); not recorded.
Tensor product(const Tensor& a_in, const Tensor& b_in, bool ta, bool tb,
               const Tensor& bias = Tensor(), kernels::Activation act = kernels::Activation::kNone,
               double alpha = 0, Tensor into = Tensor()) {
  auto [a, fa] = operand(a_in, ta);
  auto [b, fb] = operand(b_in, tb);
  int ra = a.rank(), rb = b.rank();
  int64_t m = fa ? a.shape()[ra - 1] : a.shape()[ra - 2];
  int64_t n = fb ? b.shape()[rb - 2] : b.shape()[rb - 1];
  Shape out_shape = ra == 3 ? Shape{a.shape()[0], m, n} : Shape{m, n};
  Tensor out = into.defined() ? into : Tensor::empty(out_shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if ((fa ? a.shape()[ra - 2] : a.shape()[ra - 1]) == 0) {
    // Sums over nothing (the kernel gradient of a batch with no rows): oneDNN fails on an
    // empty inner dimension, so the kernel multiplies zeros over one instead (the bias and
    // the activation still apply).
    a = Tensor::zeros(ra == 3 ? Shape{a.shape()[0], m, 1} : Shape{m, 1}, a.dtype(), a.device());
    b = Tensor::zeros(rb == 3 ? Shape{b.shape()[0], 1, n} : Shape{1, n}, b.dtype(), b.device());
    fa = fb = false;
  }
  MatmulParams params;
  params.transpose_a = fa;
  params.transpose_b = fb;
  params.activation = act;
  params.alpha = alpha;
  kernels::matmul.call(a.device(), a, b, bias, out, params);
  return out;
}

// A dense layer's kernel gradient x^T·dz, left for its receiver to build whole or by rows
// (the kernel's input features: x's columns).
class KernelGradient final : public autodiff::DeferredGradient {
 public:
  KernelGradient(Tensor x, Tensor dz) : x_(std::move(x)), dz_(std::move(dz)) {}
  Tensor materialize() const override { return product(x_, dz_, true, false); }
  void materialize_into(Tensor& out) const override {
    NoGradScope no_grad;
    product(x_, dz_, true, false, Tensor(), kernels::Activation::kNone, 0, out);
  }
  Tensor rows(int64_t begin, int64_t end) const override {
    NoGradScope no_grad;
    return product(x_.slice(1, begin, end), dz_, true, false);
  }
  Shape shape() const override { return Shape{x_.shape()[1], dz_.shape()[1]}; }
  DType dtype() const override { return x_.dtype(); }
  Device device() const override { return x_.device(); }

 private:
  Tensor x_, dz_;
};

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  checks::defined(op, a, "first operand");
  checks::defined(op, b, "second operand");
  checks::floating(op, a, "first operand");
  checks::same_dtype(op, a, b);
  checks::same_device(op, a, b);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  check_operands("matmul", a, b);
  if (a.rank() < 2 || b.rank() < 2) {
    throw InvalidArgumentError(str_cat("matmul: operands must have rank >= 2, got shapes ",
                                       a.shape(), " and ", b.shape()));
  }
  int ra = a.rank(), rb = b.rank();
  int64_t k_a = transpose_a ? a.shape()[ra - 2] : a.shape()[ra - 1];
  int64_t k_b = transpose_b ? b.shape()[rb - 1] : b.shape()[rb - 2];
  if (k_a != k_b) {
    throw InvalidArgumentError(str_cat("matmul: incompatible shapes ", a.shape(),
                                       transpose_a ? " (transposed)" : "", " and ", b.shape(),
                                       transpose_b ? " (transposed)" : "", ": inner dimensions ",
                                       k_a, " and ", k_b, " differ"));
  }
  int64_t m = transpose_a ? a.shape()[ra - 1] : a.shape()[ra - 2];
  int64_t n = transpose_b ? b.shape()[rb - 2] : b.shape()[rb - 1];

  Tensor out;
  if (ra == 2 && rb == 2) {
    out = product(a, b, transpose_a, transpose_b);
  } else {
    // Batch dimensions broadcast; operands are materialised as [B, rows, cols].
    std::vector<int64_t> batch_a(a.shape().begin(), a.shape().end() - 2);
    std::vector<int64_t> batch_b(b.shape().begin(), b.shape().end() - 2);
    Shape batch = broadcast_shapes(Shape(batch_a), Shape(batch_b), "matmul");
    int64_t count = batch.num_elements();
    auto as_batch = [&](const Tensor& x) {
      Shape full = batch;
      full.push_back(x.shape()[x.rank() - 2]);
      full.push_back(x.shape()[x.rank() - 1]);
      NoGradScope no_grad;
      Tensor expanded = contiguous(views::broadcast(x, full, "matmul"));
      return views::reshape(expanded, Shape{count, full[full.rank() - 2], full[full.rank() - 1]});
    };
    Tensor flat = product(as_batch(a), as_batch(b), transpose_a, transpose_b);
    Shape out_shape = batch;
    out_shape.push_back(m);
    out_shape.push_back(n);
    out = views::reshape(flat, out_shape);
  }

  if (autodiff::should_record({&a, &b})) {
    autodiff::record(
        "matmul", {a, b}, {out}, [a, b, transpose_a, transpose_b](const BackwardContext& c) {
          const Tensor& g = c.grad();
          Gradient ga, gb;
          if (c.needs_grad(0)) {
            Tensor d =
                !transpose_a ? matmul(g, b, false, !transpose_b) : matmul(b, g, transpose_b, true);
            ga = reduce_to_shape(d, a.shape());
          }
          if (c.needs_grad(1)) {
            Tensor d =
                !transpose_b ? matmul(a, g, !transpose_a, false) : matmul(g, a, true, transpose_a);
            gb = reduce_to_shape(d, b.shape());
          }
          return std::vector<Gradient>{ga, gb};
        });
  }
  return out;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias, Activation activation,
              double alpha) {
  check_operands("linear", x, w);
  if (x.rank() < 1 || w.rank() != 2 || x.shape()[x.rank() - 1] != w.shape()[0]) {
    throw InvalidArgumentError(str_cat(
        "linear: input of shape ", x.shape(), " does not fit a kernel of shape ", w.shape(),
        " (expected input [..., ", w.rank() == 2 ? w.shape()[0] : -1, "] and kernel [in, out])"));
  }
  int64_t units = w.shape()[1];
  if (bias.defined()) {
    checks::same_dtype("linear", x, bias);
    checks::same_device("linear", x, bias);
    if (bias.shape() != Shape{units}) {
      throw InvalidArgumentError(str_cat("linear: bias of shape ", bias.shape(),
                                         " does not fit a kernel of shape ", w.shape(),
                                         " (expected [", units, "])"));
    }
  }
  // Activations whose gradient needs the input are applied as a separate op.
  bool fuse = kernels::activation_uses_output(kernel_activation(activation));
  kernels::Activation fused = fuse ? kernel_activation(activation) : kernels::Activation::kNone;

  Tensor x2;
  {
    NoGradScope no_grad;
    x2 = x.rank() == 2 ? x : reshape(x, {-1, x.shape()[x.rank() - 1]});
  }
  Tensor bias_c;
  if (bias.defined()) {
    NoGradScope no_grad;
    bias_c = contiguous(bias);
  }
  Tensor y2 = product(x2, w, false, false, bias_c, fused, alpha);
  std::vector<int64_t> out_dims = x.shape().to_vector();
  out_dims.back() = units;
  Tensor y = x.rank() == 2 ? y2 : views::reshape(y2, Shape(out_dims));

  if (autodiff::should_record({&x, &w, &bias})) {
    autodiff::record(
        "linear", {x, w, bias}, {y},
        [x2, w, y2, has_bias = bias.defined(), fused, alpha,
         in_shape = x.shape()](const BackwardContext& c) {
          Tensor dy = c.grad().rank() == 2 ? contiguous(c.grad())
                                           : contiguous(reshape(c.grad(), y2.shape().to_vector()));
          Tensor dz = dy;
          Tensor db;
          if (fused != kernels::Activation::kNone || (has_bias && c.needs_grad(2))) {
            dz = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
            if (has_bias && c.needs_grad(2))
              db = Tensor::empty(Shape{dy.shape()[1]}, dy.dtype(), dy.device());
            Tensor grad_bias = db;
            kernels::bias_activation_grad.call(dy.device(), fused, alpha, y2, dy, dz, grad_bias);
          }
          Gradient dx, dw;
          if (c.needs_grad(0)) dx = reshape(product(dz, w, false, true), in_shape.to_vector());
          if (c.needs_grad(1)) {
            dw = c.may_leave_unbuilt(1) ? Gradient(std::make_shared<KernelGradient>(x2, dz))
                                        : Gradient(product(x2, dz, true, false));
          }
          return std::vector<Gradient>{dx, dw, db.defined() ? Gradient(db) : Gradient()};
        });
  }
  return fuse ? y : activate(y, activation, alpha);
}

}  // namespace cadre
