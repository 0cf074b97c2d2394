#include "cadre/estimator/model_fn.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

std::string_view mode_name(ModeKeys mode) {
  switch (mode) {
    case ModeKeys::kTrain:
      return "train";
    case ModeKeys::kEval:
      return "eval";
    case ModeKeys::kPredict:
      return "infer";
  }
  return "unknown";
}

namespace {

std::string names_of(const std::map<std::string, Params::Value>& values) {
  std::vector<std::string> names;
  for (const auto& [name, value] : values) names.push_back(name);
  return names.empty() ? "none" : join(names);
}

template <typename T>
T get_as(const Params::Value& value, const std::string& name, std::string_view wanted) {
  if (const T* v = std::get_if<T>(&value)) return *v;
  if constexpr (std::is_same_v<T, double>) {
    if (const int64_t* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  }
  throw InvalidArgumentError(str_cat("params: '", name, "' is not ", wanted));
}

}  // namespace

const Params::Value& Params::at(const std::string& name, std::string_view wanted) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    throw InvalidArgumentError(str_cat("params: no ", wanted, " parameter '", name,
                                       "'; the params hold: ", names_of(values_)));
  }
  return it->second;
}

double Params::number(const std::string& name) const {
  return get_as<double>(at(name, "number"), name, "a number");
}
double Params::number(const std::string& name, double fallback) const {
  return contains(name) ? number(name) : fallback;
}
int64_t Params::integer(const std::string& name) const {
  return get_as<int64_t>(at(name, "integer"), name, "an integer");
}
int64_t Params::integer(const std::string& name, int64_t fallback) const {
  return contains(name) ? integer(name) : fallback;
}
bool Params::flag(const std::string& name) const {
  return get_as<bool>(at(name, "flag"), name, "a flag (bool)");
}
bool Params::flag(const std::string& name, bool fallback) const {
  return contains(name) ? flag(name) : fallback;
}
std::string Params::text(const std::string& name) const {
  return get_as<std::string>(at(name, "text"), name, "text");
}
std::string Params::text(const std::string& name, const std::string& fallback) const {
  return contains(name) ? text(name) : fallback;
}

EstimatorSpec EstimatorSpec::train(Tensor loss, std::shared_ptr<nn::Optimizer> optimizer) {
  return train(std::move(loss), TrainOp{std::move(optimizer), ""});
}

EstimatorSpec EstimatorSpec::train(Tensor loss, TrainOp train_op) {
  EstimatorSpec spec;
  spec.mode = ModeKeys::kTrain;
  spec.loss = std::move(loss);
  spec.train_op = std::move(train_op);
  return spec;
}

EstimatorSpec EstimatorSpec::eval(Tensor loss, MetricOps eval_metric_ops) {
  EstimatorSpec spec;
  spec.mode = ModeKeys::kEval;
  spec.loss = std::move(loss);
  spec.eval_metric_ops = std::move(eval_metric_ops);
  return spec;
}

EstimatorSpec EstimatorSpec::predict(std::map<std::string, Tensor> predictions,
                                     std::map<std::string, ExportOutput> export_outputs) {
  EstimatorSpec spec;
  spec.mode = ModeKeys::kPredict;
  spec.predictions = std::move(predictions);
  spec.export_outputs = std::move(export_outputs);
  return spec;
}

EstimatorSpec& EstimatorSpec::with_tensors(std::map<std::string, Tensor> values) {
  tensors = std::move(values);
  return *this;
}
EstimatorSpec& EstimatorSpec::with_scalar_summaries(std::map<std::string, Tensor> values) {
  scalar_summaries = std::move(values);
  return *this;
}
EstimatorSpec& EstimatorSpec::with_hooks(Hooks hooks) {
  switch (mode) {
    case ModeKeys::kTrain:
      training_hooks = std::move(hooks);
      break;
    case ModeKeys::kEval:
      evaluation_hooks = std::move(hooks);
      break;
    case ModeKeys::kPredict:
      prediction_hooks = std::move(hooks);
      break;
  }
  return *this;
}

