// Metrics by Keras name and as objects, over the Estimator's mergeable nn::Metric.
#include "cadre/keras/metrics.h"

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"

namespace cadre::keras {

namespace {

template <typename M>
Metric::Factory factory() {
  return [](const std::string& name) { return std::make_shared<M>(name); };
}

Tensor like_outputs(const Tensor& labels, const Tensor& outputs) {
  Tensor y = cast(labels, outputs.dtype());
  if (y.rank() + 1 == outputs.rank()) y = expand_dims(y, -1);
  return y;
}

// Per-example errors fed to a Mean.
Metric::Prepare error_of(bool squared) {
  return [squared](const Tensor& labels, const Tensor& outputs) {
    Tensor d = outputs - like_outputs(labels, outputs);
    Tensor e = squared ? square(d) : abs(d);
    return std::make_pair(Tensor(), e.rank() > 1 ? mean(e, {-1}) : e);
  };
}

Metric by_name(const std::string& name) {
  if (name == "accuracy" || name == "acc" || name == "sparse_categorical_accuracy" ||
      name == "categorical_accuracy") {
    Metric::Prepare prepare;
    if (name == "categorical_accuracy") {
      prepare = [](const Tensor& labels, const Tensor& outputs) {
        return std::make_pair(argmax(labels, -1), outputs);
      };
    }
    return Metric(name, factory<nn::Accuracy>(), prepare);
  }
  if (name == "precision") return Metric(name, factory<nn::Precision>());
  if (name == "recall") return Metric(name, factory<nn::Recall>());
  if (name == "auc") return Metric(name, factory<nn::Auc>());
  if (name == "mse" || name == "mean_squared_error") {
    return Metric(name, factory<nn::Mean>(), error_of(true));
  }
  if (name == "mae" || name == "mean_absolute_error") {
    return Metric(name, factory<nn::Mean>(), error_of(false));
  }
  throw InvalidArgumentError(
      str_cat("unknown metric '", name, "'; known metrics: ", join(metrics::names())));
}

}  // namespace

Metric::Metric(std::string name, Factory factory, Prepare prepare)
    : name_(std::move(name)), factory_(std::move(factory)), prepare_(std::move(prepare)) {
  if (name_.empty() || name_ == "loss") {
    throw InvalidArgumentError(str_cat("a metric needs a name other than '", name_, "'"));
  }
  if (!factory_) throw InvalidArgumentError(str_cat("metric '", name_, "' has no factory"));
}
Metric::Metric(const char* name) : Metric(std::string(name)) {}
Metric::Metric(const std::string& name) : Metric(by_name(name)) {}

std::shared_ptr<nn::Metric> Metric::make() const { return factory_(name_); }

void Metric::update(nn::Metric& metric, const Tensor& labels, const Tensor& outputs) const {
  if (prepare_) {
    auto [l, p] = prepare_(labels, outputs);
    metric.update(l, p);
  } else {
    metric.update(labels, outputs);
  }
}

SparseCategoricalAccuracy::SparseCategoricalAccuracy(std::string name)
    : Metric(std::move(name), factory<nn::Accuracy>()) {}

namespace metrics {
std::vector<std::string> names() {
  return {"accuracy",
          "acc",
          "sparse_categorical_accuracy",
          "categorical_accuracy",
          "precision",
          "recall",
          "auc",
          "mse",
          "mean_squared_error",
          "mae",
          "mean_absolute_error"};
}
}  // namespace metrics

}  // namespace cadre::keras
