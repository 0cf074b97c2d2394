#include "cadre/ops/nn.h"

#include <algorithm>
#include <cctype>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"
#include "core/kernels/indexing.h"
#include "core/kernels/nn.h"
#include "core/kernels/random.h"
#include "core/ops/checks.h"
#include "core/ops/kernel_activation.h"
#include "core/tensor/views.h"

namespace cadre {

using autodiff::BackwardContext;

namespace {

// x with `axis` moved last, contiguous, as [rows, size]; and the permutation used.
std::pair<Tensor, std::vector<int>> to_rows(const Tensor& x, int axis) {
  int a = x.shape().normalize_axis(axis);
  std::vector<int> perm;
  for (int d = 0; d < x.rank(); ++d)
    if (d != a) perm.push_back(d);
  perm.push_back(a);
  NoGradScope no_grad;
  Tensor moved = a == x.rank() - 1 ? x : views::transpose(x, perm, "softmax");
  Tensor c = contiguous(moved);
  int64_t size = x.shape()[a];
  return {views::reshape(c, Shape{size == 0 ? 0 : c.numel() / size, size}), perm};
}

Tensor from_rows(const Tensor& rows, const Shape& shape, int axis, const std::vector<int>& perm) {
  int a = shape.normalize_axis(axis);
  if (a == shape.rank() - 1) return views::reshape(rows, shape);
  Shape moved;
  for (int p : perm) moved.push_back(shape[p]);
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
  NoGradScope no_grad;
  return contiguous(views::transpose(views::reshape(rows, moved), inverse, "softmax"));
}

Tensor softmax_impl(const Tensor& logits, int axis, bool log, const char* op) {
  checks::defined(op, logits);
  checks::floating(op, logits);
  if (logits.rank() == 0)
    throw InvalidArgumentError(str_cat(op, ": expected rank >= 1, got a scalar"));
  auto [rows, perm] = to_rows(logits, axis);
  Tensor out_rows = Tensor::empty(rows.shape(), rows.dtype(), rows.device());
  if (rows.numel() > 0) kernels::softmax.call(rows.device(), rows, out_rows, log);
  Tensor y = from_rows(out_rows, logits.shape(), axis, perm);
  if (autodiff::should_record({&logits})) {
    autodiff::record(
        op, {logits}, {y},
        [out_rows, perm = perm, axis, log, shape = logits.shape()](const BackwardContext& c) {
          auto [dy_rows, unused] = to_rows(c.grad(), axis);
          Tensor dx_rows = Tensor::empty(dy_rows.shape(), dy_rows.dtype(), dy_rows.device());
          if (dx_rows.numel() > 0) {
            kernels::softmax_grad.call(dx_rows.device(), out_rows, dy_rows, dx_rows, log);
          }
          return std::vector<Gradient>{from_rows(dx_rows, shape, axis, perm)};
        });
  }
  return y;
}

}  // namespace

Tensor softmax(const Tensor& logits, int axis) {
  return softmax_impl(logits, axis, false, "softmax");
}
Tensor log_softmax(const Tensor& logits, int axis) {
  return softmax_impl(logits, axis, true, "log_softmax");
}

Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const char* op = "sparse_softmax_cross_entropy_with_logits";
  checks::defined(op, labels, "labels");
  checks::defined(op, logits, "logits");
  checks::integer_index(op, labels, "labels");
  checks::floating(op, logits, "logits");
  checks::same_device(op, labels, logits);
  if (logits.rank() != 2 || labels.rank() != 1 || labels.shape()[0] != logits.shape()[0]) {
    throw InvalidArgumentError(str_cat(op, ": labels of shape ", labels.shape(),
                                       " do not fit logits of shape ", logits.shape(),
                                       " (expected labels [N] and logits [N, classes])"));
  }
  int64_t classes = logits.shape()[1];
  Tensor lab = contiguous(labels);
  int64_t bad = kernels::find_bad_index.call(lab.device(), lab, classes);
  if (bad >= 0) {
    int64_t value = slice(lab, 0, bad, bad + 1).item<int64_t>();
    throw InvalidArgumentError(str_cat(op, ": labels[", bad, "] = ", value,
                                       " is outside the valid range [0, ", classes, ")"));
  }
  Tensor x = contiguous(logits);
  int64_t n = logits.shape()[0];
  Tensor loss = Tensor::empty(Shape{n}, logits.dtype(), logits.device());
  Tensor probs = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  if (probs.numel() > 0) kernels::sparse_xent.call(x.device(), x, lab, loss, probs);
  if (autodiff::should_record({&logits})) {
    autodiff::record(op, {labels, logits}, {loss}, [probs, lab](const BackwardContext& c) {
      Tensor dlogits = Tensor::empty(probs.shape(), probs.dtype(), probs.device());
      if (dlogits.numel() > 0) {
        kernels::sparse_xent_grad.call(probs.device(), probs, lab, contiguous(c.grad()), dlogits);
      }
      return std::vector<Gradient>{Gradient(), dlogits};
    });
  }
  return loss;
}

Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const char* op = "softmax_cross_entropy_with_logits";
  checks::defined(op, labels, "labels");
  checks::defined(op, logits, "logits");
  checks::same_shape(op, labels, logits);
  checks::floating(op, logits, "logits");
  return neg(sum(mul(labels, log_softmax(logits)), {-1}));
}

Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const char* op = "sigmoid_cross_entropy_with_logits";
  checks::defined(op, labels, "labels");
  checks::defined(op, logits, "logits");
  checks::same_shape(op, labels, logits);
  checks::floating(op, logits, "logits");
  return add(sub(relu(logits), mul(logits, labels)), log1p(exp(neg(abs(logits)))));
}

