// Canned estimators, as tf.estimator's: linear, DNN and wide & deep (DNN + linear) models over
// feature columns, classifiers and regressors, with TensorFlow's defaults, heads, eval metrics
// and variable names, so that a model_dir a tf.estimator canned estimator trained restores
// here (its TensorFlow checkpoint read by name) and trains on.
//
//   auto estimator = dnn_linear_combined_classifier(
//       {.feature_columns = {education, education_x_occupation}},
//       {.hidden_units = {64, 32}, .feature_columns = {age, occupation_embedding}}, config);
//   estimator.train(input_fn, {.max_steps = 1000});
//
// The input_fn yields features transformed per example by
// feature_column::transform_fn(all columns) and batched by padded_batch(n, -1). Labels: a
// classifier's are class ids in [0, n_classes) (int or float, [batch] or [batch, 1]); a
// regressor's are floats [batch] or [batch, label_dimension].
//
// Variables: linear/linear_model/<column>/weights and linear/linear_model/bias_weights;
// dnn/hiddenlayer_<i>/kernel|bias (batch norm: dnn/hiddenlayer_<i>/batchnorm_<i>/...),
// dnn/logits/kernel|bias, embeddings at
// dnn/input_from_feature_columns/input_layer/<column>_embedding/embedding_weights.
//
// Predictions: classifiers "logits", "probabilities" and "class_ids" ([batch, 1] int64),
// binary ones also "logistic"; regressors "predictions". Exports carry TensorFlow's
// signatures: a classifier's serving_default and "classification" (scores: the
// probabilities; classes: the label vocabulary, or "0".."n-1"), a regressor's
// serving_default and "regression" (label_dimension 1), and "predict" (every prediction). Eval
// metrics under TensorFlow's names: "loss", "average_loss", "accuracy" (classifiers); binary ones
// also "precision", "recall", "auc", "auc_precision_recall" (200 thresholds, as TensorFlow),
// "label/mean", "prediction/mean" and "accuracy_baseline"; regressors "label/mean" and
// "prediction/mean".
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "cadre/estimator/estimator.h"
#include "cadre/feature_column/feature_column.h"
#include "cadre/nn/layers.h"
#include "cadre/nn/optimizer.h"

namespace cadre {

// The linear part: logits = linear_model(features, feature_columns).
struct LinearOptions {
  std::vector<feature_column::ColumnPtr> feature_columns{};
  // Null: TensorFlow's default, Ftrl at min(0.2, 1/sqrt(columns)) alone, or
  // min(0.005, 1/sqrt(columns)) in a wide & deep model.
  std::shared_ptr<nn::Optimizer> optimizer{};
};

// The DNN part: input_layer(features, feature_columns), then one dense layer per entry of
// hidden_units (activation, then dropout while training, then batch norm), then the logits.
struct DnnOptions {
  std::vector<int64_t> hidden_units{};
  std::vector<feature_column::DensePtr> feature_columns{};
  // Null: TensorFlow 2's default, Adagrad at 0.001 (alone as in a wide & deep model: TF 1's
  // DNNClassifier took 0.05).
  std::shared_ptr<nn::Optimizer> optimizer{};
  Activation activation = nn::relu;
  double dropout = 0;  // the probability that a unit is dropped while training
  bool batch_norm = false;
};

// What tf.estimator's canned estimators take beside n_classes or label_dimension.
struct HeadOptions {
  // The feature holding each example's weight (float, [batch] or [batch, 1]; keep it through
  // the transform with a numeric_column of the same key): the loss sums the weighted
  // per-example losses over the batch size, and every eval metric weighs examples by it, as
  // TensorFlow's weight_column. Empty: every example weighs 1.
  std::string weight_column{};
  // Classifiers whose labels are strings (CSV's or tf.train.Example's, a batch's padded by
  // padded_batch: trailing 0 and 0xFF bytes are padding): class i is label_vocabulary[i], and
  // the exported classification signatures answer with these labels. A label outside it fails
  // the step with an InvalidArgumentError naming it. Empty: labels are class ids, the
  // signatures' labels "0".."n-1".
  std::vector<std::string> label_vocabulary{};
};

// Classifiers: n_classes >= 2 (2: one logit, sigmoid cross-entropy; more: softmax). Regressors:
// label_dimension >= 1, mean squared error. Losses are averaged over the batch (TensorFlow 2's
// SUM_OVER_BATCH_SIZE). InvalidArgumentError for no feature columns, no hidden units, a bad
// n_classes, label_dimension or dropout; labels outside [0, n_classes) fail the step with one.
Estimator linear_classifier(LinearOptions linear, RunConfig config, int64_t n_classes = 2,
                            std::optional<WarmStartSettings> warm_start_from = std::nullopt,
                            HeadOptions head = {});
Estimator linear_regressor(LinearOptions linear, RunConfig config, int64_t label_dimension = 1,
                           std::optional<WarmStartSettings> warm_start_from = std::nullopt,
                           HeadOptions head = {});
Estimator dnn_classifier(DnnOptions dnn, RunConfig config, int64_t n_classes = 2,
                         std::optional<WarmStartSettings> warm_start_from = std::nullopt,
                         HeadOptions head = {});
Estimator dnn_regressor(DnnOptions dnn, RunConfig config, int64_t label_dimension = 1,
                        std::optional<WarmStartSettings> warm_start_from = std::nullopt,
                        HeadOptions head = {});
// Wide & deep: the logits are the sum of both parts', each part trained by its own optimizer
// (on parameter servers, a push each a step).
Estimator dnn_linear_combined_classifier(
    LinearOptions linear, DnnOptions dnn, RunConfig config, int64_t n_classes = 2,
    std::optional<WarmStartSettings> warm_start_from = std::nullopt, HeadOptions head = {});
Estimator dnn_linear_combined_regressor(
    LinearOptions linear, DnnOptions dnn, RunConfig config, int64_t label_dimension = 1,
    std::optional<WarmStartSettings> warm_start_from = std::nullopt, HeadOptions head = {});

}  // namespace cadre
