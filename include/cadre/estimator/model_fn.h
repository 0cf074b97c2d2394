// What a user's model_fn receives and returns: the mode, the params map and the
// EstimatorSpec.
//
//   EstimatorSpec model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
//                          const Params& params);
//
// model_fn is called once per step (per batch) on the thread that runs the step, with the
// Estimator's VariableStore current: layers find their variables by name, created on the
// first call and restored from the checkpoint when there is one.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cadre/io/element.h"
#include "cadre/nn/metrics.h"
#include "cadre/nn/optimizer.h"
#include "cadre/tensor/tensor.h"

namespace cadre {

// TensorFlow's ModeKeys: TRAIN, EVAL, PREDICT ("train", "eval", "infer").
enum class ModeKeys { kTrain, kEval, kPredict };
std::string_view mode_name(ModeKeys mode);

// Hyperparameters handed to model_fn: names to numbers, flags or text.
class Params {
 public:
  using Value = std::variant<bool, int64_t, double, std::string>;

  Params() = default;
  Params(std::initializer_list<std::pair<const std::string, Value>> values) : values_(values) {}

  void set(const std::string& name, Value value) { values_[name] = std::move(value); }
  bool contains(const std::string& name) const { return values_.count(name) != 0; }
  // The value of `name` as the type asked for (an integer reads as a double too); throws
  // InvalidArgumentError naming the parameter and the ones present when it is absent or
  // of another type. The overloads with a default return it when `name` is absent.
  double number(const std::string& name) const;
  double number(const std::string& name, double fallback) const;
  int64_t integer(const std::string& name) const;
  int64_t integer(const std::string& name, int64_t fallback) const;
  bool flag(const std::string& name) const;
  bool flag(const std::string& name, bool fallback) const;
  std::string text(const std::string& name) const;
  std::string text(const std::string& name, const std::string& fallback) const;
  const std::map<std::string, Value>& values() const { return values_; }

 private:
  const Value& at(const std::string& name, std::string_view wanted) const;
  std::map<std::string, Value> values_;
};

// How to turn the loss into an update: the optimizer (its options carry gradient clipping),
// and which trainable variables it updates.
struct TrainOp {
  std::shared_ptr<nn::Optimizer> optimizer;
  // An ECMAScript regular expression matched against whole variable names; empty updates
  // every trainable variable (TensorFlow's var_list).
  std::string variables;
};

// What one exported signature is (tf.estimator.export's PredictOutput, ClassificationOutput
// and RegressionOutput), naming the prediction keys it reads. A server answers a predict
// signature's :predict (tensors in, these keys out), a classification signature's :classify
// and a regression signature's :regress (tf.Examples in, their features turned into the
// model's inputs by the export's input specs).
//
//   EstimatorSpec::predict(predictions, {
//       {"serving_default", {"class", "probabilities"}},               // predict
//       {"classification", ExportOutput::classification("probabilities",
//                                                        ExportOutput::class_ids(10))},
//       {"regression", ExportOutput::regression("value")}});
//
// A braced list of keys (or a vector) is a predict signature, so specs written before the
// other kinds existed read unchanged.
struct ExportOutput {
  enum class Kind { kPredict, kClassify, kRegress };
  Kind kind = Kind::kPredict;
  // kPredict: the prediction keys returned.
  std::vector<std::string> outputs;
  // kClassify: `scores`, a float prediction [batch, K], and the K classes' labels, either
  // fixed (`class_names`, one per score column, as a canned classifier's label vocabulary or
  // "0".."K-1") or per example (`classes`, an integer prediction [batch, K] or [batch] of
  // class ids, written as decimal labels, or as class_names[id] when class_names is given
  // too). At least one of scores and classes; without scores each class gets score 0,
  // without either labels each gets the empty label (as TensorFlow Serving answers).
  std::string scores;
  std::string classes;
  std::vector<std::string> class_names;
  // kRegress: `value`, a float prediction [batch] or [batch, 1].
  std::string value;

