// Metrics for Model::compile, by object or by Keras name ("accuracy", "mae", "auc", ...).
// In training, fit reports each metric's mean over the epoch's batches (as Keras does);
// evaluate() and validation stream them over the whole input with the Estimator's
// mergeable metrics, so every replica and worker adds up into one result.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cadre/nn/metrics.h"

namespace cadre::keras {

class Metric {
 public:
  // Makes a fresh nn::Metric named `name` (one per replica and run).
  using Factory = std::function<std::shared_ptr<nn::Metric>(const std::string& name)>;
  // What the metric is updated with, given labels and the model's output (default: both
  // as they are).
  using Prepare =
      std::function<std::pair<Tensor, Tensor>(const Tensor& labels, const Tensor& outputs)>;

  Metric(std::string name, Factory factory, Prepare prepare = {});
  // The metric of that Keras name; an unknown name is an InvalidArgumentError listing the
  // known ones.
  Metric(const char* name);         // NOLINT: implicit, as compile takes names
  Metric(const std::string& name);  // NOLINT
  const std::string& name() const { return name_; }
  std::shared_ptr<nn::Metric> make() const;
  // Updates `metric` with one batch.
  void update(nn::Metric& metric, const Tensor& labels, const Tensor& outputs) const;

 private:
  std::string name_;
  Factory factory_;
  Prepare prepare_;
};

// Class ids against scores (argmax) or ids.
class SparseCategoricalAccuracy : public Metric {
 public:
  explicit SparseCategoricalAccuracy(std::string name = "sparse_categorical_accuracy");
};

namespace metrics {
// The Keras names compile accepts.
std::vector<std::string> names();
}  // namespace metrics

}  // namespace cadre::keras
