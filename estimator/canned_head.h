// The heads of the canned estimators (tf.estimator's binary, multi-class and regression
// heads): from the model's logits and the labels, the loss, predictions and eval metrics
// under TensorFlow's names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cadre/estimator/canned.h"
#include "cadre/estimator/model_fn.h"

namespace cadre::estimator_internal {

struct Head {
  enum class Kind { kBinary, kMultiClass, kRegression };
  Kind kind = Kind::kBinary;
  int64_t logits_dimension = 1;               // 1 (binary), n_classes or label_dimension
  std::string weight_column;                  // HeadOptions'
  std::vector<std::string> label_vocabulary;  // HeadOptions'
};

// InvalidArgumentError for n_classes < 2 or label_dimension < 1, or a label vocabulary
// that is not n_classes distinct labels (or given to a regressor).
Head classification_head(int64_t n_classes, HeadOptions options = {});
Head regression_head(int64_t label_dimension, HeadOptions options = {});

// The spec for `mode`: loss averaged over the batch (SUM_OVER_BATCH_SIZE, each example's
// weighted by the weight column's feature when there is one), trained by `optimizer`; in
// PREDICT, TensorFlow's signatures (serving_default and "classification" or "regression",
// and "predict"). InvalidArgumentError for labels or weights the head cannot take.
EstimatorSpec head_spec(const Head& head, const Tensor& logits, const Tensor& labels,
                        const io::Features& features, ModeKeys mode,
                        std::shared_ptr<nn::Optimizer> optimizer);

}  // namespace cadre::estimator_internal