namespace {

void check_scalar_loss(const Tensor& loss, ModeKeys mode) {
  if (!loss.defined()) {
    throw InvalidArgumentError(
        str_cat("EstimatorSpec: mode ", mode_name(mode), " needs `loss`, but the spec has none"));
  }
  if (loss.numel() != 1) {
    throw InvalidArgumentError(
        str_cat("EstimatorSpec: `loss` must be a scalar, got shape ", loss.shape()));
  }
  if (!is_floating(loss.dtype())) {
    throw InvalidArgumentError(
        str_cat("EstimatorSpec: `loss` must be floating point, got ", dtype_name(loss.dtype())));
  }
}

// The prediction `key` that signature `signature` names as its `role`; InvalidArgumentError
// when absent.
const Tensor& export_key(const std::string& signature, const std::string& role,
                         const std::string& key, const std::map<std::string, Tensor>& predictions) {
  auto found = predictions.find(key);
  if (found == predictions.end()) {
    throw InvalidArgumentError(str_cat("EstimatorSpec: export output '", signature, "' names ",
                                       role, " '", key, "', which is not among the predictions"));
  }
  return found->second;
}

// A classification or regression signature's predictions must be what a server can turn
// into TensorFlow Serving's answers: checked here, so that a bad spec fails at export rather
// than on a request.
void check_export_output(const std::string& signature, const ExportOutput& output,
                         const std::map<std::string, Tensor>& predictions) {
  auto fail = [&](const std::string& what) {
    return InvalidArgumentError(str_cat("EstimatorSpec: export output '", signature, "' (",
                                        output.kind_name(), "): ", what));
  };
  switch (output.kind) {
    case ExportOutput::Kind::kPredict:
      if (output.outputs.empty()) throw fail("names no prediction");
      for (const std::string& key : output.outputs)
        export_key(signature, "prediction", key, predictions);
      return;
    case ExportOutput::Kind::kClassify: {
      if (output.scores.empty() && output.classes.empty()) throw fail("needs scores or classes");
      int64_t columns = -1;
      if (!output.scores.empty()) {
        const Tensor& scores = export_key(signature, "scores", output.scores, predictions);
        if (!is_floating(scores.dtype()) || scores.rank() != 2) {
          throw fail(str_cat("scores '", output.scores,
                             "' must be floating point [batch, classes], got ",
                             dtype_name(scores.dtype()), " ", scores.shape()));
        }
        columns = scores.dim(1);
      }
      if (!output.classes.empty()) {
        const Tensor& classes = export_key(signature, "classes", output.classes, predictions);
        if (is_floating(classes.dtype()) || classes.dtype() == DType::kBool ||
            (classes.rank() != 1 && classes.rank() != 2)) {
          throw fail(str_cat("classes '", output.classes,
                             "' must be integer class ids [batch] or [batch, classes], got ",
                             dtype_name(classes.dtype()), " ", classes.shape()));
        }
        int64_t per_example = classes.rank() == 2 ? classes.dim(1) : 1;
        if (columns >= 0 && per_example != columns) {
          throw fail(str_cat("classes '", output.classes, "' has ", per_example,
                             " per example where scores '", output.scores, "' has ", columns));
        }
      } else if (!output.class_names.empty() &&
                 static_cast<int64_t>(output.class_names.size()) != columns) {
        throw fail(
            str_cat(output.class_names.size(), " class names for ", columns, " score columns"));
      }
      return;
    }
    case ExportOutput::Kind::kRegress: {
      const Tensor& value = export_key(signature, "value", output.value, predictions);
      if (!is_floating(value.dtype()) || value.rank() < 1 || value.rank() > 2 ||
          (value.rank() == 2 && value.dim(1) != 1)) {
        throw fail(str_cat("value '", output.value,
                           "' must be floating point [batch] or [batch, 1], got ",
                           dtype_name(value.dtype()), " ", value.shape()));
      }
      return;
    }
  }
}

}  // namespace

void EstimatorSpec::validate(ModeKeys expected) const {
  if (mode != expected) {
    throw InvalidArgumentError(str_cat("EstimatorSpec: model_fn was called in mode ",
                                       mode_name(expected), " but returned a spec for mode ",
                                       mode_name(mode), " (field `mode`)"));
  }
  switch (expected) {
    case ModeKeys::kTrain:
      check_scalar_loss(loss, expected);
      if (!train_op.optimizer) {
        throw InvalidArgumentError(
            "EstimatorSpec: mode train needs `train_op` with an optimizer, but it has none");
      }
      break;
    case ModeKeys::kEval:
      check_scalar_loss(loss, expected);
      for (const auto& [name, metric] : eval_metric_ops) {
        if (!metric) {
          throw InvalidArgumentError(
              str_cat("EstimatorSpec: `eval_metric_ops` entry '", name, "' is null"));
        }
      }
      break;
    case ModeKeys::kPredict:
      if (predictions.empty()) {
        throw InvalidArgumentError(
            "EstimatorSpec: mode infer needs `predictions`, but the spec has none");
      }
      break;
  }
  // Predictions are per example: every one must share the batch dimension.
  int64_t batch = -1;
  std::string first;
  for (const auto& [name, value] : predictions) {
    if (!value.defined() || value.rank() == 0) {
      throw InvalidArgumentError(str_cat("EstimatorSpec: prediction '", name,
                                         "' must have the batch as its first dimension"));
    }
    if (batch >= 0 && value.dim(0) != batch) {
      throw InvalidArgumentError(str_cat("EstimatorSpec: predictions '", first, "' and '", name,
                                         "' disagree in batch size (", batch, " and ", value.dim(0),
                                         ")"));
    }
    if (batch < 0) {
      batch = value.dim(0);
      first = name;
    }
  }
  for (const auto& [signature, output] : export_outputs) {
    check_export_output(signature, output, predictions);
  }
}

ExportOutput ExportOutput::classification(std::string scores,
                                          std::vector<std::string> class_names) {
  ExportOutput output;
  output.kind = Kind::kClassify;
  output.scores = std::move(scores);
  output.class_names = std::move(class_names);
  return output;
}

ExportOutput ExportOutput::classification_with_classes(std::string scores, std::string classes,
                                                       std::vector<std::string> class_names) {
  ExportOutput output = classification(std::move(scores), std::move(class_names));
  output.classes = std::move(classes);
  return output;
}

ExportOutput ExportOutput::regression(std::string value) {
  ExportOutput output;
  output.kind = Kind::kRegress;
  output.value = std::move(value);
  return output;
}

std::vector<std::string> ExportOutput::class_ids(int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back(std::to_string(i));
  return ids;
}

std::vector<std::string> ExportOutput::keys() const {
  switch (kind) {
    case Kind::kPredict:
      return outputs;
    case Kind::kClassify: {
      std::vector<std::string> keys;
      if (!scores.empty()) keys.push_back(scores);
      if (!classes.empty() && classes != scores) keys.push_back(classes);
      return keys;
    }
    case Kind::kRegress:
      return {value};
  }
  return {};
}

std::string_view ExportOutput::kind_name() const {
  switch (kind) {
    case Kind::kPredict:
      return "predict";
    case Kind::kClassify:
      return "classify";
    case Kind::kRegress:
      return "regress";
  }
  return "predict";
}

}  // namespace cadre
