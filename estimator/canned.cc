// The canned estimators: a model_fn of a linear part, a DNN part or both over feature columns,
// under TensorFlow's variable names, with TensorFlow's default optimizers.
#include "cadre/estimator/canned.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "cadre/base/errors.h"
#include "cadre/nn/optimizers.h"
#include "cadre/nn/variable_store.h"
#include "cadre/ops/math.h"
#include "core/base/strings.h"
#include "estimator/canned_head.h"
#include "estimator/split_optimizer.h"

namespace cadre {
namespace {

using estimator_internal::Head;

struct CannedModel {
  std::optional<LinearOptions> linear;
  std::optional<DnnOptions> dnn;
  Head head;
  std::shared_ptr<nn::Optimizer> optimizer;
};

Tensor dnn_logits(const DnnOptions& dnn, const io::Features& features, int64_t units,
                  bool training) {
  nn::NameScope scope("dnn");
  Tensor net;
  {
    nn::NameScope columns("input_from_feature_columns");
    nn::NameScope input("input_layer");
    net = feature_column::input_layer(features, dnn.feature_columns);
  }
  for (size_t i = 0; i < dnn.hidden_units.size(); ++i) {
    const std::string layer = str_cat("hiddenlayer_", i);
    net = nn::dense(layer, net, dnn.hidden_units[i], dnn.activation);
    if (dnn.dropout > 0) net = nn::dropout(net, dnn.dropout, training);
    if (dnn.batch_norm) {
      // TensorFlow's DNN normalises with tf.contrib's momentum, 0.999.
      nn::NameScope in_layer(layer);
      net = nn::batch_norm(str_cat("batchnorm_", i), net, training, {.momentum = 0.999});
    }
  }
  return nn::dense("logits", net, units);
}

ModelFn canned_model_fn(CannedModel model) {
  return [model = std::move(model)](const io::Features& features, const Tensor& labels,
                                    ModeKeys mode, const Params&) {
    const int64_t units = model.head.logits_dimension;
    Tensor logits;
    if (model.dnn) logits = dnn_logits(*model.dnn, features, units, mode == ModeKeys::kTrain);
    if (model.linear) {
      nn::NameScope scope("linear");
      Tensor linear = feature_column::linear_model(features, model.linear->feature_columns, units);
      logits = logits.defined() ? add(logits, linear) : linear;
    }
    return estimator_internal::head_spec(model.head, logits, labels, features, mode,
                                         model.optimizer);
  };
}

void check_linear(const LinearOptions& linear) {
  if (linear.feature_columns.empty()) {
    throw InvalidArgumentError("a canned estimator's linear part needs feature_columns");
  }
}

void check_dnn(const DnnOptions& dnn) {
  if (dnn.feature_columns.empty() || dnn.hidden_units.empty()) {
    throw InvalidArgumentError(
        "a canned estimator's DNN part needs feature_columns and "
        "hidden_units");
  }
  for (int64_t units : dnn.hidden_units) {
    if (units < 1) throw InvalidArgumentError(str_cat("hidden_units must be >= 1, got ", units));
  }
  if (!(dnn.dropout >= 0 && dnn.dropout < 1)) {
    throw InvalidArgumentError(str_cat("dropout must be in [0, 1), got ", dnn.dropout));
  }
}

// TensorFlow's defaults: Ftrl at min(rate, 1/sqrt(columns)) for the linear part (0.2 alone,
// 0.005 beside a DNN), Adagrad at 0.001 for the DNN part. TensorFlow 2's DNNClassifier takes
// Adagrad's own default rate, 0.001 (tf.estimator's canned/dnn.py, the v2 model_fn); the 0.05
// of its documentation is TensorFlow 1's.
std::shared_ptr<nn::Optimizer> linear_optimizer(const LinearOptions& linear, double rate) {
  if (linear.optimizer) return linear.optimizer;
  double columns = static_cast<double>(linear.feature_columns.size());
  return nn::optimizers::ftrl(std::min(rate, 1 / std::sqrt(columns)));
}

std::shared_ptr<nn::Optimizer> dnn_optimizer(const DnnOptions& dnn, double rate) {
  return dnn.optimizer ? dnn.optimizer : nn::optimizers::adagrad(rate);
}

Estimator make(CannedModel model, RunConfig config, std::optional<WarmStartSettings> warm) {
  return Estimator(canned_model_fn(std::move(model)), std::move(config), Params{}, std::move(warm));
}

Estimator linear_estimator(LinearOptions linear, Head head, RunConfig config,
                           std::optional<WarmStartSettings> warm) {
  check_linear(linear);
  auto optimizer = linear_optimizer(linear, 0.2);
  return make({std::move(linear), std::nullopt, head, optimizer}, std::move(config),
              std::move(warm));
}

Estimator dnn_estimator(DnnOptions dnn, Head head, RunConfig config,
                        std::optional<WarmStartSettings> warm) {
  check_dnn(dnn);
  auto optimizer = dnn_optimizer(dnn, 0.001);
  return make({std::nullopt, std::move(dnn), head, optimizer}, std::move(config), std::move(warm));
}

Estimator combined_estimator(LinearOptions linear, DnnOptions dnn, Head head, RunConfig config,
                             std::optional<WarmStartSettings> warm) {
  check_linear(linear);
  check_dnn(dnn);
  auto optimizer = std::make_shared<estimator_internal::SplitOptimizer>(
      std::vector<estimator_internal::SplitOptimizer::Part>{
          {"linear/", linear_optimizer(linear, 0.005)}, {"dnn/", dnn_optimizer(dnn, 0.001)}});
  return make({std::move(linear), std::move(dnn), head, optimizer}, std::move(config),
              std::move(warm));
}

}  // namespace

Estimator linear_classifier(LinearOptions linear, RunConfig config, int64_t n_classes,
                            std::optional<WarmStartSettings> warm_start_from, HeadOptions head) {
  return linear_estimator(std::move(linear),
                          estimator_internal::classification_head(n_classes, std::move(head)),
                          std::move(config), std::move(warm_start_from));
}

Estimator linear_regressor(LinearOptions linear, RunConfig config, int64_t label_dimension,
                           std::optional<WarmStartSettings> warm_start_from, HeadOptions head) {
  return linear_estimator(std::move(linear),
                          estimator_internal::regression_head(label_dimension, std::move(head)),
                          std::move(config), std::move(warm_start_from));
}

Estimator dnn_classifier(DnnOptions dnn, RunConfig config, int64_t n_classes,
                         std::optional<WarmStartSettings> warm_start_from, HeadOptions head) {
  return dnn_estimator(std::move(dnn),
                       estimator_internal::classification_head(n_classes, std::move(head)),
                       std::move(config), std::move(warm_start_from));
}

Estimator dnn_regressor(DnnOptions dnn, RunConfig config, int64_t label_dimension,
                        std::optional<WarmStartSettings> warm_start_from, HeadOptions head) {
  return dnn_estimator(std::move(dnn),
                       estimator_internal::regression_head(label_dimension, std::move(head)),
                       std::move(config), std::move(warm_start_from));
}

Estimator dnn_linear_combined_classifier(LinearOptions linear, DnnOptions dnn, RunConfig config,
                                         int64_t n_classes,
                                         std::optional<WarmStartSettings> warm_start_from,
                                         HeadOptions head) {
  return combined_estimator(std::move(linear), std::move(dnn),
                            estimator_internal::classification_head(n_classes, std::move(head)),
                            std::move(config), std::move(warm_start_from));
}

Estimator dnn_linear_combined_regressor(LinearOptions linear, DnnOptions dnn, RunConfig config,
                                        int64_t label_dimension,
                                        std::optional<WarmStartSettings> warm_start_from,
                                        HeadOptions head) {
  return combined_estimator(std::move(linear), std::move(dnn),
                            estimator_internal::regression_head(label_dimension, std::move(head)),
                            std::move(config), std::move(warm_start_from));
}

}  // namespace cadre
