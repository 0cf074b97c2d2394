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
                                          const Tensor& predictions, const Tensor& weights,
                                          Args... args) {
  auto metric = nn::current_store().metric(nn::scoped_name(name), [&] {
    return std::shared_ptr<nn::Metric>(std::make_shared<M>(name, args...));
  });
  metric->update(labels, predictions, weights);
  return metric;
}

// The batch's labels as strings: rows of a uint8 [batch, n] (or one [n]), their padding
// (trailing 0 and 0xFF bytes, padded_batch's) removed.
std::vector<std::string> label_strings(const Tensor& labels) {
  if (labels.dtype() != DType::kUInt8 || labels.rank() < 1 || labels.rank() > 2) {
    throw InvalidArgumentError(str_cat("a classifier with a label_vocabulary takes string labels ",
                                       "(uint8 [batch, n]), got ", labels.dtype(), " ",
                                       labels.shape()));
  }
  const int64_t rows = labels.rank() == 2 ? labels.shape()[0] : 1;
  const int64_t width = labels.rank() == 2 ? labels.shape()[1] : labels.shape()[0];
  const std::string bytes = io::tensor_bytes(labels);
  std::vector<std::string> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::string label = bytes.substr(static_cast<size_t>(r * width), static_cast<size_t>(width));
    while (!label.empty() && (label.back() == '\0' || label.back() == '\xff')) label.pop_back();
    out.push_back(std::move(label));
  }
  return out;
}

// Class ids [batch] (int64) from labels of any numeric type, [batch] or [batch, 1], or from
// string labels through the head's vocabulary.
Tensor class_ids_of(const Tensor& labels, int64_t n_classes,
                    const std::vector<std::string>& vocabulary) {
  if (!vocabulary.empty()) {
    std::vector<int64_t> ids;
    for (const std::string& label : label_strings(labels)) {
      auto found = std::find(vocabulary.begin(), vocabulary.end(), label);
      if (found == vocabulary.end()) {
        throw InvalidArgumentError(str_cat("the label '", label, "' is not in the classifier's ",
                                           "label_vocabulary of ", vocabulary.size(), " labels"));
      }
      ids.push_back(found - vocabulary.begin());
    }
    return Tensor::from_vector(ids);
  }
  Tensor ids = cast(reshape(labels, {-1}), DType::kInt64);
  for (int64_t id : ids.to_vector<int64_t>()) {
    if (id < 0 || id >= n_classes) {
      throw InvalidArgumentError(str_cat("a classifier of ", n_classes, " classes got the label ",
                                         id, "; labels must be class ids in [0, ", n_classes, ")"));
    }
  }
  return ids;
}

// Each example's weight, float [batch] (undefined without a weight column).
Tensor example_weights(const Head& head, const io::Features& features, int64_t batch) {
  if (head.weight_column.empty()) return Tensor();
  const Tensor* found = features.find(head.weight_column);
  if (found == nullptr || found->numel() != batch) {
    throw InvalidArgumentError(str_cat(
        "weight_column '", head.weight_column,
        "': ", found ? str_cat("the feature is ", found->shape()) : std::string("no such feature"),
        "; expected one weight per example of the batch of ", batch,
        " (keep it through the transform with numeric_column(\"", head.weight_column, "\"))"));
  }
  return reshape(cast(*found, DType::kFloat32), {batch});
}

// `weights` [batch] shaped to multiply `like` ([batch] or [batch, k]).
Tensor weights_like(const Tensor& weights, const Tensor& like) {
  return like.rank() == 2 ? reshape(weights, {-1, 1}) : weights;
}

// The loss: the (weighted) per-example losses summed over the number of them (TensorFlow's
// SUM_OVER_BATCH_SIZE, which divides by the batch, not by the weights).
EstimatorSpec finish(ModeKeys mode, const Tensor& per_example_loss, const Tensor& weights,
                     MetricOps metrics, std::shared_ptr<nn::Optimizer> optimizer) {
  Tensor weighted = weights.defined()
                        ? mul(per_example_loss, weights_like(weights, per_example_loss))
                        : per_example_loss;
  Tensor loss = mean(weighted);
  if (mode == ModeKeys::kTrain) return EstimatorSpec::train(loss, std::move(optimizer));
  Tensor w = weights.defined()
                 ? broadcast_to(weights_like(weights, per_example_loss), per_example_loss.shape())
                 : Tensor();
  metrics["average_loss"] = nn::metrics::mean(per_example_loss, w, "average_loss");
  return EstimatorSpec::eval(loss, std::move(metrics));
}