namespace {

void check_batch_norm_params(const char* op, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta) {
  checks::defined(op, x);
  checks::floating(op, x);
  if (x.rank() < 1) throw InvalidArgumentError(str_cat(op, ": expected rank >= 1, got a scalar"));
  Shape channels{x.shape()[x.rank() - 1]};
  for (const Tensor* p : {&gamma, &beta}) {
    checks::defined(op, *p, p == &gamma ? "gamma" : "beta");
    checks::same_dtype(op, x, *p);
    if (p->shape() != channels) {
      throw InvalidArgumentError(str_cat(op, ": ", p == &gamma ? "gamma" : "beta", " of shape ",
                                         p->shape(), " does not fit input of shape ", x.shape(),
                                         " (expected ", channels, ")"));
    }
  }
}

}  // namespace

BatchNormResult batch_norm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    double epsilon) {
  const char* op = "batch_norm";
  check_batch_norm_params(op, x, gamma, beta);
  int64_t channels = x.shape()[x.rank() - 1];
  if (channels == 0) {
    throw InvalidArgumentError(str_cat(op, ": no channels in an input of shape ", x.shape()));
  }
  Tensor rows = views::reshape(contiguous(x), Shape{x.numel() / channels, channels});
  Tensor y = Tensor::empty(rows.shape(), x.dtype(), x.device());
  // A batch with no rows (a worker whose input has ended, stepping beside others) has no
  // statistics: zeros, and gradients of zeros for gamma and beta.
  const bool none = rows.shape()[0] == 0;
  auto statistic = [&] {
    return none ? Tensor::zeros(Shape{channels}, x.dtype(), x.device())
                : Tensor::empty(Shape{channels}, x.dtype(), x.device());
  };
  Tensor mean = statistic(), variance = statistic(), inv_std = statistic();
  Tensor g = contiguous(gamma), b = contiguous(beta);
  if (!none) {
    kernels::batch_norm_train.call(x.device(), rows, g, b, epsilon, y, mean, variance, inv_std);
  }
  Tensor out = views::reshape(y, x.shape());
  if (autodiff::should_record({&x, &gamma, &beta})) {
    autodiff::record(op, {x, gamma, beta}, {out},
                     [rows, g, mean, inv_std, shape = x.shape()](const BackwardContext& c) {
                       Tensor dx = Tensor::empty(rows.shape(), rows.dtype(), rows.device());
                       if (rows.shape()[0] == 0) {
                         Tensor zeros = Tensor::zeros(g.shape(), g.dtype(), g.device());
                         return std::vector<Gradient>{views::reshape(dx, shape), zeros, zeros};
                       }
                       Tensor dy = views::reshape(contiguous(c.grad()), rows.shape());
                       Tensor dgamma = Tensor::empty(g.shape(), g.dtype(), g.device());
                       Tensor dbeta = Tensor::empty(g.shape(), g.dtype(), g.device());
                       kernels::batch_norm_grad.call(dx.device(), rows, dy, g, mean, inv_std, dx,
                                                     dgamma, dbeta);
                       return std::vector<Gradient>{views::reshape(dx, shape), dgamma, dbeta};
                     });
  }
  return {out, mean, variance};
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon) {
  const char* op = "batch_norm";
  check_batch_norm_params(op, x, gamma, beta);
  checks::same_shape(op, gamma, mean);
  checks::same_shape(op, gamma, variance);
  if (!autodiff::should_record({&x, &gamma, &beta, &mean, &variance})) {
    int64_t channels = x.shape()[x.rank() - 1];
    Tensor rows =
        views::reshape(contiguous(x), Shape{channels == 0 ? 0 : x.numel() / channels, channels});
    Tensor y = Tensor::empty(rows.shape(), x.dtype(), x.device());
    if (y.numel() > 0) {
      kernels::batch_norm_infer.call(x.device(), rows, contiguous(gamma), contiguous(beta),
                                     contiguous(mean), contiguous(variance), epsilon, y);
    }
    return views::reshape(y, x.shape());
  }
  // Recorded: composed from differentiable ops so that every input gets its gradient.
  Tensor scale = mul(gamma, rsqrt(add(variance, scalar_like(variance, epsilon))));
  Tensor shift = sub(beta, mul(mean, scale));
  return add(mul(x, scale), shift);
}

Tensor dropout(const Tensor& x, double rate, Generator* generator) {
  checks::defined("dropout", x);
  checks::floating("dropout", x);
  if (!(rate >= 0 && rate < 1)) {
    throw InvalidArgumentError(str_cat("dropout: rate must be in [0, 1), got ", rate));
  }
  if (rate == 0) return x;
  Generator& gen = generator != nullptr ? *generator : current_generator();
  Tensor mask = Tensor::empty(x.shape(), x.dtype(), x.device());
  PhiloxKey key =
      gen.reserve(kernels::philox_blocks(kernels::RandomDistribution::kUniform, x.numel()));
  if (mask.numel() > 0) kernels::dropout_mask.call(x.device(), rate, key, mask);
  return mul(x, mask);
}

}  // namespace cadre