  ExportOutput() = default;
  ExportOutput(std::initializer_list<std::string> keys) : outputs(keys) {}
  ExportOutput(std::vector<std::string> keys) : outputs(std::move(keys)) {}  // NOLINT

  static ExportOutput predict(std::vector<std::string> keys) {
    return ExportOutput(std::move(keys));
  }
  // Labels are class_names[j] for score column j.
  static ExportOutput classification(std::string scores, std::vector<std::string> class_names);
  // Labels from the `classes` prediction (ids; mapped through `class_names` when given).
  static ExportOutput classification_with_classes(std::string scores, std::string classes,
                                                  std::vector<std::string> class_names = {});
  static ExportOutput regression(std::string value);
  // "0", "1", ..., "n-1": the labels of a classifier without a label vocabulary.
  static std::vector<std::string> class_ids(int n);

  // The prediction keys the signature reads (what Predictor::predict returns for it).
  std::vector<std::string> keys() const;
  // "predict", "classify" or "regress" (TensorFlow Serving's method names' last part).
  std::string_view kind_name() const;
};

class Hook;
using Hooks = std::vector<std::shared_ptr<Hook>>;
using MetricOps = std::map<std::string, std::shared_ptr<nn::Metric>>;

// What model_fn returns for one step. Build it with the constructor for the mode, then add
// optional parts:
//
//   return EstimatorSpec::train(loss, nn::optimizers::adam(1e-3)).with_tensors({{"logits",
//   logits}});
//
// The Estimator checks a spec against the mode it called model_fn with and throws
// InvalidArgumentError naming the missing field (see validate).
struct EstimatorSpec {
  ModeKeys mode = ModeKeys::kTrain;
  // A scalar (float) in TRAIN and EVAL.
  Tensor loss;
  TrainOp train_op;
  // Per-example outputs, each with the batch as its first dimension. Required in PREDICT.
  std::map<std::string, Tensor> predictions;
  // Streaming metrics reported by evaluate(), usually from nn::metrics::* (which keeps one
  // metric per name in the store across the steps of an evaluation).
  MetricOps eval_metric_ops;
  // Extra named tensors that hooks may ask for by name (LoggingTensorHook).
  std::map<std::string, Tensor> tensors;
  // Scalars written to the summaries every save_summary_steps, besides loss and learning rate.
  std::map<std::string, Tensor> scalar_summaries;
  // Hooks of the mode's run; only the spec of the first step of a run contributes them.
  Hooks training_hooks;
  Hooks evaluation_hooks;
  Hooks prediction_hooks;
  // Signature name -> what it exports (ExportOutput: the prediction keys of a predict
  // signature, or a classification or regression output), for export(); empty: one
  // signature, "serving_default", predicting every prediction.
  std::map<std::string, ExportOutput> export_outputs;

  static EstimatorSpec train(Tensor loss, std::shared_ptr<nn::Optimizer> optimizer);
  static EstimatorSpec train(Tensor loss, TrainOp train_op);
  static EstimatorSpec eval(Tensor loss, MetricOps eval_metric_ops = {});
  static EstimatorSpec predict(std::map<std::string, Tensor> predictions,
                               std::map<std::string, ExportOutput> export_outputs = {});

  EstimatorSpec& with_tensors(std::map<std::string, Tensor> values);
  EstimatorSpec& with_scalar_summaries(std::map<std::string, Tensor> values);
  EstimatorSpec& with_hooks(Hooks hooks);  // the hooks of this spec's mode

  // Throws InvalidArgumentError naming the field when the spec lacks what `expected` needs
  // (TRAIN: a scalar loss and an optimizer; EVAL: a scalar loss; PREDICT: predictions with
  // one batch dimension, and export outputs naming predictions of the right dtype and
  // rank) or was made for another mode.
  void validate(ModeKeys expected) const;
};

using ModelFn = std::function<EstimatorSpec(const io::Features& features, const Tensor& labels,
                                            ModeKeys mode, const Params& params)>;

}  // namespace cadre