// TensorFlow's classifier signatures: serving_default and "classification" (the
// probabilities as scores, the labels as classes), "predict" (every prediction).
std::map<std::string, ExportOutput> classifier_outputs(const Head& head, int64_t n_classes,
                                                       const std::vector<std::string>& keys) {
  std::vector<std::string> names = head.label_vocabulary.empty()
                                       ? ExportOutput::class_ids(static_cast<int>(n_classes))
                                       : head.label_vocabulary;
  ExportOutput classification = ExportOutput::classification("probabilities", names);
  return {{"serving_default", classification},
          {"classification", classification},
          {"predict", ExportOutput::predict(keys)}};
}

EstimatorSpec binary_spec(const Head& head, const Tensor& logits, const Tensor& labels,
                          const io::Features& features, ModeKeys mode,
                          std::shared_ptr<nn::Optimizer> optimizer) {
  Tensor logistic = sigmoid(logits);  // [batch, 1]
  Tensor class_ids = cast(greater(logistic, scalar_like(logistic, 0.5)), DType::kInt64);
  if (mode == ModeKeys::kPredict) {
    Tensor probabilities = concat({sub(ones_like(logistic), logistic), logistic}, 1);
    return EstimatorSpec::predict(
        {{"logits", logits},
         {"logistic", logistic},
         {"probabilities", probabilities},
         {"class_ids", class_ids}},
        classifier_outputs(head, 2, {"class_ids", "logistic", "logits", "probabilities"}));
  }
  Tensor ids = class_ids_of(labels, 2, head.label_vocabulary);
  Tensor w = example_weights(head, features, logits.shape()[0]);
  Tensor y = cast(reshape(ids, {-1, 1}), DType::kFloat32);
  Tensor per_example = nn::sigmoid_cross_entropy(y, logits, kPerExample);
  if (mode == ModeKeys::kTrain) return finish(mode, per_example, w, {}, std::move(optimizer));
  Tensor p = reshape(logistic, {-1}), y_flat = reshape(y, {-1});
  using nn::Auc;
  MetricOps metrics{
      {"accuracy", nn::metrics::accuracy(ids, reshape(class_ids, {-1}), w)},
      {"precision", nn::metrics::precision(y_flat, p, w)},
      {"recall", nn::metrics::recall(y_flat, p, w)},
      {"auc", update_metric<Auc>("auc", y_flat, p, w, 200, Auc::Curve::kRoc)},
      {"auc_precision_recall",
       update_metric<Auc>("auc_precision_recall", y_flat, p, w, 200, Auc::Curve::kPr)},
      {"label/mean", nn::metrics::mean(y_flat, w, "label/mean")},
      {"prediction/mean", nn::metrics::mean(p, w, "prediction/mean")},
      {"accuracy_baseline",
       update_metric<AccuracyBaseline>("accuracy_baseline", Tensor(), y_flat, w)},
  };
  return finish(mode, per_example, w, std::move(metrics), std::move(optimizer));
}

EstimatorSpec multi_class_spec(const Head& head, const Tensor& logits, const Tensor& labels,
                               const io::Features& features, ModeKeys mode,
                               std::shared_ptr<nn::Optimizer> optimizer) {
  const int64_t n_classes = logits.shape()[1];
  Tensor class_ids = reshape(cast(argmax(logits, 1), DType::kInt64), {-1, 1});
  if (mode == ModeKeys::kPredict) {
    return EstimatorSpec::predict(
        {{"logits", logits}, {"probabilities", softmax(logits, 1)}, {"class_ids", class_ids}},
        classifier_outputs(head, n_classes, {"class_ids", "logits", "probabilities"}));
  }
  Tensor ids = class_ids_of(labels, n_classes, head.label_vocabulary);
  Tensor w = example_weights(head, features, logits.shape()[0]);
  Tensor per_example = nn::sparse_softmax_cross_entropy(ids, logits, kPerExample);
  MetricOps metrics;
  if (mode == ModeKeys::kEval) {
    metrics["accuracy"] = nn::metrics::accuracy(ids, reshape(class_ids, {-1}), w);
  }
  return finish(mode, per_example, w, std::move(metrics), std::move(optimizer));
}

