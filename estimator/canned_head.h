// The heads of the canned estimators (tf.estimator's binary, multi-class and regression
// heads): from the model's logits and the labels, the loss, predictions and eval metrics
// under TensorFlow's names.
#pragma once

#include <cstdint>
#include <memory>

#include "cadre/estimator/model_fn.h"

namespace cadre::estimator_internal {

struct Head {
  enum class Kind { kBinary, kMultiClass, kRegression };
  Kind kind = Kind::kBinary;
  int64_t logits_dimension = 1;  // 1 (binary), n_classes or label_dimension
};

// InvalidArgumentError for n_classes < 2 or label_dimension < 1.
Head classification_head(int64_t n_classes);
Head regression_head(int64_t label_dimension);

// The spec for `mode`: loss averaged over the batch (SUM_OVER_BATCH_SIZE), trained by
// `optimizer`. InvalidArgumentError for labels a classifier cannot take.
EstimatorSpec head_spec(const Head& head, const Tensor& logits, const Tensor& labels, ModeKeys mode,
                        std::shared_ptr<nn::Optimizer> optimizer);

}  // namespace cadre::estimator_internal
