#include "estimator/canned_head.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/nn/losses.h"
#include "cadre/nn/metrics.h"
#include "cadre/nn/variable_store.h"
#include "cadre/ops/activation.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/nn.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"

namespace cadre::estimator_internal {
namespace {

// Per-example losses, reduced by the head: the training loss averages them, average_loss too.
const nn::LossOptions kPerExample{Tensor(), nn::Reduction::kNone};

// TensorFlow's accuracy_baseline: the accuracy of always predicting the more frequent
// class, max(label mean, 1 - label mean).
class AccuracyBaseline : public nn::Mean {
 public:
  using nn::Mean::Mean;
  double result() const override {
    double mean = nn::Mean::result();
    return std::max(mean, 1 - mean);
  }
};

// The metric `name` of the current store, made by `make` the first time, updated.
template <typename M, typename... Args>
std::shared_ptr<nn::Metric> update_metric(const std::string& name, const Tensor& labels,
                                          const Tensor& predictions, Args... args) {
  auto metric = nn::current_store().metric(nn::scoped_name(name), [&] {
    return std::shared_ptr<nn::Metric>(std::make_shared<M>(name, args...));
  });
  metric->update(labels, predictions);
  return metric;
}

// Class ids [batch] (int64) from labels of any numeric type, [batch] or [batch, 1].
Tensor class_ids_of(const Tensor& labels, int64_t n_classes) {
  Tensor ids = cast(reshape(labels, {-1}), DType::kInt64);
  for (int64_t id : ids.to_vector<int64_t>()) {
    if (id < 0 || id >= n_classes) {
      throw InvalidArgumentError(str_cat("a classifier of ", n_classes, " classes got the label ",
                                         id, "; labels must be class ids in [0, ", n_classes, ")"));
    }
  }
  return ids;
}

EstimatorSpec finish(ModeKeys mode, const Tensor& per_example_loss, MetricOps metrics,
                     std::shared_ptr<nn::Optimizer> optimizer) {
  Tensor loss = mean(per_example_loss);
  if (mode == ModeKeys::kTrain) return EstimatorSpec::train(loss, std::move(optimizer));
  metrics["average_loss"] = nn::metrics::mean(per_example_loss, Tensor(), "average_loss");
  return EstimatorSpec::eval(loss, std::move(metrics));
}

EstimatorSpec binary_spec(const Tensor& logits, const Tensor& labels, ModeKeys mode,
                          std::shared_ptr<nn::Optimizer> optimizer) {
  Tensor logistic = sigmoid(logits);  // [batch, 1]
  Tensor class_ids = cast(greater(logistic, scalar_like(logistic, 0.5)), DType::kInt64);
  if (mode == ModeKeys::kPredict) {
    Tensor probabilities = concat({sub(ones_like(logistic), logistic), logistic}, 1);
    return EstimatorSpec::predict({{"logits", logits},
                                   {"logistic", logistic},
                                   {"probabilities", probabilities},
                                   {"class_ids", class_ids}});
  }
  Tensor ids = class_ids_of(labels, 2);
  Tensor y = cast(reshape(ids, {-1, 1}), DType::kFloat32);
  Tensor per_example = nn::sigmoid_cross_entropy(y, logits, kPerExample);
  if (mode == ModeKeys::kTrain) return finish(mode, per_example, {}, std::move(optimizer));
  Tensor p = reshape(logistic, {-1}), y_flat = reshape(y, {-1});
  using nn::Auc;
  MetricOps metrics{
      {"accuracy", nn::metrics::accuracy(ids, reshape(class_ids, {-1}))},
      {"precision", nn::metrics::precision(y_flat, p)},
      {"recall", nn::metrics::recall(y_flat, p)},
      {"auc", update_metric<Auc>("auc", y_flat, p, 200, Auc::Curve::kRoc)},
      {"auc_precision_recall",
       update_metric<Auc>("auc_precision_recall", y_flat, p, 200, Auc::Curve::kPr)},
      {"label/mean", nn::metrics::mean(y_flat, Tensor(), "label/mean")},
      {"prediction/mean", nn::metrics::mean(p, Tensor(), "prediction/mean")},
      {"accuracy_baseline", update_metric<AccuracyBaseline>("accuracy_baseline", Tensor(), y_flat)},
  };
  return finish(mode, per_example, std::move(metrics), std::move(optimizer));
}

EstimatorSpec multi_class_spec(const Tensor& logits, const Tensor& labels, ModeKeys mode,
                               std::shared_ptr<nn::Optimizer> optimizer) {
  Tensor class_ids = reshape(cast(argmax(logits, 1), DType::kInt64), {-1, 1});
  if (mode == ModeKeys::kPredict) {
    return EstimatorSpec::predict(
        {{"logits", logits}, {"probabilities", softmax(logits, 1)}, {"class_ids", class_ids}});
  }
  Tensor ids = class_ids_of(labels, logits.shape()[1]);
  Tensor per_example = nn::sparse_softmax_cross_entropy(ids, logits, kPerExample);
  MetricOps metrics;
  if (mode == ModeKeys::kEval) {
    metrics["accuracy"] = nn::metrics::accuracy(ids, reshape(class_ids, {-1}));
  }
  return finish(mode, per_example, std::move(metrics), std::move(optimizer));
}

EstimatorSpec regression_spec(const Tensor& logits, const Tensor& labels, ModeKeys mode,
                              std::shared_ptr<nn::Optimizer> optimizer) {
  if (mode == ModeKeys::kPredict) return EstimatorSpec::predict({{"predictions", logits}});
  const int64_t dimension = logits.shape()[1];
  if (labels.numel() != logits.numel()) {
    throw InvalidArgumentError(str_cat("a regressor of label_dimension ", dimension, " got labels ",
                                       labels.shape(), " for a batch of ", logits.shape()[0]));
  }
  Tensor y = cast(reshape(labels, {-1, dimension}), DType::kFloat32);
  Tensor per_example = nn::mean_squared_error(y, logits, kPerExample);
  MetricOps metrics;
  if (mode == ModeKeys::kEval) {
    metrics["label/mean"] = nn::metrics::mean(y, Tensor(), "label/mean");
    metrics["prediction/mean"] = nn::metrics::mean(logits, Tensor(), "prediction/mean");
  }
  return finish(mode, per_example, std::move(metrics), std::move(optimizer));
}

}  // namespace

Head classification_head(int64_t n_classes) {
  if (n_classes < 2) {
    throw InvalidArgumentError(str_cat("n_classes must be at least 2, got ", n_classes));
  }
  if (n_classes == 2) return {Head::Kind::kBinary, 1};
  return {Head::Kind::kMultiClass, n_classes};
}

Head regression_head(int64_t label_dimension) {
  if (label_dimension < 1) {
    throw InvalidArgumentError(
        str_cat("label_dimension must be at least 1, got ", label_dimension));
  }
  return {Head::Kind::kRegression, label_dimension};
}

EstimatorSpec head_spec(const Head& head, const Tensor& logits, const Tensor& labels, ModeKeys mode,
                        std::shared_ptr<nn::Optimizer> optimizer) {
  switch (head.kind) {
    case Head::Kind::kBinary:
      return binary_spec(logits, labels, mode, std::move(optimizer));
    case Head::Kind::kMultiClass:
      return multi_class_spec(logits, labels, mode, std::move(optimizer));
    case Head::Kind::kRegression:
      return regression_spec(logits, labels, mode, std::move(optimizer));
  }
  throw InvalidArgumentError("unknown head");
}

}  // namespace cadre::estimator_internal
