#include "cadre/nn/losses.h"

#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/nn.h"
#include "cadre/ops/reduce.h"
#include "core/ops/checks.h"

namespace cadre::nn {
namespace {

void check_same(const char* op, const Tensor& labels, const Tensor& predictions) {
  checks::defined(op, labels, "labels");
  checks::defined(op, predictions, "predictions");
  checks::floating(op, predictions, "predictions");
  checks::same_dtype(op, labels, predictions);
  checks::same_shape(op, labels, predictions);
}

// Mean over the last axis (per example), as Keras' elementwise losses do.
Tensor per_example_mean(const Tensor& x) { return x.rank() == 0 ? x : mean(x, {-1}); }

}  // namespace

Tensor reduce_loss(const Tensor& losses, const LossOptions& options) {
  Tensor weighted = losses;
  if (options.weights.defined()) {
    Tensor w = options.weights;
    if (w.dtype() != losses.dtype()) w = cast(w, losses.dtype());
    weighted = mul(losses, w);
  }
  switch (options.reduction) {
    case Reduction::kNone:
      return weighted;
    case Reduction::kSum:
      return sum(weighted);
    case Reduction::kSumOverBatchSize: {
      int64_t n = weighted.numel();
      return n == 0 ? sum(weighted) : div(sum(weighted), scalar_like(weighted, double(n)));
    }
  }
  return weighted;
}

Tensor sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits,
                                    const LossOptions& options) {
  return reduce_loss(sparse_softmax_cross_entropy_with_logits(labels, logits), options);
}

Tensor softmax_cross_entropy(const Tensor& onehot_labels, const Tensor& logits,
                             double label_smoothing, const LossOptions& options) {
  Tensor labels = onehot_labels;
  if (labels.defined() && logits.defined() && labels.dtype() != logits.dtype()) {
    labels = cast(labels, logits.dtype());
  }
  if (label_smoothing > 0) {
    double classes = double(logits.shape()[logits.rank() - 1]);
    labels = add(mul(labels, scalar_like(labels, 1 - label_smoothing)),
                 scalar_like(labels, label_smoothing / classes));
  }
  return reduce_loss(softmax_cross_entropy_with_logits(labels, logits), options);
}

Tensor sigmoid_cross_entropy(const Tensor& labels, const Tensor& logits,
                             const LossOptions& options) {
  return reduce_loss(per_example_mean(sigmoid_cross_entropy_with_logits(labels, logits)), options);
}

Tensor mean_squared_error(const Tensor& labels, const Tensor& predictions,
                          const LossOptions& options) {
  check_same("mean_squared_error", labels, predictions);
  return reduce_loss(per_example_mean(squared_difference(predictions, labels)), options);
}

Tensor mean_absolute_error(const Tensor& labels, const Tensor& predictions,
                           const LossOptions& options) {
  check_same("mean_absolute_error", labels, predictions);
  return reduce_loss(per_example_mean(abs(sub(predictions, labels))), options);
}

Tensor huber(const Tensor& labels, const Tensor& predictions, double delta,
             const LossOptions& options) {
  check_same("huber", labels, predictions);
  Tensor error = abs(sub(predictions, labels));
  Tensor quadratic = minimum(error, scalar_like(error, delta));
  Tensor linear_part = sub(error, quadratic);
  Tensor per = add(mul(square(quadratic), scalar_like(error, 0.5)),
                   mul(linear_part, scalar_like(error, delta)));
  return reduce_loss(per_example_mean(per), options);
}

Tensor l2_loss(const Tensor& x) { return mul(sum(square(x)), scalar_like(x, 0.5)); }

}  // namespace cadre::nn
