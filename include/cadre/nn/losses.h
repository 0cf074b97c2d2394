// Losses with TensorFlow 2's reduction semantics: per-example values, optionally weighted,
// then reduced (by default summed and divided by the number of elements,
// SUM_OVER_BATCH_SIZE).
#pragma once

#include "cadre/tensor/tensor.h"

namespace cadre::nn {

enum class Reduction { kNone, kSum, kSumOverBatchSize };

struct LossOptions {
  Tensor weights;  // undefined, a scalar, or broadcastable to the per-example losses
  Reduction reduction = Reduction::kSumOverBatchSize;
};

// labels int32/int64 [N] (class ids), logits [N, C].
Tensor sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits,
                                    const LossOptions& options = {});
// onehot_labels and logits [N, C]; label_smoothing mixes the labels with the uniform
// distribution as TensorFlow does.
Tensor softmax_cross_entropy(const Tensor& onehot_labels, const Tensor& logits,
                             double label_smoothing = 0, const LossOptions& options = {});
// labels in [0, 1] and logits of one shape; mean over the last axis per example.
Tensor sigmoid_cross_entropy(const Tensor& labels, const Tensor& logits,
                             const LossOptions& options = {});
// Mean over the last axis of (labels - predictions)^2, per example.
Tensor mean_squared_error(const Tensor& labels, const Tensor& predictions,
                          const LossOptions& options = {});
Tensor mean_absolute_error(const Tensor& labels, const Tensor& predictions,
                           const LossOptions& options = {});
Tensor huber(const Tensor& labels, const Tensor& predictions, double delta = 1.0,
             const LossOptions& options = {});
// sum(x^2) / 2, the weight-decay term.
Tensor l2_loss(const Tensor& x);

// Applies `options` to per-example losses.
Tensor reduce_loss(const Tensor& losses, const LossOptions& options);

}  // namespace cadre::nn