EstimatorSpec regression_spec(const Head& head, const Tensor& logits, const Tensor& labels,
                              const io::Features& features, ModeKeys mode,
                              std::shared_ptr<nn::Optimizer> optimizer) {
  const int64_t dimension = logits.shape()[1];
  if (mode == ModeKeys::kPredict) {
    std::map<std::string, ExportOutput> outputs{
        {"predict", ExportOutput::predict({"predictions"})}};
    if (dimension == 1) {
      outputs["serving_default"] = ExportOutput::regression("predictions");
      outputs["regression"] = ExportOutput::regression("predictions");
    } else {
      outputs["serving_default"] = ExportOutput::predict({"predictions"});
    }
    return EstimatorSpec::predict({{"predictions", logits}}, std::move(outputs));
  }
  if (labels.numel() != logits.numel()) {
    throw InvalidArgumentError(str_cat("a regressor of label_dimension ", dimension, " got labels ",
                                       labels.shape(), " for a batch of ", logits.shape()[0]));
  }
  Tensor w = example_weights(head, features, logits.shape()[0]);
  Tensor y = cast(reshape(labels, {-1, dimension}), DType::kFloat32);
  Tensor per_example = nn::mean_squared_error(y, logits, kPerExample);
  MetricOps metrics;
  if (mode == ModeKeys::kEval) {
    Tensor wy = w.defined() ? broadcast_to(reshape(w, {-1, 1}), y.shape()) : Tensor();
    metrics["label/mean"] = nn::metrics::mean(y, wy, "label/mean");
    metrics["prediction/mean"] = nn::metrics::mean(logits, wy, "prediction/mean");
  }
  return finish(mode, per_example, w, std::move(metrics), std::move(optimizer));
}

}  // namespace

Head classification_head(int64_t n_classes, HeadOptions options) {
  if (n_classes < 2) {
    throw InvalidArgumentError(str_cat("n_classes must be at least 2, got ", n_classes));
  }
  const auto& vocabulary = options.label_vocabulary;
  if (!vocabulary.empty()) {
    std::vector<std::string> sorted = vocabulary;
    std::sort(sorted.begin(), sorted.end());
    if (static_cast<int64_t>(vocabulary.size()) != n_classes ||
        std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      throw InvalidArgumentError(str_cat(
          "label_vocabulary: expected ", n_classes, " distinct labels (n_classes), got ",
          vocabulary.size(), " labels",
          sorted.size() == vocabulary.size() && static_cast<int64_t>(vocabulary.size()) == n_classes
              ? " with a repeat"
              : ""));
    }
  }
  Head head{n_classes == 2 ? Head::Kind::kBinary : Head::Kind::kMultiClass,
            n_classes == 2 ? 1 : n_classes};
  head.weight_column = std::move(options.weight_column);
  head.label_vocabulary = std::move(options.label_vocabulary);
  return head;
}

Head regression_head(int64_t label_dimension, HeadOptions options) {
  if (label_dimension < 1) {
    throw InvalidArgumentError(
        str_cat("label_dimension must be at least 1, got ", label_dimension));
  }
  if (!options.label_vocabulary.empty()) {
    throw InvalidArgumentError(
        "label_vocabulary is for classifiers; a regressor's labels are numbers");
  }
  Head head{Head::Kind::kRegression, label_dimension};
  head.weight_column = std::move(options.weight_column);
  return head;
}

EstimatorSpec head_spec(const Head& head, const Tensor& logits, const Tensor& labels,
                        const io::Features& features, ModeKeys mode,
                        std::shared_ptr<nn::Optimizer> optimizer) {
  switch (head.kind) {
    case Head::Kind::kBinary:
      return binary_spec(head, logits, labels, features, mode, std::move(optimizer));
    case Head::Kind::kMultiClass:
      return multi_class_spec(head, logits, labels, features, mode, std::move(optimizer));
    case Head::Kind::kRegression:
      return regression_spec(head, logits, labels, features, mode, std::move(optimizer));
  }
  throw InvalidArgumentError("unknown head");
}

}  // namespace cadre::estimator_internal
